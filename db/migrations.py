"""Small named migrations, each applied in one transaction together with its bookkeeping row.

Append new migrations to ``MIGRATIONS``; never edit or reorder an applied one. A migration is a
function taking a Connection inside the open transaction.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from sqlalchemy import Column, Connection, Engine, Float, Integer, MetaData, Table, inspect, select, text
from sqlalchemy.exc import SQLAlchemyError

from db import schema
from db.engine import storage_error

log = logging.getLogger(__name__)
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


def _covered_time(conn: Connection) -> None:
    # Rates divide a step's increases by the time they cover, not by the step's length: after a
    # collector stopped for two minutes, the first round's increases cover those two minutes, and
    # divided by a 5 s step they drew a 25x spike. New rows store their share of that time
    # (samples.covered_ms, db/writer.py:_shares); rows of an older database get it here, as the
    # writer would have stored it: a raw row, the time since its target's previous round with rows
    # (none after a gap over 600 s, the writer's default max_gap_s: its increases were unknown),
    # split among that round's models; a rollup row, the length of its period split among the
    # models rolled up with it (the length the queries divided by until now).
    samples, rollups = "covered_ms" not in _columns(conn, "samples"), "covered_ms" not in _columns(conn, "model_rollups")
    if samples:
        conn.execute(text("ALTER TABLE samples ADD COLUMN covered_ms INTEGER"))
    if rollups:
        conn.execute(text("ALTER TABLE model_rollups ADD COLUMN covered_ms INTEGER"))
    for target in [int(t) for t in conn.execute(text("SELECT id FROM targets ORDER BY id")).scalars()]:
        # a target at a time: a fleet's rows stay out of memory
        if samples:
            _fill_raw_covered_time(conn, target)
        if rollups:
            _fill_rollup_covered_time(conn, target)
    # the tokens chart's covering index (0002) needs the covered time too
    conn.execute(text("DROP INDEX IF EXISTS ix_model_rollups_tokens"))
    conn.execute(
        text(
            "CREATE INDEX ix_model_rollups_tokens"
            " ON model_rollups (model_id, step, ts, samples, generation_tokens, covered_ms)"
        )
    )


_OF_TARGET = "model_id IN (SELECT id FROM models WHERE target_id = :t)"


def _fill_raw_covered_time(conn: Connection, target: int) -> None:
    # a round's rows cover the time since the target's previous round with rows
    by_round: dict[int, list[int]] = {}
    for model, ts in conn.execute(text(f"SELECT model_id, ts FROM samples WHERE {_OF_TARGET} ORDER BY ts, model_id"), {"t": target}):
        by_round.setdefault(int(ts), []).append(int(model))
    times = list(by_round)
    previous = dict(zip(times[1:], times, strict=False))
    updates = []
    for ts, models in by_round.items():
        before = previous.get(ts)
        if before is not None and ts - before <= 600:
            shares = _shares_0004(1000 * (ts - before), len(models))
            updates += [{"m": m, "ts": ts, "c": c} for m, c in zip(models, shares, strict=True)]
    if updates:
        log.info("migration 0004: the covered time of %d raw rows of target %d", len(updates), target)
        conn.execute(text("UPDATE samples SET covered_ms = :c WHERE model_id = :m AND ts = :ts"), updates)


def _fill_rollup_covered_time(conn: Connection, target: int) -> None:
    periods: dict[tuple[int, int], list[int]] = {}
    query = f"SELECT model_id, step, ts FROM model_rollups WHERE {_OF_TARGET} ORDER BY ts, model_id"
    for model, step, ts in conn.execute(text(query), {"t": target}):
        periods.setdefault((int(step), int(ts)), []).append(int(model))
    updates = [
        {"m": m, "s": step, "ts": ts, "c": c}
        for (step, ts), models in periods.items()
        for m, c in zip(models, _shares_0004(1000 * step, len(models)), strict=True)
    ]
    if updates:
        log.info("migration 0004: the covered time of %d rollup rows of target %d", len(updates), target)
        update = "UPDATE model_rollups SET covered_ms = :c WHERE model_id = :m AND step = :s AND ts = :ts"
        conn.execute(text(update), updates)


def _columns(conn: Connection, table: str) -> set[str]:
    return {c["name"] for c in inspect(conn).get_columns(table)}


def _shares_0004(covered_ms: int, models: int) -> list[int]:
    # db/writer.py:_shares as it is at migration 0004 (the first row takes the remainder)
    each, rest = divmod(covered_ms, models)
    return [each + rest, *[each] * (models - 1)]


def _alerts(conn: Connection) -> None:
    # Alert states, their transitions, silences and the evaluator's lease (docs/alerts.md). A fresh
    # database got them from 0001 (built from the current schema): checkfirst makes this a no-op.
    tables = [schema.alert_states, schema.alert_transitions, schema.silences, schema.leases]
    schema.metadata.create_all(conn, tables=tables, checkfirst=True)
    conn.execute(text("CREATE INDEX IF NOT EXISTS ix_alert_transitions_at ON alert_transitions (at)"))


def _fleet(conn: Connection) -> None:
    # Targets found through a Prometheus source, and how far a Prometheus backfill got (docs/fleet.md).
    # A fresh database got both from 0001 (built from the current schema).
    if "discovered_by" not in _columns(conn, "targets"):
        conn.execute(text("ALTER TABLE targets ADD COLUMN discovered_by TEXT"))
    schema.metadata.create_all(conn, tables=[schema.backfill_progress], checkfirst=True)


MIGRATIONS: list[tuple[str, Migration]] = [
    ("0001_initial_schema", _initial),
    ("0002_chart_covering_indexes", _chart_indexes),
    ("0003_gpu_samples_round_key", _gpu_samples_round_key),
    ("0004_covered_time", _covered_time),
    ("0005_alerts", _alerts),
    ("0011_fleet", _fleet),
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
