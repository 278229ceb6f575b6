"""Small named migrations, each applied in one transaction together with its bookkeeping row.

Append new migrations to ``MIGRATIONS``; never edit or reorder an applied one. A migration is a
function taking a Connection inside the open transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import Column, Connection, Engine, Float, Integer, MetaData, Table, inspect, select, text
from sqlalchemy.exc import SQLAlchemyError

from db import schema
from db.engine import storage_error

Migration = Callable[[Connection], None]


def _initial(conn: Connection) -> None:
    tables = [t for t in schema.metadata.sorted_tables if t is not schema.migrations_table]
    schema.metadata.create_all(conn, tables=tables)


def _chart_indexes(conn: Connection) -> None:
    # Covering indexes for the two most drawn charts: rollup rows are wide (every histogram), and
    # reading a week of minutes through them costs ~3× reading these narrow indexes. ~40 bytes
    # per minute row (docs/storage.md).
    conn.execute(
        text(
            "CREATE INDEX IF NOT EXISTS ix_model_rollups_ttft ON model_rollups (model_id, step, ts, samples, ttft_layout, ttft_buckets)"
        )
    )
    conn.execute(
        text(
            "CREATE INDEX IF NOT EXISTS ix_model_rollups_tokens ON model_rollups (model_id, step, ts, samples, generation_tokens)"
        )
    )


# gpu_samples as migration 0003 leaves it, frozen here so that a later change to schema.py does not
# change what this migration builds (a later migration changes it further).
_GPU_FIELDS_0003 = (
    "memory_used_bytes",
    "memory_total_bytes",
    "memory_busy_pct",
    "dram_bw_util_pct",
    "power_w",
    "temperature_c",
)


def _gpu_samples_0003(name: str) -> Table:
    return Table(
        name,
        MetaData(),
        Column("target_id", Integer, primary_key=True),
        Column("ts", Integer, primary_key=True),
        Column("gpu_id", Integer, primary_key=True),
        *[Column(f, Float) for f in _GPU_FIELDS_0003],
        sqlite_with_rowid=False,
    )


def _gpu_samples_round_key(conn: Connection) -> None:
    # Rekey gpu_samples from (gpu_id, ts) to (target_id, ts, gpu_id): a round's GPUs then share a
    # leaf page, so its commit writes one page for them instead of one per GPU. The key cannot be
    # altered in place (SQLite), so the table is rebuilt: rename, create, copy, drop.
    if "target_id" in {c["name"] for c in inspect(conn).get_columns("gpu_samples")}:
        return  # created by 0001 from the current schema: already keyed so
    conn.execute(text("ALTER TABLE gpu_samples RENAME TO gpu_samples_0002"))
    if conn.dialect.name == "postgresql":  # the old key's index keeps its name, which the new one needs
        conn.execute(text("ALTER INDEX gpu_samples_pkey RENAME TO gpu_samples_0002_pkey"))
    old = Table("gpu_samples_0002", MetaData(), autoload_with=conn)
    new = _gpu_samples_0003("gpu_samples")
    new.create(conn)
    g = schema.gpus
    source = (
        select(g.c.target_id, old.c.ts, old.c.gpu_id, *[old.c[f] for f in _GPU_FIELDS_0003])
        .join_from(old, g, g.c.id == old.c.gpu_id)
        .order_by(g.c.target_id, old.c.ts, old.c.gpu_id)  # appended in key order: densely packed pages
    )
    conn.execute(new.insert().from_select(["target_id", "ts", "gpu_id", *_GPU_FIELDS_0003], source))
    old.drop(conn)


MIGRATIONS: list[tuple[str, Migration]] = [
    ("0001_initial_schema", _initial),
    ("0002_chart_covering_indexes", _chart_indexes),
    ("0003_gpu_samples_round_key", _gpu_samples_round_key),
]


def applied(conn: Connection) -> set[str]:
    """Names of the migrations already applied (empty on a fresh database)."""
    if not inspect(conn).has_table(schema.migrations_table.name):
        return set()
    return set(conn.execute(select(schema.migrations_table.c.name)).scalars())


def migrate(engine: Engine) -> list[str]:
    """Apply pending migrations in order; return the names applied now (empty when up to date)."""
    done: list[str] = []
    try:
        with engine.begin() as conn:
            schema.migrations_table.create(conn, checkfirst=True)
        for name, step in MIGRATIONS:
            with engine.begin() as conn:
                if name in applied(conn):
                    continue
                step(conn)
                conn.execute(schema.migrations_table.insert().values(name=name, applied_at=int(time.time())))
                done.append(name)
    except SQLAlchemyError as exc:
        raise storage_error("migrating the schema", exc) from None
    return done
