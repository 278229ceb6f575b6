"""Shared state of the dashboard: settings and reader (loaded once), the view in the URL, guarded queries.

The view (target, model, time range, verdict window) lives in the URL query parameters through
widgets bound with ``bind="query-params"``, so a link (e.g. from an alert e-mail) reproduces it:
``?target=demo&model=…&range=24h&window=5m`` or ``range=custom&start=…&end=…``.
Pure helpers first (unit-tested), the Streamlit glue after.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import streamlit as st
from streamlit import dataframe_util

from app.alerts.rules import Rule, rule_set
from app.loader import load_settings
from app.ui import charts
from app.ui.charts import PANEL_HEIGHT
from core.durations import format_duration
from core.errors import SweetspotError
from core.redact import masked
from core.settings import (
    ENV_CONFIG,
    ENV_DB_URL,
    ENV_EMAIL,
    ENV_UI_PASSWORD,
    Settings,
    SweetSpotSettings,
    effective_sweetspot,
)
from core.text import markdown, markdown_code, reads_the_same_in_markdown
from db.results import SeriesPoint, TargetInfo, WindowFigures
from db.verdicts import StoredVerdict

T = TypeVar("T")

RANGES: dict[str, float] = {
    "15m": 900,
    "1h": 3600,
    "6h": 6 * 3600,
    "24h": 86400,
    "7d": 7 * 86400,
    "30d": 30 * 86400,
}
DEFAULT_RANGE = "1h"
WINDOWS: dict[str, float] = {"1m": 60, "5m": 300, "15m": 900, "1h": 3600}
DEFAULT_WINDOW = "5m"
ALL_MODELS = "all models"
# Points per series at most. 500 still puts a point every 2-3 pixels of a full-width chart, and the
# browser's work grows with the points: 1,000 cost the Overview ~0.3 s more (docs/benchmarks.md).
MAX_POINTS = 500
# Steps a series may use: round numbers people read on an axis, and multiples of the 1-minute and
# hourly rollups once a step reaches them (so the facade can serve it from rollups).
STEPS = (5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def data_step(points: Sequence[Any], step_s: float, fields: Sequence[str] = ()) -> float:
    """The step a series should be drawn at: ``step_s``, or coarser when the rounds are further apart.

    History scraped every 30 s has one round in every third 10 s step; drawn at 10 s it is mostly
    holes. The median spacing of the points (steps with data) is the rounds' own spacing; the step
    becomes the smallest of :data:`STEPS` that holds a round each. ``fields``: a point has data when
    one of them has a value (the facade returns every step, with None figures where it has none).
    """
    points = charts.with_data(points, fields)
    gaps = sorted(b.ts - a.ts for a, b in zip(points, points[1:], strict=False))
    if not gaps or gaps[len(gaps) // 2] <= 1.5 * step_s:
        return step_s
    spacing = gaps[len(gaps) // 2]
    return float(next((s for s in STEPS if s >= spacing), STEPS[-1]))


def level_of(step_s: float) -> int:
    """The stored level a series of ``step_s`` reads (db/queries.py): 3600, 60 or 0 (raw rows)."""
    return 3600 if step_s % 3600 == 0 else 60 if step_s % 60 == 0 else 0


def over_text(span: Span, window_s: float) -> str:
    """What the verdict and tiles cover: ``over the last 5m`` live; ``over 16:00–17:00`` for a past range."""
    if span.live:
        return f"over the last {format_duration(window_s)}"
    same_day = time.localtime(span.start)[:3] == time.localtime(span.end)[:3]
    start = time.strftime("%Y-%m-%d %H:%M", time.localtime(span.start))
    end = time.strftime("%H:%M" if same_day else "%Y-%m-%d %H:%M", time.localtime(span.end))
    return f"over {start}–{end}"


def nice_step(span_s: float, max_points: int = MAX_POINTS, minimum: float = 5) -> float:
    """The smallest step of :data:`STEPS` (≥ ``minimum``) that keeps ``span_s`` under ``max_points`` points."""
    for step in STEPS:
        if step >= minimum and span_s / step <= max_points:
            return float(step)
    return float(math.ceil(span_s / max_points / 86400) * 86400)


@dataclass(frozen=True)
class Span:
    """The resolved time range of one render: unix seconds, and the series step."""

    start: float
    end: float
    step_s: float
    live: bool  # a relative range ending now (refreshes); a custom range is a fixed picture
    at: float  # the instant the verdict is judged: now, or the end of a custom range


def resolve(
    range_key: str, now: float, custom: tuple[float, float] | None = None, retention: tuple[float, float] | None = None
) -> Span:
    """The span for ``range_key`` ending at the last complete step before ``now``.

    Complete steps only, so that every point stands for a whole step (its quantiles over all of the
    step's requests, the step aligned with the rollups). Charts therefore lag by up to one step;
    tiles and verdict stay live (``at`` = now). (A step in progress no longer reads low tok/s: the
    facade divides increases by the time their scrapes cover, not by the step.)

    ``retention`` (raw, minute rollups; seconds): a custom range starting before the raw rows'
    retention steps by whole minutes (the minute rollups), before the minute rollups' by hours.
    """
    if range_key == "custom" and custom and custom[1] > custom[0]:
        start, end = custom
        raw_s, minute_s = retention or (math.inf, math.inf)
        minimum = 3600 if start < now - minute_s else 60 if start < now - raw_s else 5
        return Span(start, end, nice_step(end - start, minimum=minimum), live=False, at=end)
    length = RANGES.get(range_key, RANGES[DEFAULT_RANGE])
    step = nice_step(length)
    end = math.floor(now / step) * step
    return Span(end - length, end, step, live=True, at=now)


@dataclass(frozen=True)
class View:
    """What the user is looking at; every field comes from the URL."""

    target: str | None
    model: str | None  # None = all models of the target
    range_key: str
    custom: tuple[float, float] | None
    window_s: float

    retention: tuple[float, float] | None = None  # raw, minute rollups (s): see :func:`resolve`

    def span(self, now: float) -> Span:
        """Resolved at each render, so a live fragment moves with the clock."""
        return resolve(self.range_key, now, self.custom, self.retention)

    @property
    def live(self) -> bool:
        return self.range_key != "custom"


# --- Streamlit glue ---------------------------------------------------------------------------------


@st.cache_resource(show_spinner=False)
def _settings(config_path: str | None, db_url: str | None, password: str | None,
              email: tuple[tuple[str, str], ...] = ()) -> Settings:  # fmt: skip
    environ = {k: v for k, v in ((ENV_CONFIG, config_path), (ENV_DB_URL, db_url), (ENV_UI_PASSWORD, password)) if v}
    return load_settings(None, {**environ, **dict(email)})


def load(environ: Mapping[str, str]) -> Settings:
    """The settings, loaded once per distinct environment (``python -m app ui`` passes them this way).
    The alert e-mail variables count too: the Alerts page says whether e-mail is on."""
    email = tuple((k, environ[k]) for k in sorted(ENV_EMAIL) if environ.get(k))
    return _settings(environ.get(ENV_CONFIG), environ.get(ENV_DB_URL), environ.get(ENV_UI_PASSWORD), email)


@st.cache_resource(show_spinner=False)
def reader(db_url: str) -> Any:
    """One read-only facade per database URL, shared by every session."""
    from db.queries import Reader  # imported here so a missing facade is a guarded one-line error

    return Reader(db_url)


def guard(what: str, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a facade query; on failure show one line with the next step and stop this page."""
    try:
        return call(*args, **kwargs)
    except SweetspotError as exc:
        # an error may quote a name from outside: plain text
        st.error(f"Could not read {what}: {markdown(exc.one_line(), 1000)}", icon=":material/error:")
    except Exception as exc:  # noqa: BLE001 - the page must show one line, never a traceback
        settings = st.session_state.get("_settings")
        url = masked(settings.db_url) if settings else "db_url"
        st.error(
            f"Could not read {what}: {type(exc).__name__}: {markdown(masked(str(exc)), 1000)}. Check that the database at {url} exists "
            "and the collector has written to it (python -m app run), or set db_url / SWEETSPOT_DB_URL.",
            icon=":material/error:",
        )
    st.stop()
    raise AssertionError("unreachable")  # st.stop() raises; this keeps type checkers honest


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


def sidebar(targets: list[TargetInfo], now: float, retention: tuple[float, float] | None = None) -> View:
    """Target, model, range and window pickers, bound to the URL; returns the view they describe.

    A URL parameter they cannot use is named in a notice above the page (:func:`url_notices`).
    """
    names = [t.name for t in targets]
    params = {k: st.query_params[k] for k in st.query_params}
    wanted = params.get("target") if params.get("target") in names else (names[0] if names else None)
    models = [ALL_MODELS, *(m for t in targets if t.name == wanted for m in t.models)]
    choices = {"target": names, "model": models, "range": [*RANGES, "custom"], "window": list(WINDOWS)}
    for notice in url_notices(params, choices):
        st.warning(notice, icon=":material/link_off:")
    target = _choice("Target", names, key="target") if names else None
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


def _choice(label: str, options: list[str], key: str) -> Any:
    # A radio's labels are Markdown, a drop-down's plain text; a format_func would also change the
    # values the URL carries. So a name from outside that would not read as typed gets a drop-down.
    if len(options) <= RADIO_MAX and all(map(reads_the_same_in_markdown, options)):
        return st.sidebar.radio(label, options, key=key, bind="query-params")
    return st.sidebar.selectbox(label, options, key=key, bind="query-params")


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


@dataclass(frozen=True)
class Context:
    """What main.py hands every page: settings, the reader and the view."""

    settings: Settings
    reader: Any
    targets: list[TargetInfo]
    view: View

    def target_info(self) -> TargetInfo | None:
        return next((t for t in self.targets if t.name == self.view.target), None)

    @property
    def sweetspot(self) -> SweetSpotSettings:
        """The viewed target's thresholds (``[sweetspot]`` with its own keys on top), as ``status``,
        the evaluator and the e-mail judge it: a banner must not disagree with the Alerts page."""
        return effective_sweetspot(self.settings, self.view.target or "")

    @property
    def alert_rules(self) -> tuple[Rule, ...]:
        """The viewed target's rule set: the defaults changed by ``[[alerts.rules]]``."""
        return rule_set(self.settings, self.view.target or "")

    def window(self, end: float) -> WindowFigures:
        """The chosen target/model's figures over the verdict window ending at ``end`` (guarded, cached)."""
        v, url, slo = self.view, self.settings.db_url, self.sweetspot.ttft_p95_slo_s
        return guard("the window figures", _window, url, v.target, _floor(end, 5.0), v.window_s, v.model, None, slo)

    def target_window(self, target: str, end: float) -> WindowFigures:
        """Any stored target's figures (all models) over the verdict window ending at ``end``."""
        url, window_s = self.settings.db_url, self.view.window_s
        return guard("the window figures", _window, url, target, _floor(end, 5.0), window_s, None, None)

    def verdict_window(self, span: Span) -> WindowFigures:
        """The figures the verdict and tiles judge: the verdict window up to now on a live range; a
        past range's whole span, from the level (raw rows or rollups) its charts read, since raw rows
        older than their retention are gone."""
        return self.window(span.at) if span.live else self.range_window(span)

    def range_window(self, span: Span) -> WindowFigures:
        """The figures over the whole span, from the level (raw rows or rollups) its charts read."""
        v, url = self.view, self.settings.db_url
        args = (url, v.target, span.end, span.end - span.start, v.model, level_of(span.step_s), self.sweetspot.ttft_p95_slo_s)
        return guard("the window figures", _window, *args)

    def verdicts(self, span: Span) -> list[StoredVerdict]:
        """The viewed target's stored minute verdicts over the span (guarded, cached): the Overview's
        history, as the alert evaluator judged it (db/verdicts.py)."""
        v, url = self.view, self.settings.db_url
        return guard("the verdicts", _verdicts, url, v.target, span.start, _floor(span.at, 60.0) + 60.0)

    def series_drawn(self, span: Span, fields: Sequence[str], minimum: float = 0.0) -> tuple[list[SeriesPoint], charts.Frame]:
        """The series at the span's step (at least ``minimum``), or coarser where the rounds are further
        apart than that step (:func:`data_step`), with the frame it is drawn on."""
        step = max(span.step_s, minimum)
        points = self.series(span.start, _floor(span.end, step), step, fields)
        coarser = data_step(points, step, fields)
        if coarser != step:
            step = coarser
            points = self.series(span.start, _floor(span.end, step), step, fields)
        return points, charts.Frame(span.start, span.end, step)

    def series(self, start: float, end: float, step_s: float, fields: Sequence[str] | None = None) -> list[SeriesPoint]:
        """The chosen target/model's series (guarded, cached); ``fields`` limits what the facade computes."""
        v, url = self.view, self.settings.db_url
        cached = _series_coarse if step_s >= COARSE_STEP_S else _series_fine
        return guard("the series", cached, url, v.target, start, end, step_s, v.model, tuple(fields or ()))


# Query results are shared by every session for a few seconds: several viewers, page switches and
# the live refresh then cost one query. Coarse steps (≥ 5 min) change slowly, so they live longer;
# that delays the newest partial step of a 7- or 30-day chart by up to a minute.
FINE_TTL_S = 5.0
COARSE_TTL_S = 60.0
COARSE_STEP_S = 300.0


def _floor(ts: float, step: float) -> float:
    return math.floor(ts / step) * step


@st.cache_data(ttl=FINE_TTL_S, max_entries=256, show_spinner=False)
def _window(url: str, target: str, end: float, window_s: float, model: str | None, level: int | None,
            ttft_slo_s: float | None = None) -> WindowFigures:  # fmt: skip
    # the target's effective SLO (its overrides on [sweetspot]): the tile judges by the banner's numbers
    return reader(url).window(target, end, window_s, model=model, level=level, ttft_slo_s=ttft_slo_s)


@st.cache_data(ttl=FINE_TTL_S, max_entries=64, show_spinner=False)
def _verdicts(url: str, target: str, start: float, end: float) -> list[StoredVerdict]:
    return reader(url).verdicts(target, start, end)


def _query_series(url: str, target: str, start: float, end: float, step_s: float, model: str | None,
                  fields: tuple[str, ...]) -> list[SeriesPoint]:  # fmt: skip
    return reader(url).series(target, start, end, step_s, model=model, fields=fields or None)


_series_fine = st.cache_data(ttl=FINE_TTL_S, max_entries=256, show_spinner=False)(_query_series)
_series_coarse = st.cache_data(ttl=COARSE_TTL_S, max_entries=64, show_spinner=False)(_query_series)


@st.cache_data(max_entries=128, show_spinner=False)
def _spec(builder: str, key: tuple[Any, ...], _args: tuple[Any, ...]) -> dict[str, Any]:
    # Altair's schema validation and deep copies cost ~0.1 s a chart here; the tests validate every
    # builder's output (tests/test_ui_charts.py), so the running app serialises without it.
    # The builder travels by name (Streamlit cannot hash a function), the arguments by ``key``
    # (``_args`` is not hashed: Streamlit's hasher walks 1,000 dataclasses slowly, hash() does not).
    spec: dict[str, Any] = getattr(charts, builder)(*_args).to_dict(validate=False)
    # st.vega_lite_chart sends named datasets as Arrow and converts rows (records → pandas → Arrow)
    # on every call, ~40 ms a 2,000-row chart; it passes bytes through as they are, so the cache
    # keeps the Arrow bytes (same conversion, once) and hands back a copy that unpickles fast.
    datasets = spec.get("datasets", {})
    spec["datasets"] = {name: dataframe_util.convert_anything_to_arrow_bytes(rows) for name, rows in datasets.items()}
    return spec


def _fingerprint(arg: Any) -> Any:
    if isinstance(arg, dict):
        return ("map", tuple(sorted(arg.items())))
    try:
        return ("hash", hash(tuple(arg) if isinstance(arg, list) else arg))  # records are frozen dataclasses
    except TypeError:  # e.g. a SweepRun, whose recommendation is a dict
        return ("repr", repr(arg))


def show_chart(builder: Callable[..., Any], *args: Any, height: int | str = PANEL_HEIGHT, where: Any = None) -> None:
    """Draw ``builder(*args)`` (an Altair chart) full width; the spec is cached by its inputs.

    ``height``: pixels for one chart, "content" for a stack of panels that sizes itself.
    """
    key = tuple(_fingerprint(a) for a in args)
    (where or st).vega_lite_chart(_spec(builder.__name__, key, args), width="stretch", height=height)


def publish(context: Context) -> None:
    st.session_state["_context"] = context
    st.session_state["_settings"] = context.settings


def context() -> Context:
    """The context main.py published for this run."""
    context: Context = st.session_state["_context"]
    return context


def now() -> float:
    return time.time()
