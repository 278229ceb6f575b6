"""Pure helpers of the Alerts page and the Overview's alert line: rows, links, the state timeline.

Pure functions (tested without a running app); the page draws what these return.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from app.alerts.links import overview_query, since
from app.alerts.model import ERROR, FIRING, NO_DATA, PENDING, AlertBoard, AlertState, Transition
from app.alerts.silences import silenced_by
from app.formatting import ago, clock, elapsed
from app.ui.charts import TIME_FORMAT
from app.ui.time_range import RANGES
from core.settings import MuteWindowSettings
from db.queries import Reader

STATE_COLORS = {FIRING: "#d62728", PENDING: "#ff7f0e", NO_DATA: "#7f7f7f", ERROR: "#9467bd"}


def overview_link(s: AlertState, now: float) -> str:
    """The Overview of the alert's target over the smallest range that shows the whole spell."""
    return "/" + overview_query(s, now, RANGES)


def held_back(board: AlertBoard, mute_windows: Sequence[MuteWindowSettings]) -> list[tuple[AlertState, str | None]]:
    """Each alert firing or pending now with what holds its notifications back (``silence 3``, ``mute
    window nights``) or None, judged as the notifier judges it (app/alerts/silences.py)."""
    return [(s, silenced_by(s, board.end, board.active, mute_windows)) for s in board.alerts]


def alert_rows(alerts: Sequence[tuple[AlertState, str | None]], now: float) -> list[dict[str, str]]:
    return [
        {
            "state": s.state, "severity": s.severity, "target": s.target, "model": s.model, "rule": s.rule,
            "since": f"{clock(since(s))} ({ago(since(s), now)})", "what": s.summary,
            "silenced": held or "", "recommendation": s.recommendation, "overview": overview_link(s, now),
        }
        for s, held in alerts
    ]  # fmt: skip


def timeline_rows(history: Sequence[Transition], start: float, end: float) -> pd.DataFrame:
    """One row per spell in a non-OK state (pending, firing, no data, error) within [start, end)."""
    rows = []
    by_alert: dict[str, list[Transition]] = {}
    for t in history:
        by_alert.setdefault(" · ".join(x for x in (t.target, t.model, t.rule) if x), []).append(t)
    for name, changes in by_alert.items():
        spans = [(start, changes[0].from_state)] + [(float(t.at), t.to_state) for t in changes]
        for (begin, state), (finish, _) in zip(spans, [*spans[1:], (end, "")], strict=True):
            if state in STATE_COLORS and finish > begin:
                rows.append({"alert": name, "state": state, "start": begin * 1000, "end": finish * 1000})
    return pd.DataFrame(rows, columns=["alert", "state", "start", "end"])


def timeline_chart(rows: pd.DataFrame, start: float, end: float) -> alt.Chart:
    """Each alert's spells as bars on one time axis, coloured by state; the axis starts ten minutes
    before the first spell (a day-long axis would draw a fresh incident as a hairline)."""
    title = "State history (last 24 h)"
    if not rows.empty and float(rows["start"].min()) / 1000 - 600 > start:
        start = float(rows["start"].min()) / 1000 - 600
        # say what the axis spans: a "last 24 h" title over a 14-minute axis read as a broken chart
        title = f"State history: the last 24 h, from 10 min before its first change ({elapsed(end - start)} shown)"  # "12 min 52 s", not "772.943s"
    # about ten labels: Vega's default (one per 40 px) put 26 on a page-wide axis of minutes, and it
    # reads tickCount as a hint (21 on a 20-minute axis): labels closer than 40 px apart are hidden too.
    # The time as the other charts write it: Vega's own mixes clocks ("08:58", "09 AM", "09:02").
    x = alt.X("start:T", title=None, scale=alt.Scale(domain=[start * 1000, end * 1000]),
              axis=alt.Axis(format=TIME_FORMAT, tickCount=10, labelOverlap=True, labelSeparation=40, labelFlush=True))
    # the legend above the bars, in a row: beside two rows of bars (40 px) its column of states was cut
    color = alt.Color("state:N", scale=alt.Scale(domain=list(STATE_COLORS), range=list(STATE_COLORS.values())),
                      legend=alt.Legend(orient="top", direction="horizontal", title=None))
    chart: alt.Chart = (
        alt.Chart(rows)
        .mark_bar(height=14)
        # the alerts' names whole: Vega cut them at 180 px ("edge · kv_cache_…")
        .encode(x=x, x2="end:T", y=alt.Y("alert:N", title=None, axis=alt.Axis(labelLimit=600)), color=color,
                tooltip=["alert", "state", alt.Tooltip("start:T", format="%Y-%m-%d %H:%M:%S"),
                         alt.Tooltip("end:T", format="%Y-%m-%d %H:%M:%S")])  # fmt: skip
        .properties(title=title)
    )
    return chart


def banner_since(reader: Reader, target: str | None) -> dict[str, float]:
    """Since when each of the target's alerts fires (or waits): the Overview's live banner says the
    same as the Alerts page, from the evaluator's stored states (through the query facade)."""
    return reader.live_since(target) if target else {}
