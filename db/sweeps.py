"""Storing and loading load-sweep results (``SweepRun`` / ``SweepLevel``)."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, Engine, select
from sqlalchemy.exc import SQLAlchemyError

from core.redact import masked
from db import schema
from db.errors import storage_error
from db.results import SweepLevel, SweepRun


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


def _level_row(run_id: int, position: int, level: SweepLevel) -> dict[str, Any]:
    row: dict[str, Any] = {"run_id": run_id, "position": position}
    for name in ("concurrency", "duration_s", "requests", "errors", *schema.SWEEP_LEVEL_FIELDS):
        row[name] = getattr(level, name)
    return row


def load_sweeps(conn: Connection, limit: int = 20) -> list[SweepRun]:
    """The ``limit`` newest runs with their levels in order."""
    r, lv = schema.sweep_runs, schema.sweep_levels
    runs = list(conn.execute(select(r).order_by(r.c.started_at.desc(), r.c.id.desc()).limit(limit)))
    out = []
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
            )
        )
    return out
