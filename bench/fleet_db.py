"""A fleet's database for the benchmarks: N targets × D days, as the collector stores them.

One target's history is written the production way (bench/synth.py rounds → Writer → rollup →
retention: raw rows kept 48 h, minute rollups beyond), old history at 60 s steps and the last
``recent_s`` at the 5 s scrape interval. The other targets are copies of it made in SQL, each with
its own target, model and GPU ids: the queries then read N times the rows, through the same
indexes, as N targets written one by one would make them read (writing 100 × 7 days through the
writer takes longer than this 2-core machine can spare for a benchmark).
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Engine, func, insert, literal, select

from bench.synth import rounds
from core.settings import REFERENCE_CEILING, Settings, TargetSettings
from db import schema
from db.engine import open_engine
from db.rollup import apply_retention, rollup
from db.writer import Writer

DAY = 86400
RETENTION = Settings(raw_retention_s=2 * DAY, rollup_retention_s=30 * DAY, hourly_retention_s=400 * DAY)


def name(i: int) -> str:
    return f"vllm-{i:03d}"


def build(db_url: str, targets: int, days: float, now: float, recent_s: float = 2 * 3600) -> dict[str, float]:
    """Fill ``db_url`` (empty) and return how long each part took (seconds)."""
    t0 = time.perf_counter()
    engine = open_engine(db_url)
    writer = Writer(engine)
    writer.register_target(TargetSettings(name=name(0), ceiling=REFERENCE_CEILING))  # the ceiling is configured, never borrowed
    start, recent = now - days * DAY, now - recent_s
    writer.write_rounds(rounds(name(0), start, recent, interval=60.0, seed=1))
    writer.write_rounds(rounds(name(0), recent, now, interval=5.0, seed=2))
    writer.close()
    rollup(engine, now)
    apply_retention(engine, now, RETENTION)
    t1 = time.perf_counter()
    for i in range(1, targets):
        clone(engine, name(0), name(i))
    engine.dispose()
    return {"write_one_s": t1 - t0, "clone_s": time.perf_counter() - t1}


def _copy(conn: Any, table: Any, key: str, old: int, new: int, remap: dict[str, Any] | None = None) -> None:
    cols = [c.name for c in table.columns]
    exprs = [literal(new) if c == key else (remap or {}).get(c, table.c[c]) for c in cols]
    conn.execute(insert(table).from_select(cols, select(*exprs).where(table.c[key] == old)))


def clone(engine: Engine, source: str, target: str) -> None:
    """Copy every row of target ``source`` to a new target ``target`` (new ids, same values)."""
    t, m, g = schema.targets, schema.models, schema.gpus
    with engine.begin() as conn:
        src = conn.execute(select(t).where(t.c.name == source)).one()
        values = {c: getattr(src, c) for c in src._fields if c != "id"}
        new_target = conn.execute(insert(t).values(**{**values, "name": target})).inserted_primary_key[0]
        for table in (schema.scrapes, schema.target_rollups):
            _copy(conn, table, "target_id", src.id, new_target)
        for model in conn.execute(select(m).where(m.c.target_id == src.id)).all():
            new_model = conn.execute(insert(m).values(target_id=new_target, name=model.name)).inserted_primary_key[0]
            for table in (schema.samples, schema.model_rollups, schema.series_state):
                _copy(conn, table, "model_id", model.id, new_model)
        for gpu in conn.execute(select(g).where(g.c.target_id == src.id)).all():
            row = {c: getattr(gpu, c) for c in gpu._fields if c != "id"}
            new_gpu = conn.execute(insert(g).values(**{**row, "target_id": new_target,
                                                       "uuid": f"{gpu.uuid}-{target}"})).inserted_primary_key[0]  # fmt: skip
            _copy(conn, schema.gpu_rollups, "gpu_id", gpu.id, new_gpu)
            gs = schema.gpu_samples
            _copy(conn, gs, "gpu_id", gpu.id, new_gpu, {"target_id": literal(new_target)})


def rows(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {tbl.name: int(conn.execute(select(func.count()).select_from(tbl)).scalar() or 0)
                for tbl in (schema.targets, schema.scrapes, schema.samples, schema.model_rollups)}  # fmt: skip
