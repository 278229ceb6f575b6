"""Small named migrations, each applied in one transaction together with its bookkeeping row.

Append new migrations to ``MIGRATIONS``; never edit or reorder an applied one. A migration is a
function taking a Connection inside the open transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import Connection, Engine, inspect, select, text
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


MIGRATIONS: list[tuple[str, Migration]] = [
    ("0001_initial_schema", _initial),
    ("0002_chart_covering_indexes", _chart_indexes),
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
