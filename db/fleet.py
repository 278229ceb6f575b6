"""Reads across every target at once: the latest round (health), and the Fleet table's figures.

Part of the query facade (pages and commands call these through :class:`db.queries.Reader`'s
engine); read-only.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.exc import SQLAlchemyError

from db import pipeline, schema
from db.ceiling import ceilings, configured_bandwidths
from db.errors import storage_error
from db.gpu_reads import gpu_figures_of
from db.results import WindowFigures


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
# is ~20 statements per target (2,000 for 100 targets, ~4 s on PostgreSQL here); here the figures
# pipeline (db/pipeline.py) is given every target at once: one statement per kind of row, split by
# target in Python, the same arithmetic as Reader.window and Reader.series (tests/test_fleet.py
# compares them).


@dataclass(frozen=True)
class FleetFigures:
    """One target's window (as ``Reader.window``) and its series steps (``fields`` only)."""

    window: WindowFigures
    series: dict[str, list[Any]]  # as Reader.series_columns: "ts" and every SeriesPoint field → list
    models: tuple[str, ...]  # model names seen, in the order first seen
    discovered_by: str | None  # the Prometheus source that found the target; None: configured


def _last_scrapes(conn: Connection, end: float) -> dict[int, Any]:
    """Each target's last scrape at or before ``end`` (ts, up, error): index look-ups per target (a
    GROUP BY, or a row-value IN, read every stored scrape)."""
    s, t = schema.scrapes, schema.targets

    def newest(column: Any) -> Any:
        return (select(column).where(s.c.target_id == t.c.id, s.c.ts <= end)
                .order_by(s.c.ts.desc()).limit(1).scalar_subquery())  # fmt: skip

    stmt = select(t.c.id, newest(s.c.ts).label("ts"), newest(s.c.up).label("up"), newest(s.c.error).label("error"))
    return {row.id: row for row in conn.execute(stmt) if row.ts is not None}


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
    # a target dropped from the lists (`targets drop --keep-history`) is in none of them
    columns = (t.c.id, t.c.name, t.c.discovered_by, t.c.engine, t.c.stale_after_s, t.c.retired_at)
    targets = conn.execute(select(*columns).where(t.c.dropped_at.is_(None))).all()
    names = {row.id: row.name for row in targets}
    models: dict[int, list[int]] = {tid: [] for tid in names}
    model_names: dict[int, list[str]] = {tid: [] for tid in names}
    for mid, tid, mname in conn.execute(select(m.c.id, m.c.target_id, m.c.name).order_by(m.c.id)):
        if tid not in models:  # a dropped target's
            continue
        models[tid].append(mid)
        model_names[tid].append(mname)
    hi = int(math.floor(end)) + 1
    lo = hi - int(window_s)
    windows = pipeline.figures(conn, models, (lo, hi, hi - lo), pipeline.window_level(window_s))
    s_start, s_end, s_step = series
    step = max(1, int(s_step))
    s_lo, s_hi = int(s_start) // step * step, int(math.ceil(s_end))
    steps = pipeline.figures(conn, models, (s_lo, s_hi, step), pipeline.level_for_step(step), frozenset(fields))
    last, targets_ceiling, configured = _last_scrapes(conn, end), ceilings(conn), configured_bandwidths(conn)
    # every target's GPUs in one read: their bandwidth share is the measured MBU of each window
    g = schema.gpus
    gpu_rows = list(conn.execute(select(g).order_by(g.c.target_id, g.c.gpu_index, g.c.uuid)))
    gpus = gpu_figures_of(conn, gpu_rows, lo, hi, pipeline.window_level(window_s))
    out = {}
    for tid, name in names.items():
        row = next(r for r in targets if r.id == tid)
        # the sleep state is one index look-up per target, at the window's last raw row
        sleep = pipeline.sleep_state_at(conn, models[tid], lo, hi) if models[tid] else None
        window = pipeline.window_from(name, None, end, window_s, lo, windows[tid], last.get(tid), targets_ceiling.get(tid), gpus.get(tid, ()),
                               row.engine, sleep, row.stale_after_s, configured_peak_gbps=configured.get(tid))  # fmt: skip
        if row.retired_at is not None:
            window = dataclasses.replace(window, retired_at=float(row.retired_at))
        ts = (np.arange(len(steps[tid]["scrapes"]), dtype=np.float64) * step + s_lo).tolist()
        points: dict[str, list[Any]] = {"ts": ts, **pipeline.columns(steps[tid])}
        out[name] = FleetFigures(window, points, tuple(model_names[tid]), row.discovered_by)
    return out
