"""The figures pipeline: stored rows of a set of targets → arrays per step → the records' figures.

One engine for one target or many (db/queries.py's Reader.window and Reader.series read one, the
Fleet every target at once, db/fleet.py): each kind of row is fetched by one statement for every
target asked, reduced over every (target, step) cell at once, then sliced per target. What each
figure reads and how it combines comes from db/figures.py's FIGURES. Arrays hold one value per
step; NaN is "no data" (a gap), never zero. Rates divide by the time the rounds cover (docs/storage.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from sqlalchemy import Connection

from collectors.catalogue import FINISHED_BY_REASON, sleep_state
from core.settings import NO_CEILING
from db import aggregate, derived, mbu_figures, sources
from db.figures import FIGURES, record_fields
from db.quantiles import attainment_matrix, holding_buckets, quantile_matrix
from db.results import LITTLE, MEASURED, WAIT_UNKNOWN, CeilingInfo, GpuFigures, WindowFigures, stale_age
from db.schema import COUNTERS, GATEWAY_WAIT, GAUGES, HISTOGRAMS
from db.sources import RAW
from db.thresholds import stored_ttft_slo

RAW_WINDOW_MAX_S = 6 * 3600
HOURLY_WINDOW_MIN_S = 2 * 86400
# The engine's name tables, derived from db/figures.py's FIGURES (itself generated in part from the
# catalogue): what each figure reads, how its per-model values combine, which arrays it is built from.
_MODEL_ROWS = tuple(f for f in FIGURES if f.rows == "model")
_QUANTILES = tuple((f.inputs[0], f.quantile, f.name) for f in _MODEL_ROWS if f.compute == "quantile")
_RATES = tuple(f for f in _MODEL_ROWS if f.compute == "rate")
_RATIOS = tuple(f for f in _MODEL_ROWS if f.compute == "ratio")
_GAUGES = tuple(f for f in _MODEL_ROWS if f.compute in ("gauge_avg", "gauge_max"))
_DERIVED = tuple(f for f in _MODEL_ROWS if f.compute == "derived")
_SHARES = tuple(f for f in _MODEL_ROWS if f.compute == "share")  # within the target's TTFT SLO
_ENGINE_ORDER = ("quantile", "rate", "count", "gauge_avg", "gauge_max", "ratio", "derived", "share")
# every figure the engine computes: SeriesPoint's fields (the target rows' figures last)
POINT_KEYS = (
    *(f.name for kind in _ENGINE_ORDER for f in _MODEL_ROWS if f.compute == kind),
    *(f.name for f in FIGURES if f.rows == "target" and f.compute != "record"),
)
_UNBLANKED = frozenset(f.name for f in FIGURES if f.rows == "target")  # shown even in a step with no scrape
# a gauge averaged over the step is reduced as its column's ``_avg``; a ratio's fallback gauge too
_REDUCED = {f.name: f.column.removesuffix("_sum") + "_avg" if f.compute == "gauge_avg" else f.column for f in _GAUGES}
_FALLBACKS = {f.name: f"{f.fallback}_avg" for f in _RATIOS if f.fallback}
# the client-seen figures need the gateway queue (the target's rows), the admission rate and the engine's own
_GATEWAY_NEEDS = {
    "gateway_wait_s": ("queue_depth_avg", "requests_started_per_s", "requests_per_s"),
    "client_ttft_p95_s": ("ttft_p95_s", "ttft_p50_s", "gateway_wait_s", "queue_depth_avg", "requests_started_per_s",
                          "requests_per_s", "gateway_wait_p95_s"),
    "gateway_wait_p95_s": ("queue_depth_avg", "requests_started_per_s", "requests_per_s"),
    "client_ttft_slo_attainment": ("ttft_slo_attainment", "gateway_wait_s", "queue_depth_avg",
                                   "requests_started_per_s", "requests_per_s"),
}



def _scalar_inputs(f: Any) -> tuple[str, ...]:
    """The summed columns a rate or derived row reads: a counter itself, a histogram's ``_count`` and
    ``_sum`` (steps/s is the rate of a histogram's count), a gauge's step sum (averaged by ``n``)."""
    out: list[str] = []
    for key in f.inputs:
        if key in HISTOGRAMS:
            out += [f"{key}_count", f"{key}_sum"] if f.compute == "derived" else [f"{key}_count"]
        elif key in GAUGES and f.compute == "derived":
            out.append(f"{key}_sum")
        else:
            out.append(key)
    return tuple(out)


_HIST_SCALARS = tuple(dict.fromkeys(c for f in _MODEL_ROWS if f.compute in ("rate", "derived")
                                    for c in _scalar_inputs(f) if c.rsplit("_", 1)[0] in HISTOGRAMS))  # fmt: skip
_DERIVED_GAUGES = tuple(dict.fromkeys(c for f in _DERIVED for c in _scalar_inputs(f) if c.removesuffix("_sum") in GAUGES))
_SCALAR_SPEC = {
    "sum": [*COUNTERS, *_HIST_SCALARS, "covered_ms"],
    "avg": list(dict.fromkeys([f.column for f in _GAUGES if f.compute == "gauge_avg"] + list(_DERIVED_GAUGES)
                              + [f"{f.fallback}_sum" for f in _RATIOS if f.fallback])),
    "max": [f.column for f in _GAUGES if f.compute == "gauge_max"],
}
# reduced columns whose per-model values describe the server, not a share of it: the largest model's
_MAX_ACROSS_MODELS = frozenset(
    {_REDUCED[f.name] for f in _GAUGES if f.across == "max"} | set(_FALLBACKS.values())
)
_NEEDED_BY: dict[str, set[str]] = {col: set() for cols in _SCALAR_SPEC.values() for col in cols}
for _f in _MODEL_ROWS:
    _cols = (*_f.inputs, *_scalar_inputs(_f), *([_f.column] if _f in _GAUGES else []),
             *([f"{_f.fallback}_sum"] if _f.fallback else []))
    for _col in _cols:
        if _col in _NEEDED_BY:
            _NEEDED_BY[_col].add(_f.name)
# every figure the pipeline can compute (what a window asks for)
ALL_FIELDS = frozenset((*POINT_KEYS, "scrapes"))


def plan(lo: int, hi: int, level: int, marks: dict[int, int]) -> list[tuple[int, int, int]]:
    """Split [lo, hi) into ``(level, lo, hi)`` segments: rollups where complete, finer data elsewhere."""
    if lo >= hi:
        return []
    if level == RAW or level not in marks:
        return [(RAW, lo, hi)] if level == RAW else plan(lo, hi, 60 if level == 3600 else RAW, marks)
    finer = 60 if level == 3600 else RAW
    a = min(-(-lo // level) * level, hi)
    b = max(a, min(marks[level], hi) // level * level)
    return [*plan(lo, a, finer, marks), *([(level, a, b)] if a < b else []), *plan(b, hi, finer, marks)]


def level_for_step(step_s: int) -> int:
    """The coarsest stored level a series step allows: hourly rollups, minute rollups, raw rows."""
    return 3600 if step_s % 3600 == 0 else 60 if step_s % 60 == 0 else RAW


def window_level(window_s: float) -> int:
    """A window up to 6 h reads raw rows (exact edges); longer ones minute rollups, hourly from 2 days."""
    return RAW if window_s <= RAW_WINDOW_MAX_S else 3600 if window_s >= HOURLY_WINDOW_MIN_S else 60


def figures(
    conn: Connection,
    models: Mapping[int, Sequence[int]],
    span: tuple[int, int, int],
    level: int,
    want: frozenset[str] | None = None,
    covered_by: Mapping[int, Sequence[int]] | None = None,
    slo: Mapping[int, float] | None = None,
) -> dict[int, dict[str, np.ndarray]]:
    """Per target (``models``: target id → the model ids whose figures are summed), arrays (one value
    per step, NaN = no data) of the wanted SeriesPoint fields and scrape counts.

    ``span`` = (start, end, step) in unix seconds; ``want`` None = every field; ``covered_by``: all
    the target's models when ``models`` are only some of them (rates divide by the time the
    target's rounds cover, which every model's rows share); ``slo``: target id → the TTFT SLO the
    share figures judge by (None: the thresholds stored for each target, db/thresholds.py).
    """
    start, end, step = span
    want = ALL_FIELDS if want is None else want | frozenset(n for name in want for n in _GATEWAY_NEEDS.get(name, ()))
    groups = max(1, -(-(end - start) // step))
    cells = len(models) * groups
    segments = plan(start, end, level, sources.marks(conn))
    grid = (start, step, groups)
    out = {"scrapes": np.full(cells, np.nan), "up_scrapes": np.ones(cells), "up_ratio": np.full(cells, np.nan)}
    # Scrape health is only needed for up_ratio and queue depth: model rows exist only for
    # successful scrapes, so a down step is a gap without it.
    waits: tuple[tuple[float, ...], np.ndarray] | None = None  # the gateway's wait histogram per cell
    if want & (_UNBLANKED | _GATEWAY_NEEDS.keys()):
        position = {t: i for i, t in enumerate(models)}
        rows = [r for lv, lo, hi in segments for r in sources.fetch_targets(conn, lv, list(models), lo, hi)]
        out, waits = _target_figures(rows, cells, _cells(rows, position, grid), sources.layouts(conn))
    spec = {op: [c for c in cols if _NEEDED_BY[c] & want] for op, cols in _SCALAR_SPEC.items()}
    if any(spec.values()):
        out.update(_model_figures(conn, segments, models, grid, spec))
    if covered_by is not None and "covered_ms" in spec["sum"]:  # some models' rates: the target's covered time
        out.update(_model_figures(conn, segments, covered_by, grid, {"sum": ["covered_ms"]}))
    quantiles = [(h, q, name) for h, q, name in _QUANTILES if name in want]
    shares = [f for f in _SHARES if f.name in want]
    _rates(out, float(step))  # before the shares: the client-seen one judges by the SLO less the gateway wait
    thresholds: dict[str, np.ndarray] = {}
    if shares:  # the SLO of each (target, step) cell, kept for the window's record
        out["ttft_slo_s"] = _slo_cells(conn, models, slo, groups)
        thresholds = _share_thresholds(out, out["ttft_slo_s"])
    if quantiles or shares:
        out.update(_quantile_figures(conn, segments, models, grid, quantiles, shares, thresholds, waits))
    _ratios(out)
    _derived(out)
    if "client_ttft_slo_attainment" in out:  # no gateway queue read: the client's share is the engine's
        no_gateway = np.isnan(out.get("queue_depth_avg", np.full(cells, np.nan)))
        out["client_ttft_slo_attainment"] = np.where(no_gateway, out["ttft_slo_attainment"], out["client_ttft_slo_attainment"])
    return {t: {k: v[i * groups:(i + 1) * groups] for k, v in out.items()} for i, t in enumerate(models)}


def _share_thresholds(f: dict[str, np.ndarray], slo: np.ndarray) -> dict[str, np.ndarray]:
    """Each share figure's threshold per cell: the SLO for the engine's; the SLO less the gateway wait
    for the client-seen one (a request that waited w in the gateway meets the SLO when the engine
    gives its first token within SLO − w; NaN where the wait is unknown, 0 once the wait alone
    passes the SLO)."""
    out = {"ttft_slo_attainment": slo}
    if "queue_depth_avg" in f:
        wait = derived.gateway_wait_s(f)
        if wait is not None:
            out["client_ttft_slo_attainment"] = np.maximum(slo - np.where(np.isnan(f["queue_depth_avg"]), 0.0, wait), 0.0)
    return out


def _ratios(f: dict[str, np.ndarray]) -> None:
    """Add each ratio (hits ÷ queries) where both counters were read: NaN where nothing was queried;
    where a ratio has a fallback gauge (SGLang states its hit rate), the gauge's step average fills
    the steps the counters do not."""
    for fig in _RATIOS:
        num, den = fig.inputs
        ratio = None
        if num in f and den in f:
            with np.errstate(invalid="ignore", divide="ignore"):
                ratio = f[fig.name] = np.where(f[den] > 0, f[num] / np.where(f[den] > 0, f[den], 1.0), np.nan)
        gauge = f.get(_FALLBACKS.get(fig.name, ""))
        if gauge is not None:
            f[fig.name] = gauge if ratio is None else np.where(np.isnan(ratio), gauge, ratio)


def _derived(f: dict[str, np.ndarray]) -> None:
    """Add the figures computed from other figures (db/derived.py), where their inputs are."""
    for fig in _DERIVED:
        values = fig.fn(f) if fig.fn is not None else None
        if values is not None:
            f[fig.name] = values


def _rates(f: dict[str, np.ndarray], step_s: float) -> None:
    """Add each wanted rate: the step's increases (summed over models) ÷ the time they cover.

    Steps whose rows have no covered time (rows stored before migration 0004 but not filled in by
    it) fall back to the step's length, what every rate was divided by before.
    """
    covered = f.get("covered_ms")
    if covered is None:
        return
    with np.errstate(invalid="ignore"):
        seconds = np.where(covered > 0, covered / 1000.0, step_s)
    for fig in _RATES:
        counted = _scalar_inputs(fig)[0]  # a counter, or a histogram's count (steps/s)
        if counted in f:
            f[fig.name] = f[counted] / seconds


def step_of(rows: list[Any], start: int, step: int) -> np.ndarray:
    """Each row's step index (its first column is its unix time)."""
    ts = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    return (ts - start) // step


def _cells(rows: list[Any], owner: Mapping[int, int], grid: tuple[int, int, int]) -> np.ndarray:
    """Each row's (target, step) cell: its target's position × steps + its step (``owner``: the
    row's id, a target's or a model's, → its target's position)."""
    start, step, groups = grid
    if max(owner.values(), default=0) == 0:  # one target
        return step_of(rows, start, step)
    of = np.fromiter((owner[r[1]] for r in rows), dtype=np.int64, count=len(rows))
    cells: np.ndarray = of * groups + step_of(rows, start, step)
    return cells


_WAIT = GATEWAY_WAIT


def _target_figures(
    rows: list[Any], cells: int, key: np.ndarray, layouts: dict[int, tuple[float, ...]]
) -> tuple[dict[str, np.ndarray], tuple[tuple[float, ...], np.ndarray] | None]:
    """Scrape counts, queue depth and the gateway's own wait histogram per (target, step) cell, and
    that histogram's per-bucket waits per cell (None: none read)."""
    red = aggregate.reduce_rows(
        rows, sources.TARGET_COLS, key, cells,
        {"sum": ["up_scrapes", "queue_samples", "queue_depth_sum", f"{_WAIT}_count", f"{_WAIT}_sum"],
         "max": ["queue_depth_max"], "hist": [_WAIT]}, layouts,
    )  # fmt: skip
    measured_p95 = np.full(cells, np.nan)
    for keys, bounds, counts in red.hists[_WAIT]:
        measured_p95[keys] = quantile_matrix(0.95, bounds, counts)[0]
    layout_at = sources.TARGET_COLS.index(f"{_WAIT}_layout")
    read = np.fromiter((r[layout_at] is not None for r in rows), dtype=np.float64, count=len(rows))
    samples = np.nan_to_num(red.sums["queue_samples"])
    with np.errstate(invalid="ignore", divide="ignore"):
        up_ratio = np.where(red.n > 0, np.nan_to_num(red.sums["up_scrapes"]) / np.where(red.n > 0, red.n, 1), np.nan)
        queue_avg = np.where(samples > 0, red.sums["queue_depth_sum"] / np.where(samples > 0, samples, 1), np.nan)
    return {
        "scrapes": red.n,
        "up_scrapes": np.nan_to_num(red.sums["up_scrapes"]),
        "up_ratio": up_ratio,
        "queue_depth_max": red.maxes["queue_depth_max"],
        "queue_depth_avg": queue_avg,
        # the gateway's own wait histogram: its rounds read, its waits counted (NaN: none read), their
        # sum, and its P95 (NaN: no wait counted)
        "gateway_wait_reads": np.bincount(key, weights=read, minlength=cells) if rows else np.zeros(cells),
        "gateway_waits": red.sums[f"{_WAIT}_count"],
        "gateway_wait_hist_sum": red.sums[f"{_WAIT}_sum"],
        "gateway_wait_hist_p95_s": measured_p95,
    }, aggregate.dense_hist(red.hists[_WAIT], cells)


def _across_models(values: np.ndarray, cells: int, nmodels: int, how: str) -> np.ndarray:
    """Combine per-(cell, model) values: "sum" (counters, avg, and max as an upper bound) or "max"."""
    grid = values.reshape(cells, nmodels)
    empty = np.isnan(grid).all(axis=1)
    if how == "sum":
        combined = np.where(np.isnan(grid), 0.0, grid).sum(axis=1)
    else:
        combined = np.where(np.isnan(grid), -np.inf, grid).max(axis=1)
    return np.where(empty, np.nan, combined)


def _model_figures(
    conn: Connection, segments: list[tuple[int, int, int]], models: Mapping[int, Sequence[int]],
    grid: tuple[int, int, int], spec: dict[str, list[str]],
) -> dict[str, np.ndarray]:  # fmt: skip
    """Counter sums and gauge figures per (target, step) cell, combined across each target's models
    as their rows say (a share of the server: summed; the server's own value: the largest)."""
    ids = [m for ms in models.values() for m in ms]
    scalars = [c for v in spec.values() for c in v]
    rows = [r for lv, lo, hi in segments for r in sources.fetch_models(conn, lv, ids, lo, hi, (), scalars)]
    owner = {m: i for i, ms in enumerate(models.values()) for m in ms}
    local = {m: j for ms in models.values() for j, m in enumerate(ms)}  # a model's place in its target
    cells = len(models) * grid[2]
    nm = max(max(local.values(), default=0) + 1, 1)
    mpos = np.fromiter((local[r[1]] for r in rows), dtype=np.int64, count=len(rows)) if nm > 1 else 0
    key = _cells(rows, owner, grid) * nm + mpos
    red = aggregate.reduce_rows(rows, sources.model_cols((), scalars), key, cells * nm, spec, {})
    out: dict[str, np.ndarray] = {}
    for src in (red.sums, red.avgs, red.maxes):
        for name, values in src.items():
            out[name] = _across_models(values, cells, nm, "max" if name in _MAX_ACROSS_MODELS else "sum")
    return out


def _quantile_figures(
    conn: Connection, segments: list[tuple[int, int, int]], models: Mapping[int, Sequence[int]],
    grid: tuple[int, int, int], quantiles: list[tuple[str, float, str]],
    shares: Sequence[Any] = (), thresholds: Mapping[str, np.ndarray] | None = None,
    waits: tuple[tuple[float, ...], np.ndarray] | None = None,
) -> dict[str, np.ndarray]:  # fmt: skip
    """Wanted quantiles per (target, step) cell, every model's buckets merged: per step by the
    database for one target, per model and step for several (then merged by target here); and the
    wanted shares within each cell's threshold from the same buckets (:func:`_share_arrays`)."""
    start, step, groups = grid
    ids = [m for ms in models.values() for m in ms]
    by_model = len(models) > 1
    owner = {m: i for i, ms in enumerate(models.values()) for m in ms}
    layouts = sources.layouts(conn)
    cells = len(models) * groups
    out: dict[str, np.ndarray] = {}
    for hist in sorted({h for h, _, _ in quantiles} | {f.inputs[0] for f in shares}):
        rows = [r for lv, lo, hi in segments
                for r in sources.fetch_hist_grouped(conn, lv, ids, (lo, hi, start, step), hist, by_model)]  # fmt: skip
        key = np.fromiter((r[-3] for r in rows), dtype=np.int64, count=len(rows))
        if by_model:
            key += np.fromiter((owner[r[0]] for r in rows), dtype=np.int64, count=len(rows)) * groups
        parts = aggregate.hist_parts(rows, key, cells, 1 + by_model, 2 + by_model, layouts)
        for h, q, name in quantiles:
            if h == hist:
                values, inf = np.full(cells, np.nan), np.zeros(cells, dtype=bool)
                lower, upper = np.full(cells, np.nan), np.full(cells, np.nan)
                for keys, bounds, counts in parts:
                    values[keys], inf[keys] = quantile_matrix(q, bounds, counts)
                    lower[keys], upper[keys] = holding_buckets(values[keys], inf[keys], bounds)
                out[name], out[name + "_inf"] = values, inf
                out[name + "_lower"], out[name + "_upper"] = lower, upper
        for fig in shares:
            if fig.inputs[0] == hist and thresholds and fig.name in thresholds:
                out.update(_share_arrays(fig.name, cells, parts, thresholds[fig.name]))
                if fig.name == "client_ttft_slo_attainment" and waits is not None and "ttft_slo_attainment" in thresholds:
                    _measured_share(out, fig.name, parts, waits, thresholds["ttft_slo_attainment"])
    return out


_POINTS_PER_BUCKET = 4  # a wait bucket's observations, taken as spread evenly over it


def _measured_share(out: dict[str, np.ndarray], name: str, parts: list[Any],
                    waits: tuple[tuple[float, ...], np.ndarray], slo: np.ndarray) -> None:  # fmt: skip
    """The client-seen share where the gateway's own wait histogram counted waits: P(wait + TTFT ≤ SLO)
    = Σ over the waits of P(engine TTFT ≤ SLO − wait), the waits of each bucket (lower, upper] spread
    evenly over it (those above the largest finite bound at it: a floor on their wait) and the
    engine's share from its buckets (attainment_matrix). Other cells keep the SLO less the mean wait."""
    bounds, counts = waits
    total = counts.sum(axis=1).astype(np.float64)
    measured = total > 0
    if not measured.any():
        return
    share = np.zeros(len(total))
    finite = [0.0, *bounds[:-1]]
    for j, upper in enumerate(bounds):
        weight = counts[:, j].astype(np.float64)
        if not weight.any():
            continue
        lower = finite[j]
        points = [lower] if upper == math.inf else [lower + (upper - lower) * (k + 0.5) / _POINTS_PER_BUCKET
                                                    for k in range(_POINTS_PER_BUCKET)]  # fmt: skip
        for w in points:
            engine = np.full(len(total), np.nan)
            for keys, eb, ec in parts:
                engine[keys] = attainment_matrix(slo[keys] - w, eb, ec).share
            share += np.nan_to_num(engine) * weight / len(points)
    with np.errstate(invalid="ignore", divide="ignore"):
        convolved = share / np.where(measured, total, 1.0)
    known = measured & ~np.isnan(out[name])  # the engine answered (requests entered it in the cell)
    out[name] = np.where(known, convolved, out[name])
    for suffix in _SHARE_PARTS[1:]:  # a convolution has no single pair of bounds either side
        out[name + suffix] = np.where(known, np.nan, out[name + suffix])


_SHARE_PARTS = ("", "_lower_le", "_lower_share", "_upper_le", "_upper_share")  # db.quantiles.Attainment's order
# A share's bounds either side of its threshold, per step (NaN where the threshold is a bound: exact):
# what proves a step within or outside the SLO without reading inside a bucket (core/histogram_slo.py).
SHARE_PART_KEYS = tuple(f.name + suffix for f in _SHARES for suffix in _SHARE_PARTS[1:])


def _share_arrays(name: str, cells: int, parts: list[Any], thresholds: np.ndarray) -> dict[str, np.ndarray]:
    """A share figure per cell, with the bounds either side of its threshold where it falls between two."""
    out = {name + suffix: np.full(cells, np.nan) for suffix in _SHARE_PARTS}
    for keys, bounds, counts in parts:
        for suffix, values in zip(_SHARE_PARTS, attainment_matrix(thresholds[keys], bounds, counts), strict=True):
            out[name + suffix][keys] = values
    return out


def _slo_cells(conn: Connection, models: Mapping[int, Sequence[int]], slo: Mapping[int, float] | None,
               groups: int) -> np.ndarray:  # fmt: skip
    """The TTFT SLO of every (target, step) cell: given, else stored; NaN for a target with none."""
    known = stored_ttft_slo(conn, models) if slo is None else slo
    return np.repeat(np.asarray([known.get(t, np.nan) for t in models], dtype=np.float64), groups)


def _nullable(values: np.ndarray) -> list[float | None]:
    return [None if v != v else v for v in values.tolist()]  # NaN != NaN


def columns(f: dict[str, np.ndarray], parts: Sequence[str] = ()) -> dict[str, list[float | None]]:
    """Every SeriesPoint figure as a list per step, and the share parts named in ``parts`` (of
    :data:`SHARE_PART_KEYS`); figures of steps with no successful scrape are None."""
    groups = len(f["scrapes"])
    down = f["up_scrapes"] <= 0
    out: dict[str, list[float | None]] = {}
    for key in (*POINT_KEYS, *parts):
        src = _REDUCED.get(key, key)
        if src not in f:
            out[key] = [None] * groups
            continue
        values = f[src]
        out[key] = _nullable(values if key in _UNBLANKED else np.where(down, np.nan, values))
    return out


def empty_figures() -> dict[str, np.ndarray]:
    return {"scrapes": np.zeros(1), "up_scrapes": np.zeros(1), "up_ratio": np.full(1, np.nan)}



_WINDOW_FIELDS = record_fields(WindowFigures)


def window_from(
    target: str, model: str | None, end: float, window_s: float, lo: int,
    f: dict[str, np.ndarray], last: Any, ceiling: CeilingInfo | None, gpus: tuple[GpuFigures, ...],
    engine: str | None = None, sleep: str | None = None, stale_after_s: float | None = None, wait_metric: str = "",
    configured_peak_gbps: float | None = None,
) -> WindowFigures:  # fmt: skip
    """The WindowFigures of one window's arrays (one step), its last scrape (ts, up, error), ceiling,
    engine and sleep state (also used by db/fleet.py, which reads every target's arrays at once).
    ``stale_after_s``: past it, the last scrape is too old at ``end`` and the target reads down (stale)."""
    # a window gives the preemptions' count, not their rate, and scrapes rather than a share of them
    point: dict[str, Any] = {k: v[0] for k, v in columns(f).items() if k in _WINDOW_FIELDS}
    rejections = point["admission_rejections_per_s"]
    tok = point["tokens_per_s"]
    bound = ceiling.steps_per_s if ceiling else None
    peak = mbu_figures.peak_gbps(ceiling, gpus, configured_peak_gbps)  # the one rule, configured first
    share = mbu_figures.gpu_share_pct(gpus)
    mbu = mbu_figures.mbu_of(point, ceiling, peak, share, mbu_figures.dram_source(gpus))
    stale = stale_age(None if last is None else float(last.ts), end, stale_after_s)
    return WindowFigures(
        target=target,
        model=model,
        window_s=float(window_s),
        start=float(end - window_s),
        end=float(end),
        **point,
        ttft_p95_in_inf_bucket=bool(f.get("ttft_p95_s_inf", [False])[0]) and point["ttft_p95_s"] is not None,
        ceiling_steps_per_s=bound,
        ceiling_share=None if tok is None or not bound else tok / bound,
        ceiling=ceiling,
        # nothing missing beside a ceiling (`status --json` said "unknown: set …" with one); without one,
        # the reader fills in what the target lacks
        ceiling_missing="" if ceiling is not None else NO_CEILING,
        gpus=gpus,
        last_scrape_at=None if last is None else float(last.ts),
        up=False if stale is not None else _window_up(last, lo, f),
        stale_s=stale,
        last_error=None if last is None else last.error,
        scrapes=int(f["scrapes"][0]),
        failed_scrapes=int(f["scrapes"][0] - f["up_scrapes"][0]),
        engine=engine,
        sleep_state=sleep,
        admission_rejections_per_min=None if rejections is None else rejections * 60.0,
        requests_finished_per_s_by_reason={r: point[f"{k}_per_s"] for r, k in FINISHED_BY_REASON.items()
                                           if point[f"{k}_per_s"] is not None},
        quantile_buckets=_holding(f),
        **mbu,
        ttft_slo_bounds=_slo_bounds(f),
        client_ttft_slo_bounds=_slo_bounds(f, "client_ttft_slo_attainment"),
        ttft_slo_s=_first(f.get("ttft_slo_s")),
        gateway_wait_source=wait_source(point.get("queue_depth_avg"), point.get("gateway_wait_s"),
                                        _first(f.get("gateway_waits")), _first(f.get("gateway_wait_reads")),
                                        wait_metric),
    )


_WAIT_NAMED = re.compile(r"(?:^|\s)wait=(\S+)")


def wait_metric_of(gateway_source: str | None) -> str:
    """The wait histogram a target's stored gateway source names (db/writer.py gateway_source), or ""."""
    found = _WAIT_NAMED.findall(gateway_source or "")
    return found[-1] if found else ""


def wait_source(queue: float | None, wait: float | None, waits: float | None = None, reads: float | None = None,
                metric: str = "") -> str | None:  # fmt: skip
    """Where a window's gateway wait comes from, or why it is unknown; None without a gateway queue.

    Measured where the gateway's own wait histogram counted waits in the window (``waits``); else
    Little's law, saying why the histogram did not serve: read but no new wait counted (``reads``),
    named in the settings but not read (absent from the page, unreadable: the collector's log says
    which), or none configured."""
    if queue is None and not waits:
        return None
    name = metric or "the gateway's wait histogram"
    if waits:
        return f"{MEASURED} {metric}, {waits:.0f} waits in the window" if metric else f"{MEASURED}, {waits:.0f} waits in the window"
    if wait is None:
        return WAIT_UNKNOWN
    if reads:
        return f"{LITTLE} ({name} counted no new wait in the window)"
    if metric:
        return f"{LITTLE} ({metric} not read in the window: absent from the gateway's page, or unreadable)"
    return LITTLE


def _first(values: np.ndarray | None) -> float | None:
    return None if values is None or values[0] != values[0] else float(values[0])  # NaN: none


def _slo_bounds(f: dict[str, np.ndarray], name: str = "ttft_slo_attainment") -> tuple[float, float, float, float] | None:
    """(lower_le, lower_share, upper_le, upper_share) of a one-step window whose threshold falls between
    two bucket bounds for the share figure ``name``; None where it is a bound (exact) or there is no value."""
    sides = [_first(f.get(name + suffix)) for suffix in _SHARE_PARTS[1:]]
    return None if None in sides else (sides[0], sides[1], sides[2], sides[3])  # type: ignore[return-value]


def _holding(f: dict[str, np.ndarray]) -> dict[str, tuple[float, float]]:
    """Each quantile's bucket (lower, upper] of a one-step window, where the arrays have it."""
    out = {}
    for _, _, name in _QUANTILES:
        lower, upper = f.get(name + "_lower"), f.get(name + "_upper")
        if lower is not None and upper is not None and lower[0] == lower[0]:  # NaN: no value
            out[name] = (float(lower[0]), float(upper[0]))
    return out


def _window_up(last: Any, lo: int, f: dict[str, np.ndarray]) -> bool | None:
    """The latest scrape's health; without a raw scrape in the window (its rows are past their
    retention), whether the rollups counted a successful round in it; None when neither knows."""
    if last is not None and last.ts >= lo:
        return bool(last.up)
    scrapes = f["scrapes"][0]
    return None if math.isnan(scrapes) or scrapes == 0 else bool(f["up_scrapes"][0] > 0)


def sleep_state_at(conn: Connection, model_ids: list[int], lo: int, hi: int) -> str | None:
    """The engine's sleep state at the window's last raw row (None: not exposed, or no row)."""
    row = sources.latest_sample(conn, model_ids, lo, hi, ("sleep_weights_offloaded", "sleep_discard_all"))
    return None if row is None else sleep_state(*row)
