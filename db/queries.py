"""The query facade: the only thing the CLI, UI pages and alerts call. Read-only connections.

Source choice: a series picks the coarsest stored level its step allows (hourly rollups when
``step_s`` is a multiple of 3600, minute rollups for multiples of 60, raw rows otherwise), and reads
finer data for the part the rollups do not cover yet (the recent minutes, or a head not aligned to
the level). A window up to 6 h reads raw rows (exact edges); longer windows use minute rollups, and
hourly ones from 2 days. Steps are aligned to multiples of ``step_s`` in unix time.

Every figure is None when there is no data for it (no successful scrape, metric not exposed, no
request for a quantile): charts draw a gap, ``status`` prints null. Rates divide the increases by
the time they cover, the sum of the target's rows' ``covered_ms`` (each successful round's time
since the target's previous one, split among its models), not by the step or window length: a
step right after the collector was stopped for two minutes holds two minutes of tokens, and shows
their rate, not 25 times it; a window the collector saw only part of shows the rate over that part
(docs/storage.md).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import Connection, Engine, bindparam, func, select
from sqlalchemy.exc import SQLAlchemyError

from collectors.catalogue import FINISHED_BY_REASON, name_versions, sleep_state
from db import aggregate, schema, sources
from db.ceiling import target_ceiling
from db.engine import open_reader, storage_error
from db.figures import FIGURES, record_fields
from db.quantiles import quantile_matrix
from db.results import CeilingInfo, GpuFigures, GpuPoint, SeriesPoint, SweepRun, TargetInfo, WindowFigures
from db.sources import RAW

if TYPE_CHECKING:
    from db.notifications import NotificationEntry

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
_ENGINE_ORDER = ("quantile", "rate", "count", "gauge_avg", "gauge_max", "ratio", "derived")
# every figure the engine computes: SeriesPoint's fields (the target rows' figures last)
_POINT_KEYS = (
    *(f.name for kind in _ENGINE_ORDER for f in _MODEL_ROWS if f.compute == kind),
    *(f.name for f in FIGURES if f.rows == "target" and f.compute != "record"),
)
_UNBLANKED = frozenset(f.name for f in FIGURES if f.rows == "target")  # shown even in a step with no scrape
# a gauge averaged over the step is reduced as its column's ``_avg``; a ratio's fallback gauge too
_REDUCED = {f.name: f.column.removesuffix("_sum") + "_avg" if f.compute == "gauge_avg" else f.column for f in _GAUGES}
_FALLBACKS = {f.name: f"{f.fallback}_avg" for f in _RATIOS if f.fallback}
_SCALAR_SPEC = {
    "sum": [*schema.COUNTERS, "covered_ms"],
    "avg": [f.column for f in _GAUGES if f.compute == "gauge_avg"] + [f"{f.fallback}_sum" for f in _RATIOS if f.fallback],
    "max": [f.column for f in _GAUGES if f.compute == "gauge_max"],
}
# reduced columns whose per-model values describe the server, not a share of it: the largest model's
_MAX_ACROSS_MODELS = frozenset(
    {_REDUCED[f.name] for f in _GAUGES if f.across == "max"} | set(_FALLBACKS.values())
)
_NEEDED_BY: dict[str, set[str]] = {col: set() for cols in _SCALAR_SPEC.values() for col in cols}
for _f in _MODEL_ROWS:
    for _col in (*_f.inputs, *([_f.column] if _f in _GAUGES else []), *([f"{_f.fallback}_sum"] if _f.fallback else [])):
        if _col in _NEEDED_BY:
            _NEEDED_BY[_col].add(_f.name)
# every figure _figures can compute (what Reader.window asks for)
ALL_FIELDS = frozenset((*_POINT_KEYS, "scrapes"))


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


def _level_for_step(step_s: int) -> int:
    return 3600 if step_s % 3600 == 0 else 60 if step_s % 60 == 0 else RAW


def _make(cls: type, values: dict[str, Any]) -> Any:
    """Build a frozen result dataclass without its per-field ``object.__setattr__`` calls.

    A frozen dataclass' __init__ costs ~20 µs for 16 fields: 30 ms for a day of minutes. The values
    come from our own code with every field present, so skipping __init__ loses no check.
    """
    obj: Any = object.__new__(cls)
    obj.__dict__.update(values)
    return obj


def _none(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


class Reader:
    """Read-only access to one database (``db_url`` as users write it)."""

    def __init__(self, db_url: str | None = None, engine: Engine | None = None) -> None:
        if engine is None and db_url is None:
            raise ValueError("Reader needs db_url or engine")
        self.engine = engine if engine is not None else open_reader(str(db_url))

    def _run(self, action: str, fn: Any, *args: Any) -> Any:
        try:
            with self.engine.connect() as conn:
                return fn(conn, *args)
        except SQLAlchemyError as exc:
            raise storage_error(action, exc, self.engine.url) from None

    # -- catalogue --------------------------------------------------------------------------------
    def targets(self) -> list[TargetInfo]:
        """Every stored target with its latest health, metric names, models, GPUs and ceiling."""
        return self._run("listing targets", _targets)

    def models(self, target: str) -> list[str]:
        """Model names seen for ``target`` (empty when unknown)."""
        return self._run("listing models", _models, target)

    # -- figures ----------------------------------------------------------------------------------
    def window(
        self,
        target: str,
        end: float,
        window_s: float,
        model: str | None = None,
        *,
        level: int | None = None,
        gpus: bool = True,
    ) -> WindowFigures:
        """Every ``status`` figure over [end − window_s, end) for ``model`` (None = all models summed).

        ``level`` forces 0 (raw), 60 or 3600 as :meth:`series` does: a past range's figures from the
        rollups its charts read (its raw rows may be gone); ``up`` then comes from the rollups' rounds.
        ``gpus=False`` leaves ``gpus`` empty and skips their reads (the alert evaluator has no GPU rule).
        """
        return self._run("reading a window", _window, target, end, window_s, model, level, gpus)

    def series(
        self,
        target: str,
        start: float,
        end: float,
        step_s: float,
        model: str | None = None,
        *,
        fields: Sequence[str] | None = None,
        level: int | None = None,
    ) -> list[SeriesPoint]:
        """One point per step in [start, end) (steps aligned to multiples of ``step_s``).

        ``fields`` limits the work to these SeriesPoint figures (the others are None): a chart of
        one figure reads only its columns. ``level`` forces 0 (raw), 60 or 3600 (tests, benchmarks).
        """
        return self._run("reading a series", _series, target, (start, end, step_s), model, level, fields)

    def series_columns(
        self,
        target: str,
        start: float,
        end: float,
        step_s: float,
        model: str | None = None,
        *,
        fields: Sequence[str] | None = None,
        level: int | None = None,
    ) -> dict[str, list[Any]]:
        """:meth:`series` as columns (``ts`` plus every SeriesPoint field → list), for charts and
        data frames; no per-point objects, so a day of minutes costs a few milliseconds.
        """
        return self._run("reading a series", _series_columns, target, (start, end, step_s), model, level, fields)

    def gpu_series(self, target: str, start: float, end: float, step_s: float) -> list[GpuPoint]:
        """One point per (step, GPU) with data in [start, end), ordered by time then UUID."""
        return self._run("reading GPU series", _gpu_series, target, start, end, step_s)

    def latest_gpus(self, target: str, window_s: float = 60.0) -> tuple[GpuFigures, ...]:
        """GPU figures over the last ``window_s`` before the target's latest GPU reading."""
        return self._run("reading GPUs", _latest_gpus, target, window_s)

    def fleet(self, end: float, window_s: float, series: tuple[float, float, float], fields: Sequence[str]) -> dict[str, Any]:
        """Every target's window and its ``fields`` per step over ``series`` = (start, end, step), read
        together (db/fleet.py): target name → FleetFigures."""
        from db.fleet import fleet_figures

        return fleet_figures(self.engine, end, window_s, series, fields)

    def sweep_runs(self, limit: int = 20) -> list[SweepRun]:
        """Stored load sweeps, newest first."""
        from db.sweeps import load_sweeps

        return self._run("reading sweeps", load_sweeps, limit)

    def notifications(self, since: float, limit: int = 200) -> list[NotificationEntry]:
        """The e-mail notification log since ``since``, newest first (db/notifications.py)."""
        from db.notifications import notification_log

        return self._run("reading the notification log", notification_log, since, limit)


# -- catalogue helpers -----------------------------------------------------------------------------
# Fixed statements built once (building and keying a SELECT per call costs ~0.1 ms each).
_T, _M = schema.targets, schema.models
_TARGET_BY_NAME = select(_T).where(_T.c.name == bindparam("name"))
_MODELS_OF = select(_M.c.id, _M.c.name).where(_M.c.target_id == bindparam("tid")).order_by(_M.c.id)
_MODEL_BY_NAME = _MODELS_OF.where(_M.c.name == bindparam("mname"))


def _target_row(conn: Connection, name: str) -> Any:
    return conn.execute(_TARGET_BY_NAME, {"name": name}).first()


def _model_ids(conn: Connection, target_id: int, model: str | None) -> list[tuple[int, str]]:
    if model is None:
        rows = conn.execute(_MODELS_OF, {"tid": target_id})
    else:
        rows = conn.execute(_MODEL_BY_NAME, {"tid": target_id, "mname": model})
    return [(int(i), str(n)) for i, n in rows]


def _everyone(conn: Connection, target_id: int, model: str | None) -> list[int] | None:
    """Every model of the target when the figures are for one ``model`` (None: they are for all)."""
    return None if model is None else [i for i, _ in _model_ids(conn, target_id, None)]


def _gpu_rows(conn: Connection, target_id: int) -> list[Any]:
    g = schema.gpus
    return list(conn.execute(select(g).where(g.c.target_id == target_id).order_by(g.c.gpu_index, g.c.uuid)))


def _last_scrape(conn: Connection, target_id: int, end: float | None = None) -> Any:
    s = schema.scrapes
    stmt = select(s.c.ts, s.c.up, s.c.error).where(s.c.target_id == target_id)
    if end is not None:
        stmt = stmt.where(s.c.ts <= end)
    return conn.execute(stmt.order_by(s.c.ts.desc()).limit(1)).first()


def _models(conn: Connection, target: str) -> list[str]:
    row = _target_row(conn, target)
    return [] if row is None else [n for _, n in _model_ids(conn, row.id, None)]


def _targets(conn: Connection) -> list[TargetInfo]:
    out = []
    for row in conn.execute(select(schema.targets).order_by(schema.targets.c.name)):
        last = _last_scrape(conn, row.id)
        out.append(
            TargetInfo(
                name=row.name,
                vllm_url=row.vllm_url,
                up=None if last is None else bool(last.up),
                last_scrape_at=None if last is None else float(last.ts),
                last_error=None if last is None else last.error,
                metric_names_used=json.loads(row.metric_names_used or "{}"),
                missing_metrics=tuple(json.loads(row.missing_metrics or "[]")),
                models=tuple(n for _, n in _model_ids(conn, row.id, None)),
                gpus=tuple(g.uuid for g in _gpu_rows(conn, row.id)),
                gpu_source=row.gpu_source,
                gateway_source=row.gateway_source,
                ceiling=target_ceiling(conn, row.id),
                engine=row.engine,
                metric_versions={k: name_versions(v) for k, v in json.loads(row.metric_names_used or "{}").items()},
                cache_config=json.loads(row.cache_config or "{}"),
                lora=json.loads(row.lora or "{}"),
                discovered_by=row.discovered_by,
            )
        )
    return out


# -- the figures engine ----------------------------------------------------------------------------
def _figures(
    conn: Connection,
    target_id: int,
    model_ids: Sequence[int],
    span: tuple[int, int, int],
    level: int,
    want: frozenset[str] | None = None,
    everyone: Sequence[int] | None = None,
) -> dict[str, np.ndarray]:
    """Arrays (one value per step, NaN = no data) of the wanted SeriesPoint fields and scrape counts.

    ``span`` = (start, end, step) in unix seconds; ``want`` None = every field; ``everyone``: all
    the target's models when ``model_ids`` are only some of them (rates divide by the time the
    target's rounds cover, which every model's rows share).
    """
    start, end, step = span
    want = ALL_FIELDS if want is None else want
    groups = max(1, -(-(end - start) // step))
    segments = plan(start, end, level, sources.marks(conn))
    out = {"scrapes": np.full(groups, np.nan), "up_scrapes": np.ones(groups), "up_ratio": np.full(groups, np.nan)}
    # Scrape health is only needed for up_ratio and queue depth: model rows exist only for
    # successful scrapes, so a down step is a gap without it.
    if want & _UNBLANKED:
        trows = [r for lv, lo, hi in segments for r in sources.fetch_targets(conn, lv, [target_id], lo, hi)]
        out = _target_figures(trows, start, step, groups)
    spec = {op: [c for c in cols if _NEEDED_BY[c] & want] for op, cols in _SCALAR_SPEC.items()}
    hists = [h for h in sources.QUERY_HISTS if any(n in want for hh, _, n in _QUANTILES if hh == h)]
    scalars = [c for cols in spec.values() for c in cols]
    if scalars:
        mrows = [r for lv, lo, hi in segments for r in sources.fetch_models(conn, lv, model_ids, lo, hi, (), scalars)]
        out.update(_model_figures(mrows, list(model_ids), (start, step, groups), spec))
    if everyone is not None and "covered_ms" in scalars:  # one model's rates: the target's covered time
        crows = [r for lv, lo, hi in segments for r in sources.fetch_models(conn, lv, everyone, lo, hi, (), ["covered_ms"])]
        out.update(_model_figures(crows, list(everyone), (start, step, groups), {"sum": ["covered_ms"]}))
    if hists:
        out.update(_quantile_figures(conn, segments, model_ids, (start, step, groups), hists, want))
    _rates(out, float(step))
    _ratios(out)
    _derived(out)
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
        if fig.inputs[0] in f:
            f[fig.name] = f[fig.inputs[0]] / seconds


def _group(rows: list[Any], start: int, step: int) -> np.ndarray:
    ts = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    return (ts - start) // step


def _target_figures(rows: list[Any], start: int, step: int, groups: int, g: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Scrape counts and queue depth per step; ``g``: each row's group when not its step (db/fleet.py)."""
    g = _group(rows, start, step) if g is None else g
    red = aggregate.reduce_rows(
        rows, sources.TARGET_COLS, g, groups, {"sum": ["up_scrapes"], "max": ["queue_depth_max"]}, {}
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        up_ratio = np.where(red.n > 0, np.nan_to_num(red.sums["up_scrapes"]) / np.where(red.n > 0, red.n, 1), np.nan)
    return {
        "scrapes": red.n,
        "up_scrapes": np.nan_to_num(red.sums["up_scrapes"]),
        "up_ratio": up_ratio,
        "queue_depth_max": red.maxes["queue_depth_max"],
    }


def _across_models(values: np.ndarray, groups: int, nmodels: int, how: str) -> np.ndarray:
    """Combine per-(step, model) values: "sum" (counters, avg, and max as an upper bound) or "max"."""
    grid = values.reshape(groups, nmodels)
    empty = np.isnan(grid).all(axis=1)
    if how == "sum":
        combined = np.where(np.isnan(grid), 0.0, grid).sum(axis=1)
    else:
        combined = np.where(np.isnan(grid), -np.inf, grid).max(axis=1)
    return np.where(empty, np.nan, combined)


def _model_figures(
    rows: list[Any], model_ids: list[int], grid: tuple[int, int, int], spec: dict[str, list[str]],
    g: np.ndarray | None = None, positions: dict[int, int] | None = None,
) -> dict[str, np.ndarray]:  # fmt: skip
    """Counter sums and gauge figures per step (summed across models; KV usage: max); ``g`` as above,
    ``positions``: each model's place among its group's models (default: its place in ``model_ids``)."""
    start, step, groups = grid
    cols = sources.model_cols((), [c for v in spec.values() for c in v])
    g = _group(rows, start, step) if g is None else g
    pos = {m: i for i, m in enumerate(model_ids)} if positions is None else positions
    nm = max(max(pos.values(), default=0) + 1, 1)
    mpos = np.fromiter((pos[r[1]] for r in rows), dtype=np.int64, count=len(rows)) if nm > 1 else 0
    red = aggregate.reduce_rows(rows, cols, g * nm + mpos, groups * nm, spec, {})
    out: dict[str, np.ndarray] = {}
    for src in (red.sums, red.avgs, red.maxes):
        for name, values in src.items():
            how = "max" if name in _MAX_ACROSS_MODELS else "sum"
            out[name] = _across_models(values, groups, nm, how)
    return out


def _quantile_figures(
    conn: Connection,
    segments: list[tuple[int, int, int]],
    model_ids: Sequence[int],
    grid: tuple[int, int, int],
    hists: list[str],
    want: frozenset[str],
) -> dict[str, np.ndarray]:
    """Wanted quantiles per step (every model's buckets merged), from per-step grouped blobs."""
    start, step, groups = grid
    layouts = sources.layouts(conn)
    out: dict[str, np.ndarray] = {}
    for hist in hists:
        rows = [
            r
            for lv, lo, hi in segments
            for r in sources.fetch_hist_grouped(conn, lv, model_ids, (lo, hi, start, step), hist)
        ]
        key = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        parts = aggregate.hist_parts(rows, key, groups, 1, 2, layouts)
        for h, q, name in _QUANTILES:
            if h != hist or name not in want:
                continue
            values, inf = np.full(groups, np.nan), np.zeros(groups, dtype=bool)
            for keys, bounds, counts in parts:
                values[keys], inf[keys] = quantile_matrix(q, bounds, counts)
            out[name], out[name + "_inf"] = values, inf
    return out


def _nullable(values: np.ndarray) -> list[float | None]:
    return [None if v != v else v for v in values.tolist()]  # NaN != NaN


def _columns(f: dict[str, np.ndarray]) -> dict[str, list[float | None]]:
    """Every SeriesPoint figure as a list per step; figures of steps with no successful scrape are None."""
    groups = len(f["scrapes"])
    down = f["up_scrapes"] <= 0
    out: dict[str, list[float | None]] = {}
    for key in _POINT_KEYS:
        src = _REDUCED.get(key, key)
        if src not in f:
            out[key] = [None] * groups
            continue
        values = f[src]
        out[key] = _nullable(values if key in _UNBLANKED else np.where(down, np.nan, values))
    return out


def _series_columns(
    conn: Connection,
    target: str,
    span: tuple[float, float, float],
    model: str | None,
    level: int | None,
    fields: Sequence[str] | None,
) -> dict[str, list[Any]]:
    start, end, step_s = span
    step = max(1, int(step_s))
    lo, hi = int(start) // step * step, int(math.ceil(end))
    row = _target_row(conn, target)
    if row is None or hi <= lo:
        return {"ts": [], **{k: [] for k in _POINT_KEYS}}
    ids = [i for i, _ in _model_ids(conn, row.id, model)]
    want = None if fields is None else frozenset(fields)
    level = _level_for_step(step) if level is None else level
    f = _figures(conn, row.id, ids, (lo, hi, step), level, want, _everyone(conn, row.id, model))
    cols = _columns(f)
    return {"ts": (np.arange(len(f["scrapes"]), dtype=np.float64) * step + lo).tolist(), **cols}


def _series(conn: Connection, *args: Any) -> list[SeriesPoint]:
    return points_from_columns(_series_columns(conn, *args))


def points_from_columns(cols: dict[str, list[Any]]) -> list[SeriesPoint]:
    """Series steps from columns (``ts`` and SeriesPoint fields → lists), as Reader.series_columns and
    Reader.fleet give them."""
    names = list(cols)
    return [_make(SeriesPoint, dict(zip(names, values, strict=True))) for values in zip(*cols.values(), strict=True)]


def _empty_figures() -> dict[str, np.ndarray]:
    return {"scrapes": np.zeros(1), "up_scrapes": np.zeros(1), "up_ratio": np.full(1, np.nan)}


def _window(
    conn: Connection,
    target: str,
    end: float,
    window_s: float,
    model: str | None,
    level: int | None = None,
    with_gpus: bool = True,
) -> WindowFigures:
    hi = int(math.floor(end)) + 1  # include a scrape stamped exactly at ``end``
    lo = hi - int(window_s)
    row = _target_row(conn, target)
    gpus: tuple[GpuFigures, ...] = ()
    last, ceiling, f = None, None, _empty_figures()
    if level is None:
        level = RAW if window_s <= RAW_WINDOW_MAX_S else 3600 if window_s >= HOURLY_WINDOW_MIN_S else 60
    if row is not None:
        ids = [i for i, _ in _model_ids(conn, row.id, model)]
        f = _figures(conn, row.id, ids, (lo, hi, hi - lo), level, everyone=_everyone(conn, row.id, model))
        last, ceiling = _last_scrape(conn, row.id, end), target_ceiling(conn, row.id)
        gpus = _gpu_figures(conn, row.id, lo, hi, level) if with_gpus else ()
    engine = None if row is None else row.engine
    sleep = None if row is None else _sleep_state(conn, [i for i, _ in _model_ids(conn, row.id, model)], lo, hi)
    return window_from(target, model, end, window_s, lo, f, last, ceiling, gpus, engine, sleep)


_WINDOW_FIELDS = record_fields(WindowFigures)


def window_from(
    target: str, model: str | None, end: float, window_s: float, lo: int,
    f: dict[str, np.ndarray], last: Any, ceiling: CeilingInfo | None, gpus: tuple[GpuFigures, ...],
    engine: str | None = None, sleep: str | None = None,
) -> WindowFigures:  # fmt: skip
    """The WindowFigures of one window's arrays (one step), its last scrape (ts, up, error), ceiling,
    engine and sleep state (also used by db/fleet.py, which reads every target's arrays at once)."""
    # a window gives the preemptions' count, not their rate, and scrapes rather than a share of them
    point = {k: v[0] for k, v in _columns(f).items() if k in _WINDOW_FIELDS}
    rejections = point["admission_rejections_per_s"]
    tok = point["tokens_per_s"]
    ceiling_tok = ceiling.tokens_per_s if ceiling else None
    return WindowFigures(
        target=target,
        model=model,
        window_s=float(window_s),
        start=float(end - window_s),
        end=float(end),
        **point,
        ttft_p95_in_inf_bucket=bool(f.get("ttft_p95_s_inf", [False])[0]) and point["ttft_p95_s"] is not None,
        ceiling_tokens_per_s=ceiling_tok,
        efficiency=None if tok is None or not ceiling_tok else tok / ceiling_tok,
        ceiling=ceiling,
        gpus=gpus,
        last_scrape_at=None if last is None else float(last.ts),
        up=_window_up(last, lo, f),
        last_error=None if last is None else last.error,
        scrapes=int(f["scrapes"][0]),
        failed_scrapes=int(f["scrapes"][0] - f["up_scrapes"][0]),
        engine=engine,
        sleep_state=sleep,
        admission_rejections_per_min=None if rejections is None else rejections * 60.0,
        requests_finished_per_s_by_reason={r: point[f"{k}_per_s"] for r, k in FINISHED_BY_REASON.items()
                                           if point[f"{k}_per_s"] is not None},
    )


def _window_up(last: Any, lo: int, f: dict[str, np.ndarray]) -> bool | None:
    """The latest scrape's health; without a raw scrape in the window (its rows are past their
    retention), whether the rollups counted a successful round in it; None when neither knows."""
    if last is not None and last.ts >= lo:
        return bool(last.up)
    scrapes = f["scrapes"][0]
    return None if math.isnan(scrapes) or scrapes == 0 else bool(f["up_scrapes"][0] > 0)


def _sleep_state(conn: Connection, model_ids: list[int], lo: int, hi: int) -> str | None:
    """The engine's sleep state at the window's last raw row (None: not exposed, or no row)."""
    row = sources.latest_sample(conn, model_ids, lo, hi, ("sleep_weights_offloaded", "sleep_discard_all"))
    return None if row is None else sleep_state(*row)


# -- GPUs --------------------------------------------------------------------------------------------
def _gpu_grid(conn: Connection, gpus: list[Any], lo: int, hi: int, step: int, level: int) -> tuple[Any, int]:
    ids = [int(g.id) for g in gpus]
    rows = [r for lv, a, b in plan(lo, hi, level, sources.marks(conn)) for r in sources.fetch_gpus(conn, lv, ids, a, b)]
    groups = max(1, -(-(hi - lo) // step))
    pos = {gid: i for i, gid in enumerate(ids)}
    key = _group(rows, lo, step) * len(ids) + np.fromiter((pos[r[1]] for r in rows), dtype=np.int64, count=len(rows))
    spec = {"avg": [f"{f}_sum" for f in schema.GPU_FIELDS], "max": ["temperature_c_max"]}
    return aggregate.reduce_rows(rows, sources.GPU_COLS, key, groups * len(ids), spec, {}), groups


def _bw_gbps(pct: float | None, peak: float | None) -> float | None:
    return None if pct is None or peak is None else pct / 100.0 * peak


def _gpu_figures(conn: Connection, target_id: int, lo: int, hi: int, level: int) -> tuple[GpuFigures, ...]:
    gpus = _gpu_rows(conn, target_id)
    if not gpus:
        return ()
    red, _ = _gpu_grid(conn, gpus, lo, hi, hi - lo, level)
    out = []
    for i, g in enumerate(gpus):
        if red.n[i] == 0:
            continue
        avg = {f: _none(red.avgs[f"{f}_avg"][i]) for f in schema.GPU_FIELDS}
        out.append(
            GpuFigures(
                uuid=g.uuid,
                index=g.gpu_index,
                name=g.name,
                host=g.host,
                memory_used_bytes=avg["memory_used_bytes"],
                memory_total_bytes=avg["memory_total_bytes"],
                memory_busy_pct_avg=avg["memory_busy_pct"],
                dram_bw_util_pct_avg=avg["dram_bw_util_pct"],
                dram_bw_gbps_avg=_bw_gbps(avg["dram_bw_util_pct"], g.peak_bw_gbps),
                dram_bw_source=g.dram_bw_source,
                peak_bw_gbps=g.peak_bw_gbps,
                peak_bw_source=g.peak_bw_source,
                power_w_avg=avg["power_w"],
                temperature_c_max=_none(red.maxes["temperature_c_max"][i]),
            )
        )
    return tuple(out)


def _gpu_series(conn: Connection, target: str, start: float, end: float, step_s: float) -> list[GpuPoint]:
    step = max(1, int(step_s))
    lo, hi = int(start) // step * step, int(math.ceil(end))
    row = _target_row(conn, target)
    gpus = _gpu_rows(conn, row.id) if row is not None else []
    if not gpus or hi <= lo:
        return []
    red, groups = _gpu_grid(conn, gpus, lo, hi, step, _level_for_step(step))
    out = []
    for gi in range(groups):
        for j, g in enumerate(gpus):
            k = gi * len(gpus) + j
            if red.n[k] == 0:
                continue
            avg = {f: _none(red.avgs[f"{f}_avg"][k]) for f in schema.GPU_FIELDS}
            out.append(
                GpuPoint(
                    ts=float(lo + gi * step),
                    uuid=g.uuid,
                    memory_used_bytes=avg["memory_used_bytes"],
                    memory_total_bytes=avg["memory_total_bytes"],
                    memory_busy_pct=avg["memory_busy_pct"],
                    dram_bw_util_pct=avg["dram_bw_util_pct"],
                    dram_bw_gbps=_bw_gbps(avg["dram_bw_util_pct"], g.peak_bw_gbps),
                    power_w=avg["power_w"],
                    temperature_c=avg["temperature_c"],
                )
            )
    return out


def _latest_gpus(conn: Connection, target: str, window_s: float) -> tuple[GpuFigures, ...]:
    row = _target_row(conn, target)
    if row is None:
        return ()
    # The newest reading, not gpus.last_seen: the writer updates that only when a GPU's identity
    # or meta changes (not every round), so it can be hours old. One seek on the (target, ts) key.
    s = schema.gpu_samples
    last = conn.execute(select(func.max(s.c.ts)).where(s.c.target_id == row.id)).scalar()
    return _gpu_figures(conn, row.id, last + 1 - int(window_s), last + 1, RAW) if last else ()
