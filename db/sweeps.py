"""Storing and loading load-sweep results (``SweepRun`` / ``SweepLevel``)."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.exc import SQLAlchemyError

from core.redact import masked
from db import schema
from db.errors import storage_error
from db.results import SweepLevel, SweepRun, SweepSpan


def store_sweep(engine: Engine, run: SweepRun) -> int:
    """Insert a run and its levels in one transaction; returns the new run id."""
    try:
        with engine.begin() as conn:
            key = conn.execute(
                schema.sweep_runs.insert().values(
                    started_at=run.started_at,
                    url=masked(run.url),  # a password in `sweep --url` is never stored
                    model=run.model,
                    mix=run.mix,
                    ttft_slo_s=run.ttft_slo_s,
                    recommendation=json.dumps(run.recommendation, default=str),
                    target=run.target,
                    ends_at=run.ends_at,
                )
            ).inserted_primary_key
            assert key is not None
            run_id = int(key[0])
            if run.levels:
                conn.execute(
                    schema.sweep_levels.insert(), [_level_row(run_id, i, lv) for i, lv in enumerate(run.levels)]
                )
    except SQLAlchemyError as exc:
        raise storage_error("storing a sweep", exc) from None
    return run_id


def finish_sweep(engine: Engine, run_id: int, run: SweepRun) -> None:
    """Complete the run stored at its start (:func:`store_sweep` without levels): its levels, its
    verdict and when its load ended, in one transaction."""
    r = schema.sweep_runs
    try:
        with engine.begin() as conn:
            conn.execute(r.update().where(r.c.id == run_id).values(
                recommendation=json.dumps(run.recommendation, default=str), ends_at=run.ends_at, model=run.model))
            if run.levels:
                conn.execute(schema.sweep_levels.insert(), [_level_row(run_id, i, lv) for i, lv in enumerate(run.levels)])
    except SQLAlchemyError as exc:
        raise storage_error("storing a sweep", exc) from None


def drop_sweep(engine: Engine, run_id: int) -> None:
    """Delete a run stored at its start that never completed (interrupted): nothing of it was measured."""
    try:
        with engine.begin() as conn:
            conn.execute(schema.sweep_levels.delete().where(schema.sweep_levels.c.run_id == run_id))
            conn.execute(schema.sweep_runs.delete().where(schema.sweep_runs.c.id == run_id))
    except SQLAlchemyError as exc:
        raise storage_error("dropping an interrupted sweep", exc) from None


def loading(conn: Connection, at: float, after_s: float) -> list[SweepSpan]:
    """The stored sweeps whose load spans ``at``, or ended at most ``after_s`` seconds before it
    (the rules' windows still hold it): started at or before ``at``, within the last two days."""
    r, lv = schema.sweep_runs, schema.sweep_levels
    rows = conn.execute(
        select(r.c.id, r.c.started_at, r.c.url, r.c.target, r.c.ends_at, func.coalesce(func.sum(lv.c.duration_s), 0.0))
        .select_from(r.outerjoin(lv, lv.c.run_id == r.c.id))
        .where(r.c.started_at <= at, r.c.started_at >= at - SPAN_LOOKBACK_S)
        .group_by(r.c.id)
    )
    spans = [SweepSpan(int(i), float(s), u, t, float(e) if e is not None else float(s) + float(d))
             for i, s, u, t, e, d in rows]  # fmt: skip
    return [span for span in spans if span.ends_at >= at - after_s]


SPAN_LOOKBACK_S = 2 * 86400.0  # a sweep lasts minutes to hours: older runs are not read


def _level_row(run_id: int, position: int, level: SweepLevel) -> dict[str, Any]:
    row: dict[str, Any] = {"run_id": run_id, "position": position}
    for name in ("concurrency", "duration_s", "requests", "errors", *schema.SWEEP_LEVEL_FIELDS):
        row[name] = getattr(level, name)
    return row


def load_sweeps(conn: Connection, limit: int = 20) -> list[SweepRun]:
    """The ``limit`` newest runs with their levels in order; a run still in progress (stored at its
    start, :attr:`SweepRun.running`) is not one yet: it has nothing to show (:func:`loading` reads it)."""
    r, lv = schema.sweep_runs, schema.sweep_levels
    runs = list(conn.execute(select(r).order_by(r.c.started_at.desc(), r.c.id.desc()).limit(limit)))
    out: list[SweepRun] = []
    for run in runs:
        levels = conn.execute(select(lv).where(lv.c.run_id == run.id).order_by(lv.c.position))
        out.append(
            SweepRun(
                started_at=run.started_at,
                url=run.url,
                model=run.model,
                mix=run.mix,
                ttft_slo_s=run.ttft_slo_s,
                levels=tuple(SweepLevel(**{k: getattr(x, k) for k in SweepLevel.__dataclass_fields__}) for x in levels),
                recommendation=json.loads(run.recommendation),
                id=int(run.id),
                target=run.target,
                ends_at=run.ends_at,
            )
        )
    return [run for run in out if not run.running]
