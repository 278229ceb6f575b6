"""Storing and loading imported benchmark files (``BenchRun`` / ``BenchPoint``, ``bench import``)."""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from typing import Any

from sqlalchemy import Connection, Engine, select
from sqlalchemy.exc import SQLAlchemyError

from db import schema
from db.errors import storage_error
from db.results import BenchPoint, BenchRun


def store_bench(engine: Engine, run: BenchRun, imported_at: float) -> int:
    """Insert a run and its points in one transaction (all or nothing); returns the new run id."""
    try:
        with engine.begin() as conn:
            key = conn.execute(
                schema.bench_runs.insert().values(
                    tool=run.tool, run_at=run.run_at, imported_at=imported_at, target=run.target, model=run.model,
                    file_name=run.file_name, settings=json.dumps(run.settings, default=str, sort_keys=True),
                )  # fmt: skip
            ).inserted_primary_key
            assert key is not None
            run_id = int(key[0])
            conn.execute(schema.bench_points.insert(), [_point_row(run_id, i, p) for i, p in enumerate(run.points)])
    except SQLAlchemyError as exc:
        raise storage_error("storing a benchmark", exc) from None
    return run_id


def _point_row(run_id: int, position: int, point: BenchPoint) -> dict[str, Any]:
    return {"run_id": run_id, "position": position, **asdict(point)}


def _settings(stored: str | None) -> dict[str, Any]:
    """A run's stored settings, read as untrusted (an older version's row, a hand-edited database):
    what is not a JSON object of them reads as none, never an error on the page that shows it."""
    try:
        value = json.loads(stored or "{}")
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def load_benches(conn: Connection, limit: int = 20, target: str | None = None) -> list[BenchRun]:
    """The ``limit`` newest runs (by the time they ran), of ``target`` when given, with their points in order."""
    r, p = schema.bench_runs, schema.bench_points
    query = select(r).order_by(r.c.run_at.desc(), r.c.id.desc()).limit(limit)
    if target is not None:
        query = query.where(r.c.target == target)
    names = [f.name for f in fields(BenchPoint)]
    out = []
    for run in conn.execute(query):
        rows = conn.execute(select(p).where(p.c.run_id == run.id).order_by(p.c.position))
        out.append(
            BenchRun(
                tool=run.tool, run_at=run.run_at, model=run.model, settings=_settings(run.settings),
                points=tuple(BenchPoint(**{k: getattr(row, k) for k in names}) for row in rows),
                file_name=run.file_name, target=run.target, imported_at=run.imported_at, id=int(run.id),
            )  # fmt: skip
        )
    return out
