"""Reads across every target at once: the latest round (health), and the Fleet table's figures.

Part of the query facade (pages and commands call these through :class:`db.queries.Reader`'s
engine); read-only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, LargeBinary, and_, bindparam, cast, func, literal, select
from sqlalchemy.exc import SQLAlchemyError

from db import aggregate, schema, sources
from db import queries as q
from db.ceiling import compute_ceiling
from db.engine import storage_error
from db.quantiles import quantile_matrix
from db.results import CeilingInfo, WindowFigures
from db.sources import RAW


def last_round_at(engine: Engine) -> float | None:
    """Unix seconds of the newest round stored for any target (None when nothing is stored)."""
    try:
        with engine.connect() as conn:
            value = conn.execute(select(func.max(schema.scrapes.c.ts))).scalar()
    except SQLAlchemyError as exc:
        raise storage_error("reading the latest round", exc) from None
    return None if value is None else float(value)


# -- every target at once ------------------------------------------------------------------------------
# The Fleet reads every target's window and last hour. Through Reader.window and Reader.series that
# is ~20 statements per target (2,000 for 100 targets, ~4 s on PostgreSQL here); here each kind of
# row is fetched once for all targets and split by target in Python, then reduced by the facade's
# own arithmetic (db.queries' _target_figures, _model_figures, _rates, quantile_matrix), so the
# figures are the ones Reader.window and Reader.series give (tests/test_fleet.py compares them).


@dataclass(frozen=True)
class FleetFigures:
    """One target's window (as ``Reader.window`` without GPUs) and its series steps (``fields`` only)."""

    window: WindowFigures
    series: dict[str, list[Any]]  # as Reader.series_columns: "ts" and every SeriesPoint field → list
    models: tuple[str, ...]  # model names seen, in the order first seen
    discovered_by: str | None  # the Prometheus source that found the target; None: configured


def _hist_by_model_stmt(level: int, hist: str, dialect: str) -> Any:
    table = schema.samples if level == RAW else schema.model_rollups
    blob, layout = table.c[f"{hist}_buckets"], table.c[f"{hist}_layout"]
    group = (table.c.ts - bindparam("start")) // bindparam("step")
    joined = func.string_agg(blob, literal(b"", LargeBinary)) if dialect == "postgresql" else func.group_concat(blob, "")
    ids = table.c.model_id.in_(bindparam("ids", expanding=True))
    where = and_(ids, table.c.ts >= bindparam("lo"), table.c.ts < bindparam("hi"), blob.is_not(None),
                 *(() if level == RAW else (table.c.step == level,)))  # fmt: skip
    return (select(table.c.model_id, group, layout, cast(joined, LargeBinary)).where(where)
            .group_by(table.c.model_id, group, layout))  # fmt: skip


def _keys(rows: list[Any], col: int, index: dict[int, int], groups: int, start: int, step: int) -> np.ndarray:
    """Each row's (target, step) cell: target position × groups + step (``col``: the row's id column)."""
    ts = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    owner = np.fromiter((index[r[col]] for r in rows), dtype=np.int64, count=len(rows))
    return owner * groups + (ts - start) // step


def figures_many(
    conn: Connection, models: dict[int, list[int]], span: tuple[int, int, int], level: int, want: frozenset[str]
) -> dict[int, dict[str, np.ndarray]]:
    """``db.queries._figures`` for many targets (target id → its model ids): one statement per kind of
    row, one reduction over every (target, step) cell, then each target's slice of the arrays."""
    start, end, step = span
    groups = max(1, -(-(end - start) // step))
    cells = len(models) * groups
    segments = q.plan(start, end, level, sources.marks(conn))
    position = {t: i for i, t in enumerate(models)}
    all_models = [m for ms in models.values() for m in ms]
    of_model = {m: position[t] for t, ms in models.items() for m in ms}
    trows = [r for lv, lo, hi in segments for r in sources.fetch_targets(conn, lv, list(models), lo, hi)]
    f = q._target_figures(trows, start, step, cells, g=_keys(trows, 1, position, groups, start, step))
    spec = {op: [c for c in cols if q._NEEDED_BY[c] & want] for op, cols in q._SCALAR_SPEC.items()}
    scalars = [c for cols in spec.values() for c in cols]
    if scalars and all_models:
        mrows = [r for lv, lo, hi in segments for r in sources.fetch_models(conn, lv, all_models, lo, hi, (), scalars)]
        keys = _keys(mrows, 1, of_model, groups, start, step)
        local = {m: i for ms in models.values() for i, m in enumerate(ms)}  # a model's place in its target
        f.update(q._model_figures(mrows, all_models, (start, step, cells), spec, g=keys, positions=local))
    quantiles = [(h, p, name) for h, p, name in q._QUANTILES if name in want]
    layouts = sources.layouts(conn) if quantiles and all_models else {}
    for hist in sorted({h for h, _, _ in quantiles}) if all_models else ():
        params = {"ids": all_models, "start": start, "step": step}
        rows = [r for lv, lo, hi in segments
                for r in sources.fetch_all(conn, _hist_by_model_stmt(lv, hist, conn.dialect.name), {**params, "lo": lo, "hi": hi})]  # fmt: skip
        owner = np.fromiter((of_model[r[0]] for r in rows), dtype=np.int64, count=len(rows))
        key = owner * groups + np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
        parts = aggregate.hist_parts(rows, key, cells, 2, 3, layouts)
        for h, p, name in quantiles:
            if h == hist:
                values, inf = np.full(cells, np.nan), np.zeros(cells, dtype=bool)
                for keys, bounds, counts in parts:
                    values[keys], inf[keys] = quantile_matrix(p, bounds, counts)
                f[name], f[name + "_inf"] = values, inf
    q._rates(f, float(step))
    q._ratios(f)
    q._derived(f)  # engine GB/s, acceptance length...: as db.queries._figures finishes its arrays
    return {t: {k: v[i * groups:(i + 1) * groups] for k, v in f.items()} for t, i in position.items()}


def _last_scrapes(conn: Connection, end: float) -> dict[int, Any]:
    """Each target's last scrape at or before ``end`` (ts, up, error): index look-ups per target (a
    GROUP BY, or a row-value IN, read every stored scrape)."""
    s, t = schema.scrapes, schema.targets

    def newest(column: Any) -> Any:
        return (select(column).where(s.c.target_id == t.c.id, s.c.ts <= end)
                .order_by(s.c.ts.desc()).limit(1).scalar_subquery())  # fmt: skip

    stmt = select(t.c.id, newest(s.c.ts).label("ts"), newest(s.c.up).label("up"), newest(s.c.error).label("error"))
    return {row.id: row for row in conn.execute(stmt) if row.ts is not None}


def _ceilings(conn: Connection) -> dict[int, CeilingInfo | None]:
    t, g = schema.targets, schema.gpus
    peaks = dict(conn.execute(
        select(g.c.target_id, func.min(g.c.peak_bw_gbps))
        .where(g.c.peak_bw_gbps.is_not(None), g.c.peak_bw_source == "nvml-formula").group_by(g.c.target_id)).all())  # fmt: skip
    out: dict[int, CeilingInfo | None] = {}
    for row in conn.execute(select(t.c.id, t.c.weight_gb, t.c.tensor_parallel, t.c.bandwidth_gbps)):
        usable = row.weight_gb is not None and row.tensor_parallel
        out[row.id] = compute_ceiling(row.weight_gb, row.tensor_parallel, row.bandwidth_gbps, peaks.get(row.id)) if usable else None
    return out


def fleet_figures(
    engine: Engine, end: float, window_s: float, series: tuple[float, float, float], fields: Sequence[str]
) -> dict[str, FleetFigures]:
    """Every target's window ending at ``end`` and its ``fields`` per step over ``series`` (start, end, step)."""
    try:
        with engine.connect() as conn:
            return _fleet(conn, end, window_s, series, fields)
    except SQLAlchemyError as exc:
        raise storage_error("reading the fleet", exc) from None


def _fleet(conn: Connection, end: float, window_s: float, series: tuple[float, float, float],
           fields: Sequence[str]) -> dict[str, FleetFigures]:  # fmt: skip
    t, m = schema.targets, schema.models
    targets = conn.execute(select(t.c.id, t.c.name, t.c.discovered_by, t.c.engine)).all()
    names = {row.id: row.name for row in targets}
    models: dict[int, list[int]] = {tid: [] for tid in names}
    model_names: dict[int, list[str]] = {tid: [] for tid in names}
    for mid, tid, mname in conn.execute(select(m.c.id, m.c.target_id, m.c.name).order_by(m.c.id)):
        models[tid].append(mid)
        model_names[tid].append(mname)
    hi = int(math.floor(end)) + 1
    lo = hi - int(window_s)
    level = RAW if window_s <= q.RAW_WINDOW_MAX_S else 3600 if window_s >= q.HOURLY_WINDOW_MIN_S else 60
    windows = figures_many(conn, models, (lo, hi, hi - lo), level, q.ALL_FIELDS)
    s_start, s_end, s_step = series
    step = max(1, int(s_step))
    s_lo, s_hi = int(s_start) // step * step, int(math.ceil(s_end))
    steps = figures_many(conn, models, (s_lo, s_hi, step), q._level_for_step(step), frozenset(fields))
    last, ceilings = _last_scrapes(conn, end), _ceilings(conn)
    out = {}
    for tid, name in names.items():
        row = next(r for r in targets if r.id == tid)
        # the sleep state is one index look-up per target, at the window's last raw row
        sleep = q._sleep_state(conn, models[tid], lo, hi) if models[tid] else None
        window = q.window_from(name, None, end, window_s, lo, windows[tid], last.get(tid), ceilings.get(tid), (),
                               row.engine, sleep)  # fmt: skip
        ts = (np.arange(len(steps[tid]["scrapes"]), dtype=np.float64) * step + s_lo).tolist()
        points: dict[str, list[Any]] = {"ts": ts, **q._columns(steps[tid])}
        out[name] = FleetFigures(window, points, tuple(model_names[tid]), row.discovered_by)
    return out
