"""The view in the URL: the sidebar's pickers bound to query parameters, and notices for those it cannot use.

Target, model, time range and verdict window live in the URL through widgets bound with
``bind="query-params"``, so a link (e.g. from an alert e-mail) reproduces the view:
``?target=demo&model=…&range=24h&window=5m`` or ``range=custom&start=…&end=…``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import streamlit as st

from app.ui.time_range import DEFAULT_RANGE, DEFAULT_WINDOW, RANGES, WINDOWS, View
from core.text import markdown, markdown_code, reads_the_same_in_markdown
from db.results import TargetInfo

ALL_MODELS = "all models"
# Parameters a page reads besides the sidebar's: a link carrying one is not mistyped.
# parameters a page reads itself: the custom range, the GPU picked, the Query page's SQL or canned
# query and its parameters (``p.<name>``)
PAGE_PARAMS = ("start", "end", "gpu", "sql", "canned")
PAGE_PARAM_PREFIXES = ("p.",)
FALLBACKS = {"range": DEFAULT_RANGE, "window": DEFAULT_WINDOW}


def url_notices(params: Mapping[str, str], choices: Mapping[str, Sequence[str]]) -> list[str]:
    """One line per URL parameter the view cannot use, naming it and what is shown instead.

    ``choices`` maps each sidebar parameter to its values in order; the fallback is the widget's
    default (:data:`FALLBACKS`) or the first value.
    """
    notices = []
    for key, value in params.items():
        if key in choices and (notice := choice_notice(key, value, choices[key])):
            notices.append(notice)
        elif key not in choices and key not in PAGE_PARAMS and not key.startswith(PAGE_PARAM_PREFIXES):
            notices.append(f"URL parameter {markdown_code(key)} is unknown and ignored (known: {', '.join([*choices, *PAGE_PARAMS])}).")
    return notices


def choice_notice(key: str, value: str, values: Sequence[str]) -> str | None:
    """``URL parameter `range=bogus` is not one of 15m, 1h, …: showing `1h`.``; None when ``value`` is
    one of ``values`` (or there are none to choose from). The fallback: the widget's default
    (:data:`FALLBACKS`) or the first value."""
    if value in values or not values:
        return None
    known = ", ".join(markdown(v) for v in values[:8]) + (", …" if len(values) > 8 else "")
    fallback = FALLBACKS.get(key, values[0])
    return f"URL parameter {markdown_code(f'{key}={value}')} is not one of {known}: showing {markdown_code(fallback)}."


def default_target(targets: Sequence[TargetInfo], now: float) -> tuple[str | None, str]:
    """The target a view without ``?target=`` opens on, and why: the healthiest with data (up, then the
    most recent scrape; a name breaks ties), not the alphabetically first, which after a real engine
    was tried opened the demo on the stopped one."""
    from core.durations import format_duration

    if not targets:
        return None, ""
    best = max(targets, key=lambda t: (t.up is True, t.last_scrape_at is not None, t.last_scrape_at or 0.0, _by_name(t.name)))
    if len(targets) == 1:
        return best.name, ""
    if best.last_scrape_at is None:
        return best.name, "no target has data yet"
    state = "up" if best.up else "down"
    ago = format_duration(max(0, round(now - best.last_scrape_at)))
    return best.name, f"{state}, the most recent data of the {len(targets)} targets (last scrape {ago} ago)"


def _by_name(name: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in name)  # ties: the alphabetically first wins under max()


def sidebar(targets: list[TargetInfo], now: float, retention: tuple[float, float] | None = None) -> View:
    """Target, model, range and window pickers, bound to the URL; returns the view they describe.

    A URL parameter they cannot use is named in a notice above the page (:func:`url_notices`).
    """
    names = [t.name for t in targets]
    params = {k: st.query_params[k] for k in st.query_params}
    default, why = default_target(targets, now)
    wanted = params.get("target") if params.get("target") in names else default
    models = [ALL_MODELS, *(m for t in targets if t.name == wanted for m in t.models)]
    first = [default, *(n for n in names if n != default)] if default else names  # the notices' fallback
    choices = {"target": first, "model": models, "range": [*RANGES, "custom"], "window": list(WINDOWS)}
    for notice in url_notices(params, choices):
        st.warning(notice, icon=":material/link_off:")
    target = _choice("Target", names, key="target", index=names.index(default)) if names and default else None
    if why and target == default and params.get("target") != default:
        st.caption(f"Showing {markdown(default)}: {why}. Pick another target in the sidebar.")
    models = [m for t in targets if t.name == target for m in t.models]
    model = _choice("Model", [ALL_MODELS, *models], key="model")
    # Range and window as radio buttons: one click, every choice in sight, and a fraction of what a
    # drop-down costs the browser to build (docs/benchmarks.md, Dashboard).
    range_key = st.sidebar.radio(
        "Time range", [*RANGES, "custom"], index=list(RANGES).index(DEFAULT_RANGE), horizontal=True,
        key="range", bind="query-params", help="Last 15 minutes … 30 days ending now, or a custom range.",
    )  # fmt: skip
    custom = _custom_range(now) if range_key == "custom" else None
    window = st.sidebar.radio(
        "Verdict window", list(WINDOWS), index=list(WINDOWS).index(DEFAULT_WINDOW), horizontal=True, key="window",
        bind="query-params", help="Window of the verdict and the KPI tiles (e.g. TTFT P95 over 5 min).",
    )  # fmt: skip
    model = None if model == ALL_MODELS else model
    return View(target, model, str(range_key), custom, WINDOWS[str(window)], retention)


RADIO_MAX = 6  # up to this many choices are radio buttons (one click, all in sight); more, a drop-down


def _choice(label: str, options: list[str], key: str, index: int = 0) -> Any:
    # A radio's labels are Markdown, a drop-down's plain text; a format_func would also change the
    # values the URL carries. So a name from outside that would not read as typed gets a drop-down.
    if len(options) <= RADIO_MAX and all(map(reads_the_same_in_markdown, options)):
        return st.sidebar.radio(label, options, index=index, key=key, bind="query-params")
    return st.sidebar.selectbox(label, options, index=index, key=key, bind="query-params")


def _custom_range(now: float) -> tuple[float, float]:
    default_end = dt.datetime.fromtimestamp(now).replace(second=0, microsecond=0)
    start = st.sidebar.datetime_input(
        "From", default_end - dt.timedelta(hours=6), key="start", bind="query-params", format="YYYY-MM-DD"
    )
    end = st.sidebar.datetime_input("To", default_end, key="end", bind="query-params", format="YYYY-MM-DD")
    if start is None or end is None or end <= start:
        st.sidebar.warning("Pick a start before the end; showing the last 6 hours meanwhile.")
        return (now - 6 * 3600, now)
    return (start.timestamp(), end.timestamp())
