"""The Query page's parts: running a query through the guarded runner, the result's table, chart
and downloads, the schema browser, saved queries. The page (views/query.py) only arranges them.

Pure helpers first (unit-tested), the Streamlit glue after. No SQL here: queries come from the
user, the canned list (db/canned.py) or the saved ones (db/saved_queries.py).
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import altair as alt
import streamlit as st

from app import query_output
from app.ui import charts
from core.errors import QueryError, SweetspotError
from core.settings import Settings, query_db_url
from core.text import markdown
from db import canned, query_runner, query_views, saved_queries

PARAM = re.compile(r"(?<!:):([A-Za-z_][A-Za-z0-9_]*)")
NONE = "(none)"
ERROR_LIMIT = 2000  # characters of an error shown on the page


@dataclass(frozen=True)
class Outcome:
    result: query_runner.Result | None
    error: str = ""


def warm(db_url: str) -> None:
    """The query workers started while the page draws, so its first Run finds one warm."""
    query_runner.warm(db_url)


def params_in(sql: str) -> list[str]:
    """The ``:name`` parameters a query text binds, in order of appearance."""
    return list(dict.fromkeys(PARAM.findall(sql)))


def run(settings: Settings, sql: str, given: Mapping[str, str], name: str | None = None) -> Outcome:
    """Run ``sql`` with the page's parameter inputs (typed by the canned query ``name``, if any)."""
    q = settings.query
    limits = query_runner.Limits(q.timeout_s, q.row_limit, q.max_timeout_s)
    try:
        template = canned.BY_NAME.get(name or "")
        if template is not None and template.sql.strip() == sql.strip():
            params = canned.bind(template, {k: v for k, v in given.items() if v}, time.time())
        else:
            params = {k: given.get(k, "") for k in params_in(sql)}
        return Outcome(query_runner.run_query(query_db_url(settings), sql, limits, params))
    except SweetspotError as exc:
        return Outcome(None, exc.one_line())


PERIOD, COMPLETE, IN_PROGRESS = "period", "complete", "in progress"


def in_progress(result: query_runner.Result, x: str, now: float) -> str | None:
    """The last value of the time column ``x`` when its period (the smallest gap between two of its
    values: a day for a per-day query) has not ended at ``now``: that row sums only part of it (the
    day so far), so its line would plunge. None when every period is over, or one value says no period."""
    i = result.columns.index(x)
    times = sorted({t for t in (_epoch(row[i]) for row in result.rows) if t is not None})
    gaps = [b - a for a, b in zip(times, times[1:], strict=False) if b > a]
    if not gaps or times[-1] + min(gaps) <= now:
        return None
    last = times[-1]
    return next(str(query_output.plain(row[i])) for row in result.rows if _epoch(row[i]) == last)


def _epoch(value: Any) -> float | None:
    if isinstance(value, dt.datetime):
        return (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).timestamp()
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC).timestamp()
    try:
        parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)).timestamp()


def chart(result: query_runner.Result, x: str, y: str, colour: str | None, now: float | None = None) -> alt.Chart:
    """Lines over a time x column, points otherwise; ``colour`` splits the series. Over time, a last
    period still in progress at ``now`` (:func:`in_progress`) is a faint point of its own, never joined
    to the line: its partial sum read as a plunge."""
    records = query_output.records(result)
    temporal = x in query_output.time_columns(result)
    partial = in_progress(result, x, time.time() if now is None else now) if temporal else None
    if partial is not None:
        records = [{**r, PERIOD: IN_PROGRESS if str(r[x]) == partial else COMPLETE} for r in records]
    base = alt.Chart(alt.InlineData(values=records))
    mark = base.mark_line(point=True) if temporal else base.mark_point()
    # ",.6~r": six significant digits with trailing zeros trimmed: a tick reads "0", not "0.000000"
    number_axis = alt.Axis(format=",.6~r")
    # 16 px inside the plot at each end: the last point (today's, in progress) no longer sits on the edge
    # the time labels of every other chart (24-hour clock): Vega's own default reads "03 PM"
    time_axis = alt.Axis(format=charts.TIME_FORMAT, labelFlush=True)
    x_enc = (alt.X(x, type="temporal", title=x, scale=alt.Scale(padding=16), axis=time_axis) if temporal
             else alt.X(x, type="quantitative", title=x, axis=number_axis))  # fmt: skip
    enc: dict[str, Any] = {"x": x_enc,
                           "y": alt.Y(y, type="quantitative", title=y, axis=number_axis), "tooltip": [alt.Tooltip(c, type="nominal") for c in result.columns]}  # fmt: skip
    if colour:
        enc["color"] = alt.Color(colour, type="nominal", title=colour)
    if partial is not None:
        enc["detail"] = alt.Detail(PERIOD, type="nominal")  # a line per period kind: none joins the partial one
        enc["opacity"] = alt.Opacity(PERIOD, type="nominal", title=PERIOD,
                                     scale=alt.Scale(domain=[COMPLETE, IN_PROGRESS], range=[1.0, 0.45]))  # fmt: skip
    drawn: alt.Chart = mark.encode(**enc).properties(height=320).interactive()
    return drawn


def default_colour(result: query_runner.Result, x: str, y: str) -> str | None:
    """The column that splits the chart's series by default: the first text column with several values
    (``target``), so rows of several targets are not one zigzag line; None when there is none."""
    numbers, times = numeric_columns(result), query_output.time_columns(result)
    for i, name in enumerate(result.columns):
        if name in (x, y) or name in numbers or name in times:
            continue
        values = {row[i] for row in result.rows[:500]}
        if 1 < len(values) <= 20 and all(isinstance(v, str) for v in values):
            return name
    return None


def numeric_columns(result: query_runner.Result) -> list[str]:
    out = []
    for i, name in enumerate(result.columns):
        values = [v for v in (query_output.plain(r[i]) for r in result.rows[:50]) if v is not None]
        if values and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            out.append(name)
    return out


# --- Streamlit glue ---------------------------------------------------------------------------------
def choose_query(db_url: str) -> tuple[str | None, str]:
    """The canned or saved query picked (name, SQL); the URL's ``sql``/``canned`` on first load."""
    saved = {s.name: s.sql for s in _saved(db_url)}
    options = [NONE, *canned.BY_NAME, *(f"saved: {n}" for n in saved)]
    url_canned = st.query_params.get("canned")
    index = options.index(url_canned) if url_canned in options else 0
    picked = st.selectbox("Canned and saved queries", options, index=index,
                          format_func=lambda o: o if o not in canned.BY_NAME else f"{o} — {canned.BY_NAME[o].question}")  # fmt: skip
    if picked in canned.BY_NAME:
        return picked, canned.BY_NAME[picked].sql
    if picked.startswith("saved: "):
        return None, saved[picked.removeprefix("saved: ")]
    return None, st.query_params.get("sql", "SELECT time, target, tokens_per_s, ttft_p95_s, in_sweet_spot\nFROM minutes ORDER BY ts DESC LIMIT 60")


def _saved(db_url: str) -> list[saved_queries.SavedQuery]:
    try:
        return saved_queries.list_saved(db_url)
    except SweetspotError as exc:
        st.warning(f"Saved queries unavailable: {exc.one_line()}")
        return []


def param_inputs(sql: str, name: str | None) -> dict[str, str]:
    template = canned.BY_NAME.get(name or "")
    meanings = {p.name: p.meaning for p in template.params} if template else {}
    names = params_in(sql)
    cols = st.columns(max(len(names), 1))
    return {n: cols[i].text_input(n, value=st.query_params.get(f"p.{n}", ""), help=meanings.get(n, "a parameter of the query"))
            for i, n in enumerate(names)}  # fmt: skip


def show_result(outcome: Outcome) -> None:
    if outcome.error:
        # the error quotes the query (a shared ?sql= link's): plain text, never Markdown
        st.error(markdown(outcome.error, ERROR_LIMIT), icon=":material/block:")
        return
    result = outcome.result
    assert result is not None
    st.caption(query_output.summary(result))
    st.dataframe(query_output.records(result), width="stretch", hide_index=True)
    a, b = st.columns(2)
    a.download_button("Download CSV", query_output.to_csv(result), "query.csv", "text/csv")
    b.download_button("Download JSON", query_output.to_json(result), "query.json", "application/json")
    numbers = numeric_columns(result)
    if not result.rows or not numbers:
        return
    times = query_output.time_columns(result)
    x_options = [*times, *[c for c in numbers if c not in times]]
    c1, c2, c3 = st.columns(3)
    x = c1.selectbox("x", x_options)
    y = c2.selectbox("y", [c for c in numbers if c != x] or numbers)
    colours = [NONE, *[c for c in result.columns if c not in (x, y)]]
    colour = c3.selectbox("colour", colours, index=colours.index(default_colour(result, x, y) or NONE))
    st.altair_chart(chart(result, x, y, None if colour == NONE else colour), width="stretch")
    partial = in_progress(result, x, time.time()) if x in times else None
    if partial is not None:
        st.caption(f"Faint: {x} {partial} is still in progress, so its sums cover only part of it; it is not joined to the line.")


def save_box(db_url: str, sql: str) -> None:
    with st.form("save", border=False):
        name = st.text_input("Save this query as", placeholder="name")
        if st.form_submit_button("Save"):
            try:
                saved_queries.save(db_url, name, sql)
                st.success(f"Saved {markdown(repr(name))}.")
            except QueryError as exc:
                st.error(markdown(exc.one_line(), ERROR_LIMIT))


def schema_browser() -> None:
    st.caption("Views (the reference of docs/query.md): expand one for its columns and units.")
    for view in query_views.VIEWS:
        with st.expander(f"{view.name} — {view.meaning}"):
            st.table([{"column": c.name, "unit": c.unit, "meaning": c.meaning} for c in view.columns])
