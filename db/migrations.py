"""Small named migrations, each applied in one transaction together with its bookkeeping row.

Append new migrations to ``MIGRATIONS``; never edit or reorder an applied one. A migration is a
function taking a Connection inside the open transaction.
"""

from __future__ import annotations

import binascii
import json
import logging
import struct
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Column, Connection, Engine, Float, Integer, MetaData, Table, inspect, select, text
from sqlalchemy.exc import SQLAlchemyError

from collectors.fetch import masked
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


def _notifications(conn: Connection) -> None:
    # The e-mail outbox, its attempts and the per-group notification log (docs/alerts.md, E-mail).
    # A fresh database got them from 0001 (built from the current schema): checkfirst makes this a no-op.
    tables = [schema.notifications, schema.notification_attempts, schema.notification_groups]
    schema.metadata.create_all(conn, tables=tables, checkfirst=True)
    conn.execute(text("CREATE INDEX IF NOT EXISTS ix_notifications_status ON notifications (status, due_at)"))
    conn.execute(text("CREATE INDEX IF NOT EXISTS ix_notifications_created ON notifications (created_at)"))


def _sweep_target(conn: Connection) -> None:
    # Which target a sweep measured (NULL for older runs). A fresh database got it from 0001.
    if "target" not in _columns(conn, "sweep_runs"):
        conn.execute(text("ALTER TABLE sweep_runs ADD COLUMN target TEXT"))


def _query_views(conn: Connection) -> None:
    # The stable views of ad-hoc queries (docs/query.md), the thresholds they judge minutes by and
    # the saved queries. The views are built from db/query_views.py as it stands when this runs: a
    # later change to a view is a new migration that drops and recreates it.
    from db.query_views import create_views

    if "ttft_p95_s" not in _columns(conn, "model_rollups"):
        conn.execute(text("ALTER TABLE model_rollups ADD COLUMN ttft_p95_s FLOAT"))
        for target in [int(t) for t in conn.execute(text("SELECT id FROM targets ORDER BY id")).scalars()]:
            _fill_ttft_p95(conn, target)
    schema.metadata.create_all(conn, tables=[schema.sweetspot_thresholds, schema.saved_queries], checkfirst=True)
    # The default thresholds until a collector writes the configured ones at its start, so that a
    # history written before (or without) one is judged too, by the numbers a default banner uses.
    from core.settings import SweetSpotSettings
    from db.thresholds import EVERY_TARGET, FIELDS

    defaults = SweetSpotSettings()
    row = {"target": EVERY_TARGET, **{f: float(getattr(defaults, f)) for f in FIELDS}, "updated_at": int(time.time())}
    conn.execute(schema.sweetspot_thresholds.insert().values(**row))
    log.info("migration 0008: query views %s", ", ".join(create_views(conn)))


def _fill_ttft_p95(conn: Connection, target: int) -> None:
    # model_rollups.ttft_p95_s of rows rolled up before the column existed, as db/rollup.py now
    # computes it: each row's own TTFT buckets (a target at a time: a fleet's rows stay out of memory)
    import numpy as np

    from db import aggregate, sources
    from db.rollup import ttft_p95

    query = f"SELECT model_id, step, ts, ttft_layout, ttft_buckets FROM model_rollups WHERE {_OF_TARGET} AND ttft_buckets IS NOT NULL"
    rows = conn.execute(text(query), {"t": target}).all()
    if not rows:
        return
    parts = aggregate.hist_parts(rows, np.arange(len(rows)), len(rows), 3, 4, sources.layouts(conn))
    updates = [{"m": r[0], "s": r[1], "ts": r[2], "q": q} for r, q in zip(rows, ttft_p95(parts, len(rows)), strict=True)]
    log.info("migration 0008: the TTFT P95 of %d rollup rows of target %d", len(updates), target)
    conn.execute(text("UPDATE model_rollups SET ttft_p95_s = :q WHERE model_id = :m AND step = :s AND ts = :ts"), updates)


def _state_json(conn: Connection) -> None:
    """Counter state stored as the 2026 text encoding (``HEAD|base64 floats``) rewritten as plain JSON."""
    st = schema.series_state
    for model_id, state in conn.execute(select(st.c.model_id, st.c.state)).all():
        if not state.startswith("{"):
            conn.execute(st.update().where(st.c.model_id == model_id).values(state=_state_text_to_json(state)))


def _state_text_to_json(text_: str) -> str:
    """The text encoding, frozen here: JSON ``[counter keys, [[histogram key, buckets]…], positions of
    None]``, ``|``, base64 of float64s: ts, process start, (value, created) per counter, (layout, count,
    sum, created) per histogram, then every histogram's cumulative counts."""
    head, _, data = text_.partition("|")
    counter_keys, hist_keys, none = json.loads(head)
    raw = binascii.a2b_base64(data)
    values: list[Any] = list(struct.unpack(f"<{len(raw) // 8}d", raw))
    for i in none:
        values[i] = None
    at, counters, hists = 2, {}, {}
    for key in counter_keys:
        counters[key] = values[at : at + 2]
        at += 2
    cum_at = at + 4 * len(hist_keys)
    for key, n in hist_keys:
        layout, count, total, created = values[at : at + 4]
        hists[key] = [int(layout), values[cum_at : cum_at + n], count, total, created]
        at, cum_at = at + 4, cum_at + n
    ts = None if values[0] is None else int(values[0])
    return json.dumps({"ts": ts, "ps": values[1], "c": counters, "h": hists}, separators=(",", ":"))


# The columns 0012 adds, frozen here (schema.py may grow further in later migrations).
_COUNTERS_0012 = (
    "finished_stop", "finished_length", "finished_abort", "finished_error", "admission_rejections",
    "engine_read_bytes", "engine_write_bytes", "spec_decode_drafts", "spec_decode_draft_tokens",
    "spec_decode_accepted_tokens",
)
_GAUGES_0012 = (
    "waiting_capacity", "waiting_deferred", "sleep_weights_offloaded", "sleep_discard_all", "kv_capacity_tokens",
    "kv_capacity_bytes", "prefix_cache_hit_rate", "lora_running_adapters", "lora_waiting_adapters",
)
_HISTOGRAMS_0012 = ("prefill_time", "tpot")


def _engines(conn: Connection) -> None:
    # vLLM 0.33's and SGLang's figures (docs/metrics.md): nullable columns, NULL in older rows (not
    # exposed then: drawn as gaps). A fresh database got them from 0001: only missing ones are added.
    hist = [(f"{h}_{part}", kind) for h in _HISTOGRAMS_0012
            for part, kind in (("layout", "INTEGER"), ("count", "FLOAT"), ("sum", "FLOAT"), ("buckets", "BLOB"))]
    blob = "BYTEA" if conn.dialect.name == "postgresql" else "BLOB"
    wanted = {
        "samples": [(g, "FLOAT") for g in _GAUGES_0012] + [(c, "FLOAT") for c in _COUNTERS_0012] + hist,
        "model_rollups": [(f"{g}_{a}", "FLOAT") for g in _GAUGES_0012 for a in ("sum", "max")]
        + [(c, "FLOAT") for c in _COUNTERS_0012] + hist,
        "targets": [("engine", "TEXT"), ("lora", "TEXT")],
    }
    for table, columns in wanted.items():
        have = _columns(conn, table)
        for name, kind in columns:
            if name not in have:
                kind = blob if kind == "BLOB" else "DOUBLE PRECISION" if kind == "FLOAT" and conn.dialect.name == "postgresql" else kind
                conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {name} {kind}"))


def _fleet(conn: Connection) -> None:
    # Targets found through a Prometheus source, and how far a Prometheus backfill got (docs/fleet.md).
    # A fresh database got both from 0001 (built from the current schema).
    if "discovered_by" not in _columns(conn, "targets"):
        conn.execute(text("ALTER TABLE targets ADD COLUMN discovered_by TEXT"))
    schema.metadata.create_all(conn, tables=[schema.backfill_progress], checkfirst=True)


def _masked_urls(conn: Connection) -> None:
    # The writer stored the gateway's URL with its userinfo password (targets.gateway_source, shown on
    # the Targets page and in target_info): mask it, and any other word of the three URL columns that is
    # a URL with a password (collectors.fetch.masked, as the writer masks them now); and sweeps' URLs.
    t = schema.targets
    columns = (t.c.vllm_url, t.c.gateway_source, t.c.gpu_source)
    for target_id, *stored in conn.execute(select(t.c.id, *columns)).all():
        shown = [" ".join(masked(word) for word in value.split(" ")) for value in stored]
        if shown != stored:
            conn.execute(t.update().where(t.c.id == target_id).values(dict(zip(columns, shown, strict=True))))
    runs = schema.sweep_runs  # the URL a load sweep measured (sweep --url), shown on the Operating point
    for run_id, url in conn.execute(select(runs.c.id, runs.c.url)).all():
        if url and masked(url) != url:
            conn.execute(runs.update().where(runs.c.id == run_id).values(url=masked(url)))


def _series_limit(conn: Connection) -> None:
    # What a target's last page left out over its max_series, for the Targets page and `status`.
    # A fresh database got both columns from 0001 (built from the current schema).
    have = _columns(conn, "targets")
    for name in ("series_dropped", "series_limit"):
        if name not in have:
            conn.execute(text(f"ALTER TABLE targets ADD COLUMN {name} INTEGER"))


MIGRATIONS: list[tuple[str, Migration]] = [
    ("0001_initial_schema", _initial),
    ("0002_chart_covering_indexes", _chart_indexes),
    ("0003_gpu_samples_round_key", _gpu_samples_round_key),
    ("0004_covered_time", _covered_time),
    ("0005_alerts", _alerts),
    ("0007_notifications", _notifications),
    ("0010_sweep_target", _sweep_target),
    ("0008_query_views", _query_views),
    ("0009_state_json", _state_json),
    ("0012_engines", _engines),
    ("0011_fleet", _fleet),
    ("0013_masked_urls", _masked_urls),
    ("0015_series_limit", _series_limit),
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
