"""Altair chart builders: pure functions from query-facade records to ``alt.Chart``. No Streamlit here.

Conventions every chart follows, so pages look alike:
- time on x as epoch milliseconds (Vega shows the viewer's local time), all time charts of a page
  share one explicit domain ``(start, end)``; the Overview's panels are stacked in one chart
  (:func:`overview_chart`) on one shared time axis: panning or zooming one moves them all;
- a missing value (``None``) is a gap: missing steps are filled with NaN rows and lines break there
  (``invalid="break-paths-show-domains"``), never drawn through zero;
- one colour per figure across pages (:data:`COLORS`), thresholds in red dashes, references in grey;
- tooltips carry the unit; marks carry no per-point ARIA description (see :func:`_no_aria`).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import altair as alt
import pandas as pd

from app.formatting import bound_name, minute, number
from app.operating_point import server
from app.panel_names import PANEL_NAMES
from core.durations import format_duration
from core.settings import SweetSpotSettings
from db.figures import FIGURES
from db.results import BenchRun, CeilingInfo, ConfigEpoch, GpuPoint, SeriesPoint, SweepRun

# Altair validates every schema object against the whole Vega-Lite schema as it is built ("debug
# mode"): ~95 validations, over half of the Overview's spec on a new visit (issue 39 item 9). The tests
# validate every builder's output (tests/test_ui_charts.py), so the running app builds without it.
alt.utils.schemapi.disable_debug_mode()

HEIGHT = 200  # the plot; pages give the Streamlit element PANEL_HEIGHT (plot + title, legend, axis)
PANEL_HEIGHT = 280
# Overview panels: Streamlit sizes every panel of a stacked chart to the full width of the page, so
# anything drawn left of a plot would push its right end (the newest data) off the page. The y labels
# therefore sit inside the plot, in a gutter the time scale leaves free (GUTTER px, see _x), just
# above their grid line; no axis title (each panel's title names its unit).
GUTTER = 36
Y_AXIS = alt.Axis(labelAlign="left", labelBaseline="line-bottom", labelPadding=-2, tickSize=0, domain=False,
                  minExtent=0, maxExtent=0)  # fmt: skip
THRESHOLD = "#d62728"
WARNING_COLOR = "#ff7f0e"
REFERENCE = "#7f7f7f"
COLORS: dict[str, str] = {
    "P50": "#9ecae1",
    "P95": "#3182bd",
    "P99": "#08306b",
    "output tok/s": "#2ca02c",
    "preemptions": "#d62728",
    "running": "#1f77b4",
    "waiting": "#ff7f0e",
    "gateway queue": "#9467bd",
    "KV usage": "#8c564b",
    "DRAM (GPU reading)": "#ff7f0e",
    "stop": "#2ca02c",
    "length": "#17becf",
    "abort": "#ff7f0e",
    "error": "#d62728",
    "rejected (503)": "#7b4173",
    "roofline": "#e377c2",
    "compute roof": "#7f7f7f",
    "MBU": "#e377c2",
    "tok/s ÷ running": "#2ca02c",
    "1 ÷ ITL P95": "#1f77b4",
}
TIME_FORMAT = "%b %d %H:%M"
X_AXIS = alt.Axis(format=TIME_FORMAT, labelFlush=True, labelBound=True)  # time labels stay inside the plot
TOOLTIP_TIME = alt.Tooltip("time:T", title="time", format="%Y-%m-%d %H:%M:%S")


@dataclass(frozen=True)
class Frame:
    """The x-axis every time chart of one page shares: ``start``/``end`` unix seconds, ``step_s`` series step."""

    start: float
    end: float
    step_s: float

    @property
    def domain(self) -> list[str]:
        # ISO strings: Streamlit's frontend mis-reads a numeric (epoch ms) temporal domain and
        # collapses the axis; data values stay epoch ms, which it reads fine.
        return [_iso(self.start), _iso(self.end)]


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat()


AnyChart = alt.Chart | alt.LayerChart
_Top = TypeVar("_Top", bound=alt.TopLevelMixin)  # a chart drawn on its own


_LIFTED = ("params", "height", "width", "view")  # what Altair's LayerChart() moves up from a layer


def _layer(*layers: Any) -> alt.LayerChart:
    """``alt.LayerChart(layer=layers)`` without its lifting when no layer carries what it lifts.

    Altair's constructor deep-copies every layer three times (to lift parameters, shared data and
    sizes to the parent) and a nested layer is copied again by each layer above it: 1.2-1.9 s of the
    Overview's cold spec at load 11, two thirds of it (issue 39 item 9). This module's layers carry
    none of those (sizes and the zoom go on the finished panel), so the spec is the same: a layer
    that does carry one goes through Altair's constructor as before.
    """
    if any(not alt.utils.is_undefined(getattr(c, key, alt.Undefined)) for c in layers for key in _LIFTED):
        return alt.LayerChart(layer=list(layers))
    chart = alt.LayerChart.__new__(alt.LayerChart)
    # Data all its layers share moves up, as Altair's constructor does (one dataset, named once)
    shared = layers[0].data if layers else alt.Undefined
    if alt.utils.is_undefined(shared) or any(c.data is not shared for c in layers):
        alt.TopLevelLayerSpec.__init__(chart, layer=list(layers))  # the schema's own constructor: no copies
    else:
        alt.TopLevelLayerSpec.__init__(chart, layer=[_with(c, data=alt.Undefined) for c in layers], data=shared)
    return chart


def _x(frame: Frame) -> alt.X:
    scale = alt.Scale(domain=frame.domain, range=[GUTTER, alt.ExprRef("width")])
    return alt.X("time:T", title=None, scale=scale, axis=X_AXIS)


def with_gaps(points: Sequence[Any], step_s: float) -> list[Any]:
    """``points`` (sorted by ``ts``) with a ``None`` marker wherever no round was collected.

    The facade omits steps without data; without a marker a line would join across the hole. A
    missing step is only a hole when the rounds around it are closer together than it: where rounds
    are further apart than the step (history scraped every 30 s drawn at 10 s steps), the steps
    between two rounds are bridged, so a chart is never blank where the data exists
    (:func:`bridges` says whether a series was).
    """
    out: list[Any] = []
    gaps = [b.ts - a.ts for a, b in zip(points, points[1:], strict=False)]
    for i, point in enumerate(points):
        if i and _is_hole(gaps, i - 1, step_s):
            out.append(None)
        out.append(point)
    return out


def with_data(points: Sequence[Any], fields: Sequence[str]) -> list[Any]:
    """The points with a value in one of ``fields`` (all points when ``fields`` is empty)."""
    return [p for p in points if not fields or any(getattr(p, f) is not None for f in fields)]


def _is_hole(gaps: Sequence[float], i: int, step_s: float) -> bool:
    # A hole is a gap both longer than a step and twice as long as the spacing next to it.
    neighbours = [g for g in (gaps[i - 1] if i else None, gaps[i + 1] if i + 1 < len(gaps) else None) if g]
    spacing = min(neighbours) if neighbours else step_s
    return gaps[i] > 1.5 * step_s and gaps[i] >= 2 * spacing


def bridges(points: Sequence[Any], step_s: float, fields: Sequence[str] = ()) -> bool:
    """Whether :func:`with_gaps` bridges a step of ``points`` that no round covered.

    ``fields``: only points with a value in one of them count (the facade returns every step).
    """
    points = with_data(points, fields)
    gaps = [b.ts - a.ts for a, b in zip(points, points[1:], strict=False)]
    return any(g > 1.5 * step_s and not _is_hole(gaps, i, step_s) for i, g in enumerate(gaps))


def table_lines(panel: str) -> dict[str, str]:
    """The lines the figures table (db/figures.py, a row's ``panel`` and ``line``) adds to the panel
    ``panel`` of :data:`PANELS`: field → legend. A new figure reaches the Overview and the alert
    e-mail from its row alone."""
    return {f.name: f.line or f.label for f in FIGURES if f.panel == panel}


def long_rows(points: Sequence[Any], fields: dict[str, str], step_s: float, scale: float = 1.0) -> pd.DataFrame:
    """One row per (step with data, series): columns ``time`` (ms), ``series`` (display name), ``value``.

    Each series keeps its own steps with a value; a NaN row after a step marks a hole (:func:`with_gaps`).
    """
    rows: list[dict[str, Any]] = []
    for attr, name in fields.items():
        previous_ts = None
        for point in with_gaps([p for p in points if getattr(p, attr) is not None], step_s):
            ts = previous_ts + step_s if point is None and previous_ts is not None else getattr(point, "ts", None)
            value = None if point is None else getattr(point, attr)
            rows.append({"time": (ts or 0) * 1000, "series": name, "value": _num(value, scale)})
            previous_ts = ts
    return pd.DataFrame(rows, columns=["time", "series", "value"])


def _num(value: float | None, scale: float) -> float:
    return math.nan if value is None else value * scale


def _lines(data: pd.DataFrame, frame: Frame, unit: str) -> alt.Chart:
    names = list(dict.fromkeys(data["series"]))
    color = alt.Color(
        "series:N",
        title=None,
        scale=alt.Scale(domain=names, range=[COLORS.get(n, REFERENCE) for n in names]),
        legend=alt.Legend(orient="top", direction="horizontal"),
    )
    chart: alt.Chart = (
        alt.Chart(data)
        .mark_line(invalid="break-paths-show-domains", point=len(data) < 60)
        .encode(
            x=_x(frame),
            y=alt.Y("value:Q", title=None, axis=Y_AXIS),
            color=color,
            tooltip=[TOOLTIP_TIME, alt.Tooltip("series:N"), alt.Tooltip("value:Q", title=unit, format=".3~f")],
        )
    )
    return chart


# Altair's value channels, untyped in its stubs (the typed alternative, alt.value(), is a dict that
# Altair validates against its whole schema on every encode: see hline)
_X_VALUE: Any = alt.XValue
_X2_VALUE: Any = alt.X2Value


def hline(value: float, frame: Frame, color: str = THRESHOLD, label: str = "") -> alt.LayerChart | alt.Chart:
    """A dashed horizontal threshold; thresholds are named in the chart title, which data never covers.

    Only a ``label`` that sits above the data (the ceiling) is drawn in the plot, just under its right
    end: inside the plot, because a pannable view clips its marks to the plot.
    """
    data = pd.DataFrame({"y": [value], "label": [label], "time": [frame.end * 1000]})
    base = alt.Chart(data)
    # from the gutter's edge to the plot's right end: the y labels sit in the gutter (Y_AXIS), and a
    # rule across the whole width struck through them (issue 30). Channel objects, not "y:Q" or
    # alt.value(): Altair turns a string or a dict into a channel by hashing its whole schema (~20-40 ms
    # each here, 7 of them in the Overview's spec).
    rule: alt.Chart = base.mark_rule(color=color, strokeDash=[6, 4], strokeWidth=1.5).encode(
        x=_X_VALUE(GUTTER), x2=_X2_VALUE("width"), y=alt.Y("y:Q"), tooltip=alt.TooltipValue(label or None)
    )
    if not label:
        return rule
    # 8 px short of the plot's right end: a restart there (the latest minutes) draws its dotted rule at
    # that end, and it ran through the label's last letters ("32 GiB", "900 GB/s" on the GPUs page)
    text = base.mark_text(color=color, fontSize=12, align="right", baseline="top", dx=-8, dy=4).encode(
        x=alt.X("time:T", title=None), y=alt.Y("y:Q"), text=alt.Text("label:N")
    )
    return _layer(rule, text)


def _finish(chart: AnyChart, title: str | alt.TitleParams) -> AnyChart:
    """A chart drawn on its own: titled, pannable in time, no per-point ARIA (see :func:`_no_aria`)."""
    return _no_aria(_panel(chart, title).interactive(bind_y=False))


def _panel(chart: AnyChart, title: str | alt.TitleParams) -> AnyChart:
    titled: AnyChart = _with(chart, title=title, height=HEIGHT)
    return titled


def _with(chart: Any, **properties: Any) -> Any:
    """``chart.properties(**properties)`` without validating each value against the schema (~10 ms
    each here, ~0.2 s of the Overview's spec); tests/test_ui_charts.py validates every builder's output."""
    # a copy of the top object alone, as chart.copy(deep=False), but not through the class's
    # constructor: a LayerChart's deep-copies its layers to lift their parameters (_layer says why)
    out = object.__new__(type(chart))
    object.__setattr__(out, "_args", chart._args)
    object.__setattr__(out, "_kwds", {**chart._kwds, **properties})
    return out


def _no_aria(chart: _Top) -> _Top:
    # No ARIA description per mark: Vega-Lite otherwise evaluates a "time: …; value: …" string for
    # each of the ~2,000 points a chart draws (~0.3 s of browser CPU for the Overview's five panels);
    # screen readers still get the chart's title, axes and legend. Streamlit does the same above
    # 5,000 rows; the time charts stay below that, so they say it themselves.
    configured: _Top = chart.configure_mark(aria=False)
    return configured


def stack(*panels: AnyChart) -> alt.VConcatChart:
    """``panels`` one under another on one shared time axis: drag or scroll in any, all follow.

    One Vega view instead of one per panel: the browser compiles and lays out a single chart, which
    is most of what the Overview costs to draw (docs/benchmarks.md, Dashboard).
    """
    # Each panel its own scale-bound zoom (Vega-Lite names a shared one after its inner views, which
    # Altair renames); the x scale is shared, so whichever panel moves, the axis of all moves.
    # Lifted here as Altair's VConcatChart() would (the zoom at the top, naming the view that holds it),
    # without its constructor: it deep-copies all eight panels to do so, and again in each to_dict,
    # ~0.5 s of a new visit's spec under load (issue 39 item 9); the spec is the same (tests/test_ui_charts.py).
    lifted = [_zoomable(p, i) for i, p in enumerate(panels)]
    # Everything at once: each of Altair's methods on the whole chart (properties, resolve_scale,
    # configure_mark) deep-copies all eight panels again.
    # No padding left and right: the panels already span the page's width (see Y_AXIS).
    chart = alt.VConcatChart.__new__(alt.VConcatChart)
    alt.TopLevelVConcatSpec.__init__(  # the schema's own constructor: no copies
        chart, vconcat=[panel for panel, _ in lifted], params=[param for _, param in lifted],
        spacing=24, padding={"left": 0, "right": 0, "top": 5, "bottom": 5},
        resolve=alt.Resolve(scale=alt.ScaleResolveMap(x="shared", color="independent")),
        config=alt.Config(mark=alt.MarkConfig(aria=False)),  # as _no_aria
    )  # fmt: skip
    return chart


def _zoomable(panel: Any, index: int) -> tuple[Any, alt.TopLevelSelectionParameter]:
    """``panel``'s first view named as Altair names it in a concatenation, and its x zoom bound to that
    view, to go at the top: what ``VConcatChart([panel.add_params(alt.selection_interval(bind="scales",
    encodings=["x"], name=f"zoom{index}")), …])`` makes of the panel at ``index``."""
    if isinstance(panel, alt.LayerChart):
        first, param = _zoomable(panel.layer[0], index)
        return _with(panel, layer=[first, *panel.layer[1:]]), param
    name = f"{panel._get_view_hash_name()}_{index}"
    select = alt.IntervalSelectionConfig(type="interval", encodings=["x"])
    return _with(panel, name=name), alt.TopLevelSelectionParameter(name=f"zoom{index}", select=select, bind="scales", views=[name])


# Above this multiple of the SLO a latency axis turns logarithmic: a linear one would squash the SLO
# line against the bottom (a 140 s spike over a 3 s SLO leaves it 2 % of the plot's height).
LOG_ABOVE_SLO = 4.0


def latency_scale(values: Iterable[float | None], slo_s: float) -> tuple[alt.Scale, str]:
    """The y scale of a latency chart that keeps the SLO readable, and a note for its title.

    Linear from 0 while the data stays within :data:`LOG_ABOVE_SLO` × the SLO; logarithmic beyond,
    its domain spanning every value and the SLO, so nothing is clipped and the SLO sits mid-plot.
    """
    seen = [v for v in values if v is not None and not math.isnan(v)]
    top = max([slo_s, *seen])
    if top <= LOG_ABOVE_SLO * slo_s:
        return alt.Scale(domain=[0, top * 1.05], nice=False), ""
    low = min([slo_s, *(v for v in seen if v > 0)])
    return alt.Scale(type="log", domain=[low * 0.9, top * 1.1], nice=False), " · log scale"


TTFT_LINES = {"ttft_p50_s": "P50", "ttft_p95_s": "P95", "ttft_p99_s": "P99", "queue_time_p95_s": "queue P95"} | table_lines("ttft")


CLIENT_P95 = "client_ttft_p95_s"


def ttft_chart(points: Sequence[SeriesPoint], frame: Frame, slo_s: float) -> AnyChart:
    """The engine's TTFT quantiles and, where a gateway adds a wait, the clients' P95 beside them: the
    figure the ``ttft_p95`` rule judges against the SLO (without a gateway it is the engine's P95)."""
    gateway = any(p.client_ttft_p95_s is not None and p.client_ttft_p95_s != p.ttft_p95_s for p in points)
    data = long_rows(points, {k: v for k, v in TTFT_LINES.items() if k != CLIENT_P95 or gateway}, frame.step_s)
    scale, note = latency_scale(data["value"], slo_s)
    if note:  # no zero on a log axis (a 0 s quantile is a step without requests)
        data.loc[data["value"] <= 0, "value"] = math.nan
    lines = _lines(data, frame, "seconds").encode(y=alt.Y("value:Q", title=None, scale=scale, axis=Y_AXIS))
    # no longer than the engine-only title: the panel is as wide as the page at 1280 px
    queue = "queue P95: time in vLLM's queue" if gateway else "queue P95: the part spent waiting in vLLM's queue"
    judged = "the clients' P95" if gateway else "P95"
    title = f"Time to first token, per {_step(frame)} (s{note}) · red dashes: SLO {number(slo_s)} s on {judged} · {queue}"
    return _panel(_layer(lines, hline(slo_s, frame)), title)


def ceiling_label(ceiling: CeilingInfo) -> str:
    """``at most 180 steps/s: the report's ceiling (900 GB/s ÷ (40 GB ÷ TP 8))``: what the line bounds,
    with its inputs. It bounds decode steps per second, drawn against tok/s because the report does."""
    return (
        f"at most {number(ceiling.steps_per_s)} steps/s: {bound_name(ceiling)} ({number(ceiling.bandwidth_gbps)} GB/s ÷ "
        f"({number(ceiling.weight_gb)} GB ÷ TP {ceiling.tensor_parallel}))"
    )


THROUGHPUT_LINES = {"tokens_per_s": "output tok/s"} | table_lines("throughput")


def throughput_chart(points: Sequence[SeriesPoint], frame: Frame, ceiling: CeilingInfo | None) -> AnyChart:
    """Output tok/s against the report's ceiling line. The line bounds decode steps/s (one token per
    running request each step), so aggregate tok/s passes it as soon as batching works (DOMAIN.md §1)."""
    lines = _lines(long_rows(points, THROUGHPUT_LINES, frame.step_s), frame, "tok/s")
    if ceiling is None:
        return _panel(lines, f"Output tokens per second, per {_step(frame)} (tok/s) · no ceiling line: no ceiling inputs")
    chart = _layer(lines, hline(ceiling.steps_per_s, frame, REFERENCE, ceiling_label(ceiling)))
    title = (f"Output tokens per second, per {_step(frame)} (tok/s) · grey dashes: {bound_name(ceiling)}, which "
             "bounds decode steps/s, not tok/s")
    return _panel(chart, title)


MBU_LINES = {"mbu": "MBU", "dram_bw_util": "DRAM (GPU reading)"} | table_lines("mbu")


def mbu_chart(points: Sequence[SeriesPoint], frame: Frame, min_mbu: float | None, source: str = "") -> AnyChart:
    """MBU per step (%), and the GPUs' DRAM bandwidth utilisation beside it where they read one (the gap
    is overhead traffic), with a user rule's ``min_mbu`` line where one is given (no default rule has an
    MBU floor: docs/alerts.md); the title names MBU's source (or why none)."""
    data = long_rows(points, MBU_LINES, frame.step_s, 100)
    lines = _lines(data, frame, "%")
    top = axis_top(data["value"], 100.0)  # a modelled MBU past 100 % says the inputs are wrong: keep it in sight
    lines = lines.encode(y=alt.Y("value:Q", title=None, scale=zero_scale(top), axis=Y_AXIS))
    # one line: a longer title widens the stacked chart past its element (the tile says why there is none)
    if not any(p.mbu is not None for p in points):
        return _panel(lines, f"Model bandwidth utilisation (MBU), per {_step(frame)} (%): no data, the MBU tile says why")
    title = f"Model bandwidth utilisation (MBU), per {_step(frame)} (%): {source or 'best source per step'}"
    if any(p.dram_bw_util is not None for p in points):
        title = f"MBU and DRAM bandwidth, per {_step(frame)} (%): MBU {source or 'best source per step'}"
    if min_mbu is None:
        return _panel(lines, title)
    return _panel(_layer(lines, hline(min_mbu * 100, frame)), f"{title} · red dashes: min_mbu {min_mbu * 100:.0f} %")


PREEMPTION_LINES = {"preemptions_per_s": "preemptions"} | table_lines("preemptions")


def preemption_chart(points: Sequence[SeriesPoint], frame: Frame) -> AnyChart:
    # per second over the time the step's scrapes cover, not its count ÷ the step: the step after
    # a gap in collection holds the whole gap's preemptions
    data = long_rows(points, PREEMPTION_LINES, frame.step_s, scale=60.0)
    # Only steps with preemptions: a zero bar draws nothing, and most steps have none (a tenth of the
    # Overview's rows at 30 days, each decoded and laid out by the browser for no pixel).
    # The steps with none draw as one red line per run of them at 0 (a few rows), above the x axis.
    y = alt.Y("value:Q", title=None, scale=zero_scale(axis_top(data["value"], 1.0)), axis=Y_AXIS)
    bars = (
        alt.Chart(data[data["value"] > 0])
        .mark_bar(color=COLORS["preemptions"], width={"band": 1})
        .encode(
            x=_x(frame),
            y=y,
            tooltip=[TOOLTIP_TIME, alt.Tooltip("value:Q", title="preemptions per minute", format=".2~f")],
        )
    )
    none = alt.Chart(zero_runs(data).assign(value=0.0)).mark_rule(color=COLORS["preemptions"], strokeWidth=2).encode(
        x=_x(frame), x2="end:T", y=y, tooltip=alt.value("no preemptions"))  # fmt: skip
    return _panel(_layer(bars, none), f"Preemptions per minute (averaged per {_step(frame)}); each one redoes a request's work")


# A panel's y axis starts this share of its height below 0, so a series at 0 (no preemptions, an
# empty gateway queue) draws as a visible line above the x axis instead of under it (issue 30).
ZERO_PAD = 0.04


def zero_scale(top: float) -> alt.Scale:
    """A linear y scale from a little below 0 (:data:`ZERO_PAD`) to ``top``, no rounding of its ends."""
    return alt.Scale(domain=[-ZERO_PAD * top, top], nice=False)


def zero_runs(data: pd.DataFrame) -> pd.DataFrame:
    """The runs of consecutive steps of ``data`` (long rows, ``time`` in ms, NaN where a step has no
    data) whose value is 0: one row each, ``time`` to ``end``, so a panel that draws only its non-zero
    steps still shows where it measured none."""
    rows, start, last = [], None, None
    for t, v in zip(data["time"], data["value"], strict=True):
        if v == 0:
            start, last = (t if start is None else start), t
            continue
        if start is not None:
            rows.append({"time": start, "end": last})
        start = None
    if start is not None:
        rows.append({"time": start, "end": last})
    return pd.DataFrame(rows, columns=["time", "end"])


def axis_top(values: Iterable[float], floor: float) -> float:
    """The top of an axis that follows the data: its largest value, never below ``floor``."""
    seen = [v for v in values if not math.isnan(v)]
    return max([floor, *seen])


CONCURRENCY_LINES = {"running_avg": "running", "waiting_max": "waiting", "queue_depth_max": "gateway queue"} | table_lines("concurrency")


def concurrency_chart(points: Sequence[SeriesPoint], frame: Frame, sweet_spot: int | None, source: str = "") -> AnyChart:
    """Running, waiting and the gateway queue, with the sweet spot (``source``: where it came from) when known."""
    data = long_rows(points, CONCURRENCY_LINES, frame.step_s)
    names = list(dict.fromkeys(data["series"]))
    top = axis_top(data["value"], max(1.0, (sweet_spot or 0) * 1.05))
    # the gateway queue dashed: where it and vLLM's waiting are both 0, the waiting line shows between its dashes
    lines = _lines(data, frame, "requests").encode(
        y=alt.Y("value:Q", title=None, scale=zero_scale(top), axis=Y_AXIS),
        strokeDash=alt.StrokeDash("series:N", legend=None, scale=alt.Scale(
            domain=names, range=[[6, 4] if n == "gateway queue" else [1, 0] for n in names])))  # fmt: skip
    title = f"Running (avg), waiting and gateway queue (max), per {_step(frame)} (requests)"
    if sweet_spot is None:
        return _panel(lines, f"{title} · sweet spot unknown")
    return _panel(_layer(lines, hline(sweet_spot, frame)), f"{title} · red dashes: sweet spot {sweet_spot}"
                  + (f" ({source})" if source else ""))


KV_LINES = {"kv_cache_usage_max": "KV usage"} | table_lines("kv_cache")


def kv_chart(points: Sequence[SeriesPoint], frame: Frame, warning: float, critical: float) -> AnyChart:
    lines = _lines(long_rows(points, KV_LINES, frame.step_s, 100), frame, "%")
    lines = lines.encode(y=alt.Y("value:Q", title=None, scale=zero_scale(100.0), axis=Y_AXIS))
    chart = _layer(
        lines,
        hline(warning * 100, frame, WARNING_COLOR),
        hline(critical * 100, frame),
    )
    title = (
        f"KV-cache usage, max per {_step(frame)} (%) · orange: warning {warning * 100:.0f} %, "
        f"red: critical {critical * 100:.0f} %"
    )
    return _panel(chart, title)


def overview_chart(
    points: Sequence[SeriesPoint], frame: Frame, ttft: Sequence[SeriesPoint], ttft_frame: Frame,
    sweetspot: SweetSpotSettings, ceiling: CeilingInfo | None, mbu_source: str = "", spot_source: str = "",
    epochs: Sequence[ConfigEpoch] = (), prefix_caching: bool | None = None,
) -> alt.VConcatChart:  # fmt: skip
    """The Overview's eight panels (:data:`OVERVIEW`, drawn from :data:`PANELS`) on one time axis;
    TTFT and the finished requests may have a coarser step (``ttft_frame``: at least a minute, a
    count per 5 s is zero or one request). ``mbu_source``: the window's MBU source, or why it has none;
    ``spot_source``: where the sweet spot came from. ``epochs``: marked on every panel (:func:`with_epochs`).
    ``prefix_caching``: the engine's config (TargetInfo.prefix_caching), for the prefix-cache panel's reason."""
    against = Against(sweetspot, ceiling, mbu_source, spot_source, prefix_caching=prefix_caching)
    return stack_marked(epochs, frame, *(
        PANELS[name].draw(*((ttft, ttft_frame) if name in COARSE else (points, frame)), against) for name in OVERVIEW
    ))  # fmt: skip


def stack_marked(epochs: Sequence[ConfigEpoch], frame: Frame, *panels: AnyChart) -> alt.VConcatChart:
    """:func:`stack` with the configuration epochs marked on each panel."""
    return stack(*(with_epochs(p, epochs, frame) for p in panels))


# How requests ended (vLLM's request_success by finished_reason, SGLang's aborts) and how many were
# turned away at the door: aborts and errors are the alert-worthy ones (docs/metrics.md).
OUTCOMES = {
    "finished_stop_per_s": "stop",
    "finished_length_per_s": "length",
    "finished_abort_per_s": "abort",
    "finished_error_per_s": "error",
    "admission_rejections_per_s": "rejected (503)",
}


def outcomes_chart(points: Sequence[SeriesPoint], frame: Frame) -> AnyChart:
    data = long_rows(points, OUTCOMES, frame.step_s, 60.0)
    lines = _lines(data, frame, "requests per minute").encode(
        y=alt.Y("value:Q", title=None, scale=zero_scale(axis_top(data["value"], 1.0)), axis=Y_AXIS))
    title = (f"Requests finished per minute by reason, and rejected at admission (HTTP 503), "
             f"averaged per {_step(frame)} (req/min)")
    return _panel(lines, title)


PREFIX_CACHE_LINES = {"prefix_cache_hit_rate": "hit rate"} | table_lines("prefix_cache")
PREFIX_CACHING_OFF = "no data, prefix caching is off in the engine's config (--enable-prefix-caching)"


def prefix_cache_chart(points: Sequence[SeriesPoint], frame: Frame, prefix_caching: bool | None = None) -> AnyChart:
    """``prefix_caching``: whether the engine's config turns it on (None: not said), for a blank panel's reason."""
    lines = _lines(long_rows(points, PREFIX_CACHE_LINES, frame.step_s, 100), frame, "%")
    lines = lines.encode(y=alt.Y("value:Q", title=None, scale=zero_scale(100.0), axis=Y_AXIS))
    what = "prompt tokens found in the cache ÷ looked up"
    if all(p.prefix_cache_hit_rate is None for p in points):  # a blank panel says why, read from the engine's
        what = (PREFIX_CACHING_OFF if prefix_caching is False  # config (one line: a longer title widens the chart)
                else "no data, the engine exposes no prefix-cache counters")
    title = f"Prefix-cache hit rate per {_step(frame)} (%): {what}"
    return _panel(lines, title)


@dataclass(frozen=True)
class Against:
    """What panels draw their lines against: the target's sweet spot (its thresholds), the report's
    ceiling, and the window's MBU source (or why it has none)."""

    sweetspot: SweetSpotSettings
    ceiling: CeilingInfo | None = None
    mbu_source: str = ""
    spot_source: str = ""  # where the sweet spot came from (app/sweet_spot.py)
    for_alert: bool = False  # an alert's e-mail: a user's MBU rule draws its floor (no default rule has one)
    prefix_caching: bool | None = None  # the engine's config turns prefix caching on (None: not said)


@dataclass(frozen=True)
class Panel:
    """A time panel said once: the SeriesPoint fields it draws with their legend names (``lines``),
    the threshold its red line draws (``threshold``: a SweetSpotSettings field, which an alert's own
    threshold replaces in its e-mail; "" for none or several), whether it draws the report's ceiling,
    and ``draw`` (its title, scales and lines). The Overview (:func:`overview_chart`) and the alert
    e-mail (app/notify/images.py) both draw from :data:`PANELS`."""

    lines: Mapping[str, str]
    draw: Callable[[Sequence[SeriesPoint], Frame, Against], AnyChart]
    threshold: str = ""
    ceiling: bool = False

    @property
    def fields(self) -> tuple[str, ...]:
        """The SeriesPoint fields to read for this panel."""
        return tuple(self.lines)


PANELS: dict[str, Panel] = {
    "ttft": Panel(TTFT_LINES, lambda p, f, a: ttft_chart(p, f, a.sweetspot.ttft_p95_slo_s), threshold="ttft_p95_slo_s"),
    "throughput": Panel(THROUGHPUT_LINES, lambda p, f, a: throughput_chart(p, f, a.ceiling), ceiling=True),
    "mbu": Panel(MBU_LINES, lambda p, f, a: mbu_chart(p, f, a.sweetspot.min_mbu if a.for_alert else None,
                                                         a.mbu_source), threshold="min_mbu"),
    "preemptions": Panel(PREEMPTION_LINES, lambda p, f, a: preemption_chart(p, f)),
    "concurrency": Panel(CONCURRENCY_LINES, lambda p, f, a: concurrency_chart(p, f, a.sweetspot.concurrency, a.spot_source),
                         threshold="concurrency"),
    "kv_cache": Panel(KV_LINES, lambda p, f, a: kv_chart(p, f, a.sweetspot.kv_warning, a.sweetspot.kv_critical)),
    "prefix_cache": Panel(PREFIX_CACHE_LINES, lambda p, f, a: prefix_cache_chart(p, f, a.prefix_caching)),
    "outcomes": Panel(OUTCOMES, lambda p, f, a: outcomes_chart(p, f)),
}  # fmt: skip
OVERVIEW = PANEL_NAMES
# Drawn at a step of at least a minute: quantiles and request counts over 5 s hold one or two requests.
COARSE = ("ttft", "outcomes")


def panel_fields(*names: str) -> tuple[str, ...]:
    """The SeriesPoint fields the panels ``names`` draw, each once, in order."""
    return tuple(dict.fromkeys(f for name in names for f in PANELS[name].fields))


def overview_fields(coarse: bool) -> tuple[str, ...]:
    """The SeriesPoint fields the Overview's coarse panels (:data:`COARSE`) or its other panels draw:
    what the page reads follows the panels, so a figure row's ``panel`` reaches it with no list to edit."""
    return panel_fields(*(name for name in OVERVIEW if (name in COARSE) == coarse))


def _step(frame: Frame) -> str:
    return format_duration(frame.step_s)


ALL_GPUS = "mean of all GPUs"


ENGINE_UUID = "engine-estimate"  # the engine-side traffic's stand-in GPU (app.ui.traffic.engine_points)
ENGINE_NAME = "vLLM estimate"


def gpu_chart(
    points: Sequence[GpuPoint], frame: Frame, field: str, title: str, unit: str, names: dict[str, str],
    scale: float = 1, pick: str | None = None, peak: float | None = None, peak_name: str = "peak",
    epochs: Sequence[ConfigEpoch] = (),
) -> AnyChart:  # fmt: skip
    """``field`` × ``scale`` of the GPU ``pick`` (a UUID), or the mean of all with their min–max band.

    Eight near-identical lines cannot be told apart; a mean with the band shows the spread, and one
    GPU picked shows its own line. ``peak`` draws a limit (datasheet bandwidth, total memory) as a
    grey line labelled ``{peak_name} {peak} {unit}``: "peak 900 GB/s", "total memory 32 GiB".
    """
    # The engine's own estimate (app.ui.traffic) is a line of its own: never one of the GPUs whose
    # mean and min–max band are drawn, or its lower figure would stretch the band down to it.
    estimate = gpu_rows([p for p in points if p.uuid == ENGINE_UUID], field, frame.step_s, scale)
    mine = [p for p in points if p.uuid != ENGINE_UUID and (pick is None or p.uuid == pick)]
    label = names.get(pick, pick[:12]) if pick else ALL_GPUS
    data = gpu_rows(mine, field, frame.step_s, scale)
    base = alt.Chart(data).encode(x=_x(frame))
    top = axis_top(pd.concat([data["high"], estimate["high"]]), peak or 0)
    y = alt.Y("mean:Q", title=unit, scale=alt.Scale(domain=[0, top]))
    band = base.mark_area(opacity=0.25, color=COLORS["running"]).encode(y=alt.Y("low:Q", title=unit), y2="high:Q")
    line = base.mark_line(invalid="break-paths-show-domains", color=COLORS["running"]).encode(
        y=y,
        tooltip=[TOOLTIP_TIME, alt.Tooltip("mean:Q", title=f"{label} ({unit})", format=".3~f"),
                 alt.Tooltip("low:Q", title="min", format=".3~f"), alt.Tooltip("high:Q", title="max", format=".3~f")],
    )  # fmt: skip
    layers: list[Any] = [line] if pick else [line, band]
    if not estimate.empty:
        layers.append(alt.Chart(estimate).encode(x=_x(frame)).mark_line(
            invalid="break-paths-show-domains", color=COLORS["waiting"], strokeDash=[2, 2]).encode(
            y=alt.Y("mean:Q", title=unit, scale=alt.Scale(domain=[0, top])),
            tooltip=[TOOLTIP_TIME, alt.Tooltip("mean:Q", title=f"{ENGINE_NAME} ({unit})", format=".3~f")]))  # fmt: skip
    if peak is not None:
        layers.append(hline(peak, frame, REFERENCE, f"{peak_name} {number(peak)} {unit}"))
    what = f"{label} (line), min–max (band)" if pick is None else label
    if not estimate.empty:
        what += f", {ENGINE_NAME} (dotted)"
    if epochs:  # under the lines and labels: drawn over them, a restart's rule crossed "total memory 31.7 GiB"
        layers.insert(0, epoch_layer(epochs, frame))
    # what the lines are goes under the title, in smaller type: one line of both was cut with "…" on a
    # half-width chart at 1440 and 1280 px
    return _finish(_layer(*layers), alt.TitleParams(text=title, subtitle=what))


def gpu_rows(points: Sequence[GpuPoint], field: str, step_s: float, scale: float = 1) -> pd.DataFrame:
    """Per step: ``time`` (ms), the ``mean``, ``low`` and ``high`` of ``field`` × ``scale`` across GPUs."""
    by_ts: dict[float, list[float]] = {}
    for p in points:
        value = getattr(p, field)
        if value is not None:
            by_ts.setdefault(p.ts, []).append(value * scale)
    steps = with_gaps([_Step(ts) for ts in sorted(by_ts)], step_s)
    rows: list[dict[str, float]] = []
    for i, step in enumerate(steps):
        if step is None:  # a hole: one NaN row just after the step before it breaks the line
            rows.append({"time": (steps[i - 1].ts + step_s) * 1000, "mean": math.nan, "low": math.nan, "high": math.nan})
            continue
        values = by_ts[step.ts]
        mean = sum(values) / len(values) if values else math.nan
        rows.append({"time": step.ts * 1000, "mean": mean, "low": min(values, default=math.nan),
                     "high": max(values, default=math.nan)})  # fmt: skip
    return pd.DataFrame(rows, columns=["time", "mean", "low", "high"])


@dataclass(frozen=True)
class _Step:
    ts: float


# The reference deployment of DOMAIN.md §2 (8× V100, 70B AWQ, TP 8), mixed load.
REFERENCE_TOKENS = ((8, 85.0), (16, 126.0), (32, 145.0))
REFERENCE_TTFT_P95 = ((8, 1.5), (32, 4.8))


# At most this many labelled ticks on a concurrency axis: Vega's default (one per 40 px) put ~31
# labels from 0.0 to 3.0 on a page-wide chart (issue 30).
CONCURRENCY_TICKS = 8


def concurrency_x(values: Iterable[float | None]) -> alt.X:
    """The concurrency axis of the Operating point charts: from 0 to a round number past the largest
    x ``values`` (every layer's: dots, curves, sweeps, marks), so no point sits on the right edge,
    with at most :data:`CONCURRENCY_TICKS` labels."""
    seen = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    top = _round_up(max(seen, default=1.0) * 1.08)
    return alt.X("running:Q", title="running requests (concurrency)", scale=alt.Scale(domain=[0, top], nice=False),
                 axis=alt.Axis(tickCount=CONCURRENCY_TICKS, labelOverlap=True))  # fmt: skip


def _round_up(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × a power of ten at or above ``value``."""
    power = 10.0 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= value - 1e-12)


def scatter_rows(points: Iterable[SeriesPoint], y_attr: str) -> pd.DataFrame:
    rows = [
        {"running": p.running_avg, "value": getattr(p, y_attr), "time": p.ts * 1000}
        for p in points
        if p.running_avg is not None and getattr(p, y_attr) is not None
    ]
    return pd.DataFrame(rows, columns=["running", "value", "time"])


def operating_point_chart(
    points: Sequence[SeriesPoint],
    y_attr: str,
    y_title: str,
    reference: Sequence[tuple[float, float]],
    sweeps: Sequence[SweepRun] = (),
    marks: Sequence[tuple[float, str]] = (),
    title: str = "",
    slo_s: float | None = None,
    roofline: Sequence[tuple[float, float]] = (),
    curve_label: str = "reference (V100 report)",
    benches: Sequence[BenchRun] = (),
    compute_roof: float | None = None,
) -> alt.LayerChart:
    """Measured steps as dots coloured by time, a curve (the report's on the demo, else the target's own
    fitted one, named by ``curve_label``; none when empty), sweep levels, imported benchmarks
    (``benches``, :func:`bench_layer`) and vertical marks.

    ``slo_s`` (a latency chart): the y axis keeps that SLO readable (:func:`latency_scale`), drawn as
    a red dashed line. ``roofline``: (concurrency, value) of the bandwidth roof, drawn as a labelled
    line; ``compute_roof``: the compute roof (tok/s), a labelled horizontal line; the axis turns
    logarithmic when they run far above the measured values (:func:`spread_scale`).
    Legends sit under the plot: beside it, a half-page chart cuts them off.
    """
    data = scatter_rows(points, y_attr)
    roof_name = ROOFLINE_NAME
    if roofline and compute_roof and max(v for _, v in roofline) > compute_roof:
        # drawn as the attainable: never above the compute roof (docs/ceiling.md: the lower of the two)
        roofline, roof_name = [(c, min(v, compute_roof)) for c, v in roofline], ATTAINABLE_NAME
    x = concurrency_x([*data["running"], *(c for c, _ in reference), *(c for c, _ in roofline), *(at for at, _ in marks),
                       *(lv.concurrency for run in sweeps for lv in run.levels),
                       *(p.concurrency for run in benches for p in run.points)])  # fmt: skip
    y = alt.Y("value:Q", title=y_title)
    sweep_values = [getattr(lv, y_attr) for run in sweeps for lv in run.levels]
    sweep_values += [getattr(p, y_attr) for run in benches for p in run.points]
    if slo_s is not None:
        scale, note = latency_scale([*data["value"], *(v for _, v in reference), *sweep_values], slo_s)
        y = alt.Y("value:Q", title=y_title + note.replace(" · ", ", "), scale=scale)
    elif roofline:
        roofs = [v for _, v in roofline] + ([compute_roof] if compute_roof else [])
        scale, note = spread_scale([*data["value"], *(v for _, v in reference), *sweep_values], roofs)
        y = alt.Y("value:Q", title=y_title + note, scale=scale)
        if note:
            data = data[data["value"] > 0]  # no zero on a log axis
    dots = (
        alt.Chart(data)
        .mark_circle(size=28, opacity=0.7)
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "time:T", title="time", scale=alt.Scale(scheme="viridis"),
                legend=alt.Legend(format=TIME_FORMAT, orient="bottom", direction="horizontal", gradientLength=240,
                                  labelOverlap="greedy"),
            ),  # fmt: skip
            tooltip=[
                TOOLTIP_TIME,
                alt.Tooltip("running:Q", format=".1f"),
                alt.Tooltip("value:Q", title=y_title, format=".3~f"),
            ],
        )
    )
    layers: list[Any] = [dots, *([_reference_curve(reference, y_title, curve_label)] if reference else [])]
    if sweeps and benches:
        # one legend for both, its entries one under another: two legends above the plot sit side by
        # side, and ran past a half-page chart's right edge ("vllm bench serve 2026-12-0" cut off)
        both = _layer(_sweep_layer(sweeps, y_attr, y_title, RUNS_TITLE), bench_layer(benches, y_attr, y_title, RUNS_TITLE))
        layers.append(_with(both, resolve=alt.Resolve(scale=alt.ScaleResolveMap(color="shared"))))
    elif sweeps:
        layers.append(_sweep_layer(sweeps, y_attr, y_title))
    elif benches:
        layers.append(bench_layer(benches, y_attr, y_title))
    layers.extend(_vmark(at, text) for at, text in marks)
    if slo_s is not None:
        layers.append(_slo_rule(slo_s))
    if roofline:
        layers.append(_roofline_layer(roofline, y_title, roof_name))
    if roofline and compute_roof:
        layers.append(_compute_roof_layer(compute_roof, roofline[-1][0], y_title))
    chart: alt.LayerChart = _layer(*layers).properties(height=300, title=title).resolve_scale(color="independent")
    return chart


# Past this ratio of a bound to the largest measured value a linear axis squashes the measurements
# flat (the reference: a roofline of 4,564 tok/s at 32 against 145 measured): the axis turns log.
LOG_ABOVE_DATA = 4.0


def spread_scale(measured: Iterable[float | None], bound: Iterable[float]) -> tuple[alt.Scale, str]:
    """The y scale of a chart of ``measured`` values under a modelled ``bound``, and a note for its title:
    linear from 0 while the bound stays within :data:`LOG_ABOVE_DATA` × the data, else logarithmic
    over every positive value."""
    seen = [v for v in measured if v is not None and not math.isnan(v) and v > 0]
    tops = [v for v in bound if v > 0]
    top = max([*seen, *tops], default=1.0)
    if not seen or top <= LOG_ABOVE_DATA * max(seen):
        return alt.Scale(domainMin=0), ""
    low = min([*seen, *tops])
    return alt.Scale(type="log", domain=[low * 0.8, top * 1.25], nice=False), " (log scale)"


ROOFLINE_NAME = "bandwidth roofline (modelled bound)"
COMPUTE_ROOF_NAME = "compute roof"
ATTAINABLE_NAME = "attainable (bandwidth roofline up to the compute roof)"


def _compute_roof_layer(roof: float, up_to: float, y_title: str) -> alt.LayerChart:
    data = pd.DataFrame({"running": [0.0, up_to], "value": [roof, roof], "label": [COMPUTE_ROOF_NAME] * 2})
    line = alt.Chart(data).mark_line(color=COLORS["compute roof"], strokeWidth=2, strokeDash=[8, 3]).encode(
        x="running:Q", y="value:Q",
        tooltip=["label:N", alt.Tooltip("value:Q", title=y_title, format=",.0f")],
    )  # fmt: skip
    text = data.head(1).assign(text=f"{COMPUTE_ROOF_NAME}: {number(roof)} tok/s")
    label = alt.Chart(text).mark_text(color=COLORS["compute roof"], align="left", baseline="bottom", dx=4, dy=-6).encode(
        x="running:Q", y="value:Q", text="text:N"
    )
    return _layer(line, label)


def _roofline_layer(roofline: Sequence[tuple[float, float]], y_title: str, name: str = "") -> alt.LayerChart:
    name = name or ROOFLINE_NAME
    data = pd.DataFrame({"running": [c for c, _ in roofline], "value": [v for _, v in roofline]})
    data["label"] = name
    base = alt.Chart(data).encode(x="running:Q", y="value:Q")
    line = base.mark_line(color=COLORS["roofline"], strokeWidth=2).encode(
        tooltip=["label:N", alt.Tooltip("running:Q", format=".1f"), alt.Tooltip("value:Q", title=y_title, format=",.0f")]
    )
    # clipped, a short label: the long one ran under the rising curve (the tooltip names it in full)
    short = "attainable" if name == ATTAINABLE_NAME else name
    end = data.tail(1).assign(text=f"{short}: {number(roofline[-1][1])} at {number(roofline[-1][0])}")
    # clipped at the compute roof, the curve ends flat on it, whose own label sits above it at the left:
    # this one goes under the line's end, clear of both
    under = name == ATTAINABLE_NAME
    label = alt.Chart(end).mark_text(color=COLORS["roofline"], align="right", baseline="top" if under else "bottom",
                                     dy=6 if under else -6).encode(x="running:Q", y="value:Q", text="text:N")  # fmt: skip
    return _layer(line, label)


def per_request_chart(speeds: Sequence[Any], bound: float | None, title: str) -> alt.LayerChart:
    """Per-request decode speed against concurrency: aggregate tok/s ÷ running and 1 ÷ ITL P95 per step
    (``speeds``: app.operating_point.RequestSpeed), and one request's bound as a labelled line."""
    rows = [
        {"running": s.running, "value": value, "series": name, "time": s.ts * 1000}
        for s in speeds
        for name, value in (("tok/s ÷ running", s.per_request_tokens_per_s), ("1 ÷ ITL P95", s.itl_tokens_per_s))
        if value is not None
    ]
    data = pd.DataFrame(rows, columns=["running", "value", "series", "time"])
    scale, note = spread_scale(data["value"], [bound] if bound else [])
    names = ["tok/s ÷ running", "1 ÷ ITL P95"]
    dots = (
        alt.Chart(data)
        .mark_circle(size=24, opacity=0.6)
        .encode(
            x=concurrency_x(data["running"]),
            y=alt.Y("value:Q", title=f"tok/s per request{note}", scale=scale),
            color=alt.Color("series:N", title=None, scale=alt.Scale(domain=names, range=[COLORS[n] for n in names]),
                            legend=alt.Legend(orient="bottom", direction="horizontal")),
            tooltip=[TOOLTIP_TIME, alt.Tooltip("running:Q", format=".1f"), "series:N",
                     alt.Tooltip("value:Q", title="tok/s per request", format=".3~f")],
        )
    )  # fmt: skip
    layers: list[Any] = [dots]
    if bound:
        label = f"one request: at most {number(bound)} tok/s (the roofline at 1)"
        rule = pd.DataFrame({"value": [bound], "label": [label]})
        base = alt.Chart(rule)
        layers.append(base.mark_rule(color=COLORS["roofline"], strokeWidth=2).encode(y="value:Q", tooltip="label:N"))
        layers.append(base.mark_text(color=COLORS["roofline"], align="right", baseline="bottom", dy=-4).encode(
            x=alt.value("width"), y="value:Q", text="label:N"))  # fmt: skip
    return _layer(*layers).properties(height=300, title=title)


def _slo_rule(slo_s: float) -> alt.Chart:
    data = pd.DataFrame({"value": [slo_s], "label": [f"SLO {number(slo_s)} s"]})
    rule: alt.Chart = alt.Chart(data).mark_rule(color=THRESHOLD, strokeDash=[6, 4]).encode(y="value:Q", tooltip="label:N")
    return rule


def _reference_curve(reference: Sequence[tuple[float, float]], y_title: str, label: str) -> alt.LayerChart:
    data = pd.DataFrame({"running": [c for c, _ in reference], "value": [v for _, v in reference]})
    data["label"] = label
    base = alt.Chart(data).encode(
        x="running:Q", y="value:Q", tooltip=["label:N", "running:Q", alt.Tooltip("value:Q", title=y_title)]
    )
    return _layer(base.mark_line(color=REFERENCE, strokeDash=[4, 3]), base.mark_point(color=REFERENCE, size=60))


RUNS_TITLE = "load sweep or benchmark"  # the legend of both (a title past 180 px is cut short)


def _sweep_layer(sweeps: Sequence[SweepRun], y_attr: str, y_title: str, legend_title: str = "load sweep") -> alt.Chart:
    sweep_attr = {"tokens_per_s": "tokens_per_s", "ttft_p95_s": "ttft_p95_s"}[y_attr]
    rows = [
        {"running": level.concurrency, "value": getattr(level, sweep_attr), "sweep": _sweep_name(run),
         "measured": sweep_source(run), "mix": run.mix}
        for run in sweeps
        for level in run.levels
        if getattr(level, sweep_attr) is not None
    ]
    data = pd.DataFrame(rows, columns=["running", "value", "sweep", "measured", "mix"])
    chart: alt.Chart = (
        alt.Chart(data)
        .mark_line(point=alt.OverlayMarkDef(shape="diamond", size=80))
        .encode(
            x="running:Q",
            y="value:Q",
            color=alt.Color(
                "sweep:N", title=legend_title, scale=alt.Scale(scheme="dark2"),
                legend=alt.Legend(orient="top", direction="vertical", labelLimit=400),
            ),  # fmt: skip
            tooltip=["sweep:N", "measured:N", "mix:N", "running:Q", alt.Tooltip("value:Q", title=y_title, format=".3~f")],
        )
    )
    return chart


def _sweep_name(run: SweepRun) -> str:
    # short enough for a half-page legend; the tooltip and the page's caption carry the URL and mix
    where = run.target or server(run.url).split("://")[-1] or run.url
    return f"sweep {minute(run.started_at)} · {where}"


def sweep_source(run: SweepRun) -> str:
    """What a sweep measured: ``target prod (http://10.0.0.5:8000/v1)``, or the URL alone."""
    return f"target {run.target} ({run.url})" if run.target else run.url


def _vmark(at: float, text: str) -> alt.LayerChart:
    data = pd.DataFrame({"running": [at], "label": [text]})
    base = alt.Chart(data)
    rule = base.mark_rule(color=THRESHOLD, strokeDash=[6, 4]).encode(x="running:Q")
    # at the bottom of the plot: the top right carries the roofline's label, which this one crossed
    label = base.mark_text(align="left", baseline="bottom", dx=4, dy=-4, color=THRESHOLD).encode(
        x="running:Q", y=alt.value("height"), text="label:N"
    )
    return _layer(rule, label)


def bench_name(run: BenchRun) -> str:
    """``vllm bench serve 2026-12-06 03:01``: an imported benchmark in a legend (the tooltip has the rest)."""
    return f"{run.tool} {minute(run.run_at)}"


def bench_layer(benches: Sequence[BenchRun], y_attr: str, y_title: str, legend_title: str = "imported benchmark") -> alt.Chart:
    """Imported benchmark levels (``bench import``) as squares joined per run, coloured by run; the
    tooltip carries the date, the level's setting, where its concurrency comes from and the run's settings."""
    rows = [
        {"running": p.concurrency, "value": getattr(p, y_attr), "benchmark": bench_name(run), "level": p.label,
         "concurrency from": p.concurrency_source, "model": run.model, "file": run.file_name,
         "settings": ", ".join(f"{k}={v}" for k, v in sorted(run.settings.items()))}
        for run in benches
        for p in run.points
        if getattr(p, y_attr, None) is not None
    ]  # fmt: skip
    data = pd.DataFrame(rows, columns=["running", "value", "benchmark", "level", "concurrency from", "model", "file",
                                       "settings"])  # fmt: skip
    chart: alt.Chart = (
        alt.Chart(data)
        .mark_line(strokeDash=[2, 2], point=alt.OverlayMarkDef(shape="square", size=70))
        .encode(
            x="running:Q",
            y="value:Q",
            color=alt.Color("benchmark:N", title=legend_title, scale=alt.Scale(scheme="set1"),
                            legend=alt.Legend(orient="top", direction="vertical", labelLimit=400)),
            tooltip=["benchmark:N", "level:N", alt.Tooltip("running:Q", title="concurrency", format=".2~f"),
                     "concurrency from:N", alt.Tooltip("value:Q", title=y_title, format=".3~f"), "model:N", "file:N",
                     "settings:N"],
        )
    )  # fmt: skip
    return chart


EPOCH_COLOR = "#6a3d9a"


def epoch_layer(epochs: Sequence[ConfigEpoch], frame: Frame) -> alt.Chart:
    """Configuration epochs and restarts (db/epochs.py) inside the frame as dotted vertical rules; hover
    one: when, what kind, what changed. The first configuration seen is no change: not drawn."""
    rows = [{"time": e.ts * 1000, "kind": e.kind, "changed": e.text()}
            for e in epochs if e.kind != "first" and frame.start <= e.ts <= frame.end]  # fmt: skip
    data = pd.DataFrame(rows, columns=["time", "kind", "changed"])
    chart: alt.Chart = (
        alt.Chart(data)
        .mark_rule(color=EPOCH_COLOR, strokeDash=[2, 3], strokeWidth=2)
        .encode(x=_x(frame), tooltip=[TOOLTIP_TIME, alt.Tooltip("kind:N", title="epoch"),
                                      alt.Tooltip("changed:N", title="what changed")])
    )  # fmt: skip
    return chart


def with_epochs(panel: AnyChart, epochs: Sequence[ConfigEpoch], frame: Frame) -> AnyChart:
    """``panel`` with :func:`epoch_layer` over it (the panel as it is when there is none to mark)."""
    if not any(e.kind != "first" and frame.start <= e.ts <= frame.end for e in epochs):
        return panel
    title, height = panel.title, panel.height
    inner = panel.copy(deep=False)  # the title and height move to the layer that holds both
    inner.title, inner.height = alt.Undefined, alt.Undefined
    # the rules under the panel's lines and labels, which they would otherwise cross out
    marked: AnyChart = _with(_layer(epoch_layer(epochs, frame), inner), title=title, height=height)
    return marked
