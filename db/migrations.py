"""Small named migrations, each applied in one transaction together with its bookkeeping row.

A numbered migration is a function taking a Connection inside the open transaction, registered by
one line appended to ``MIGRATIONS`` under the next free number (``NNNN_what_it_does``). The list
is checked when this module loads and again by :func:`migrate`: a duplicate or out-of-order number
raises :class:`MigrationOrderError` (a merge that put a line out of place), so the order in which
they run is the order their numbers say. Each one reads only what the migrations numbered before it
made: it may run on a database at any earlier point. Never edit an applied one.

Then two standing steps run on every migration, after the numbered ones and with no bookkeeping row,
because they follow the code rather than history:

- ``catalogue_columns``: the nullable columns of a catalogue figure (``schema.CATALOGUE_COLUMNS``)
  that ``samples`` or ``model_rollups`` lack are added, typed as ``db/schema.py`` types them and
  NULL in older rows (the figure was not scraped then): a new vLLM metric needs no migration. A
  column that must be filled in for older rows (``covered_ms``, ``ttft_p95_s``) still needs one.
- ``query_views``: the query views (``db/query_views.py``) that are missing are created, once the
  tables and columns they read are there; when one view's stored SQL is not the code's (a version
  that changed a view: SQLite's copy of its text, a hash in PostgreSQL's comment on it), they are all
  dropped first and made again from the code. A view change needs no migration; a migration that
  rebuilds a table a view reads drops the views (``query_views.drop_views``) and this step makes them.
"""

from __future__ import annotations

import binascii
import json
import logging
import re
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Column, Connection, Engine, Float, Integer, MetaData, Table, inspect, select, text
from sqlalchemy.exc import SQLAlchemyError

from core.errors import StorageError
from core.redact import masked
from db import schema
from db.errors import storage_error, what_database

log = logging.getLogger(__name__)
Migration = Callable[[Connection], None]


class MigrationOrderError(Exception):
    """``MIGRATIONS`` lists a name without its number, a number twice, or a number out of order."""


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


def _sweep_ends_at(conn: Connection) -> None:
    # When a sweep's load ends (planned while it runs): the evaluator holds the load rules meanwhile.
    if "ends_at" not in _columns(conn, "sweep_runs"):
        conn.execute(text("ALTER TABLE sweep_runs ADD COLUMN ends_at FLOAT"))


def _query_views(conn: Connection) -> None:
    # What the stable views of ad-hoc queries (docs/query.md) read besides the history: TTFT P95 per
    # rollup, the thresholds they judge minutes by, and the saved queries. The views themselves are
    # made by the standing step after every numbered migration (they read columns later ones add).
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
    row = {"target": EVERY_TARGET, **{f: _number(getattr(defaults, f)) for f in FIELDS}, "updated_at": int(time.time())}
    conn.execute(schema.sweetspot_thresholds.insert().values(**row))


def _number(value: float | None) -> float | None:
    return None if value is None else float(value)


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


# Every stored text that may hold a URL: where the targets' sources are, the errors naming them,
# the alert summaries and e-mails quoting those errors, a sweep's URL.
_URL_TEXTS = {
    "targets": ("vllm_url", "gateway_source", "gpu_source", "discovered_by"),
    "scrapes": ("error", "gateway_error", "gpu_error"),
    "alert_states": ("summary",),
    "alert_transitions": ("summary",),
    "notifications": ("subject", "body_text", "body_html"),
    "sweep_runs": ("url",),
}


def _masked_query_tokens(conn: Connection) -> None:
    # Credentials in a URL's query string (?token=..., api_key, ...) were stored as written, in the
    # source columns and in every error quoting the URL: mask them (core.redact.masked, as the writer
    # and the fetcher do now). One UPDATE per distinct text: a target's error repeats on every round.
    for name, columns in _URL_TEXTS.items():
        table = schema.metadata.tables[name]
        for column in (table.c[c] for c in columns):
            found = select(column).distinct().where(column.like("%=%") | column.like("%@%"))
            for (value,) in conn.execute(found).all():
                if masked(value) != value:
                    conn.execute(table.update().where(column == value).values({column.name: masked(value)}))


def _masked_url_values(conn: Connection) -> None:
    # core.redact.masked now masks every query value of a URL, a token given as its user name and a
    # password up to the authority's last "@": mask what older versions stored by the narrower rules.
    # Notifications are left as they are: a queued e-mail's dashboard links need their parameters.
    for name, columns in _URL_TEXTS.items():
        if name == "notifications":
            continue
        table = schema.metadata.tables[name]
        for column in (table.c[c] for c in columns):
            found = select(column).distinct().where(column.like("%=%") | column.like("%@%"))
            for (value,) in conn.execute(found).all():
                if masked(value) != value:
                    conn.execute(table.update().where(column == value).values({column.name: masked(value)}))


def _notification_channel(conn: Connection) -> None:
    # Which receiver a notification goes to (email, alertmanager, webhook); rows before it were e-mail.
    if "channel" not in _columns(conn, "notifications"):
        conn.execute(text("ALTER TABLE notifications ADD COLUMN channel TEXT NOT NULL DEFAULT 'email'"))


def _series_limit(conn: Connection) -> None:
    # What a target's last page left out over its max_series, for the Targets page and `status`.
    # A fresh database got both columns from 0001 (built from the current schema).
    have = _columns(conn, "targets")
    for name in ("series_dropped", "series_limit"):
        if name not in have:
            conn.execute(text(f"ALTER TABLE targets ADD COLUMN {name} INTEGER"))


def _kv_bytes_per_token(conn: Connection) -> None:
    # The configured KV bytes per token of a target (targets[].ceiling.kv_bytes_per_token), the step
    # model's input when vLLM's cache_config_info does not give it. A fresh database got it from 0001.
    if "kv_bytes_per_token" not in _columns(conn, "targets"):
        conn.execute(text("ALTER TABLE targets ADD COLUMN kv_bytes_per_token FLOAT"))


def _min_mbu(conn: Connection) -> None:
    # The efficiency rule judges MBU against sweetspot.min_mbu now, not tok/s against the ceiling (a
    # bound on decode steps/s) with min_efficiency: the stored thresholds' column follows, at the new
    # default until the collector writes the configured ones at its start. The views read it and show
    # the new figures (mbu_pct, steps_per_s): dropped here, made again by the standing step.
    from core.settings import SweetSpotSettings
    from db.query_views import drop_views

    drop_views(conn)
    have = _columns(conn, "sweetspot_thresholds")
    if "min_efficiency" in have and "min_mbu" not in have:
        conn.execute(text("ALTER TABLE sweetspot_thresholds RENAME COLUMN min_efficiency TO min_mbu"))
        conn.execute(text("UPDATE sweetspot_thresholds SET min_mbu = :v"), {"v": SweetSpotSettings().min_mbu})


def _ttft_slo_attainment(conn: Connection) -> None:
    # The minutes and hours views gain ttft_slo_attainment_pct: dropped here, the standing step makes
    # them again. A PostgreSQL schema made before has the other view functions but not bucket_share.
    from db.query_functions import SCHEMA, SHARE_DDL
    from db.query_views import drop_views

    drop_views(conn)
    if conn.dialect.name == "postgresql" and conn.execute(text(f"SELECT to_regtype('{SCHEMA}.histogram_state')")).scalar():
        for statement in SHARE_DDL:
            conn.execute(text(statement))


def _history_fill(conn: Connection) -> None:
    # How far the demo's simulated week has come (db/history_fill.py); a fresh database got it from 0001.
    schema.metadata.create_all(conn, tables=[schema.history_fill], checkfirst=True)


def _future_rows(conn: Connection) -> None:
    # Rows dated after the clock, moved aside when it stepped back (db/future.py); a fresh database got it from 0001.
    schema.metadata.create_all(conn, tables=[schema.future_rows], checkfirst=True)


def _verdicts(conn: Connection) -> None:
    # The evaluator's per-minute verdicts (db/verdicts.py). The minutes and hours views read them
    # instead of judging minutes in SQL: drop the views, the standing step makes them from the code.
    # A fresh database got the table from 0001 (built from the current schema): checkfirst.
    schema.metadata.create_all(conn, tables=[schema.verdicts], checkfirst=True)
    from db.query_views import drop_views

    drop_views(conn)


def _sweet_spot_unknown(conn: Connection) -> None:
    # A target's sweet spot is unknown unless configured (its sweep or its own traffic may give one,
    # app/sweet_spot.py): the stored concurrency takes NULL, and the global row written under the old
    # default of 16 says unknown until a collector writes the configured thresholds at its start.
    # SQLite cannot drop a NOT NULL: the small table is copied into one made from the current schema.
    from db.query_views import drop_views
    from db.thresholds import EVERY_TARGET

    drop_views(conn)
    nullable = {c["name"]: c["nullable"] for c in inspect(conn).get_columns("sweetspot_thresholds")}
    if not nullable.get("concurrency", True):
        if conn.dialect.name == "postgresql":
            conn.execute(text("ALTER TABLE sweetspot_thresholds ALTER COLUMN concurrency DROP NOT NULL"))
        else:
            columns = ", ".join(nullable)
            conn.execute(text("ALTER TABLE sweetspot_thresholds RENAME TO sweetspot_thresholds_0021"))
            schema.sweetspot_thresholds.create(conn)
            conn.execute(text(f"INSERT INTO sweetspot_thresholds ({columns}) SELECT {columns} FROM sweetspot_thresholds_0021"))
            conn.execute(text("DROP TABLE sweetspot_thresholds_0021"))
    conn.execute(text("UPDATE sweetspot_thresholds SET concurrency = NULL WHERE target = :t"), {"t": EVERY_TARGET})


def _bench_runs(conn: Connection) -> None:
    # Imported benchmark files (`bench import`, db/benches.py). A fresh database got the tables from
    # 0001 (built from the current schema): checkfirst.
    schema.metadata.create_all(conn, tables=[schema.bench_runs, schema.bench_points], checkfirst=True)


def _config_epochs(conn: Connection) -> None:
    # Configuration epochs and restarts (db/epochs.py), and the view that reads them; a fresh database
    # got the table from 0001 (built from the current schema): checkfirst. The standing step makes the view.
    schema.metadata.create_all(conn, tables=[schema.config_epochs], checkfirst=True)


def _learned_sweet_spots(conn: Connection) -> None:
    # What the learner found each time the evaluator learned a target's sweet spot (db/learned.py); a
    # fresh database got the table from 0001: checkfirst. The standing step makes the view.
    schema.metadata.create_all(conn, tables=[schema.learned_sweet_spots], checkfirst=True)


def _delivery_state(conn: Connection) -> None:
    # Where the collector's notifications go, as it stored it (db/delivery.py); a fresh database got
    # the table from 0001: checkfirst.
    schema.metadata.create_all(conn, tables=[schema.delivery_state], checkfirst=True)


def _cannot_tell(conn: Connection) -> None:
    # verdicts.not_judged: the default rules that could not judge a minute and why (a minute judged
    # "cannot tell"); NULL in older rows, judged before the verdict said what it could not judge.
    if "not_judged" not in _columns(conn, "verdicts"):
        conn.execute(text("ALTER TABLE verdicts ADD COLUMN not_judged TEXT"))


def _retired_targets(conn: Connection) -> None:
    # targets.retired_at and dropped_at: a target the collector no longer reads, and one dropped from the
    # lists (`targets drop --keep-history`); NULL in older rows: configured and listed.
    have = _columns(conn, "targets")
    for column in ("retired_at", "dropped_at"):
        if column not in have:
            conn.execute(text(f"ALTER TABLE targets ADD COLUMN {column} INTEGER"))


def _stale_after(conn: Connection) -> None:
    # targets.stale_after_s: how long after its last scrape a target reads stale (the collector writes
    # 2 × interval + scrape timeout); verdicts.thresholds: the thresholds each minute was judged by, so
    # every page shows the judgement with the settings the evaluator used. A fresh database has both.
    if "stale_after_s" not in _columns(conn, "targets"):
        conn.execute(text("ALTER TABLE targets ADD COLUMN stale_after_s FLOAT"))
    if "thresholds" not in _columns(conn, "verdicts"):
        conn.execute(text("ALTER TABLE verdicts ADD COLUMN thresholds TEXT"))


def _mbu_model_bytes(conn: Connection) -> None:
    # mbu_pct is the model's bytes only (per engine, the KV tokens resident), never the GPUs' DRAM
    # reading, which gets its own source and the overhead traffic beside it: the minutes and hours
    # views are dropped here and made again from the code by the standing step.
    from db.query_views import drop_views

    drop_views(conn)


def _compute_roof(conn: Connection) -> None:
    # The roofline's compute roof reads the configured active parameters, peak TFLOP/s and precision
    # of a target (the UI and status read targets from the database, as the ceiling's inputs).
    have = _columns(conn, "targets")
    # shape_source: where the model's shape was read (app/model_shapes.py)
    for name, kind in (("active_params_b", "FLOAT"), ("peak_tflops", "FLOAT"), ("compute_precision", "TEXT"),
                       ("shape_source", "TEXT")):
        if name not in have:
            conn.execute(text(f"ALTER TABLE targets ADD COLUMN {name} {kind}"))


def _gateway_wait(conn: Connection) -> None:
    # The gateway's own wait histogram (targets[].gateway.wait_metric), stored per round on the
    # target's rows as a model's histograms are: layout, count and sum increases, packed buckets.
    for table in ("scrapes", "target_rollups"):
        have = _columns(conn, table)
        for column in schema.GATEWAY_WAIT_COLUMNS():
            if column.name not in have:
                kind = column.type.compile(dialect=conn.dialect)
                conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column.name} {kind}"))


def _running_limit(conn: Connection) -> None:
    # The engine's running limit (--max-num-seqs; vLLM does not expose it, targets[].max_num_seqs
    # does): the planner never puts a knee above it (app/deployments.py).
    if "max_num_seqs" not in _columns(conn, "targets"):
        conn.execute(text("ALTER TABLE targets ADD COLUMN max_num_seqs INTEGER"))


# One line each, numbers ascending (checked below); a new one takes the next free number.
MIGRATIONS: list[tuple[str, Migration]] = [
    ("0001_initial_schema", _initial),
    ("0002_chart_covering_indexes", _chart_indexes),
    ("0003_gpu_samples_round_key", _gpu_samples_round_key),
    ("0004_covered_time", _covered_time),
    ("0005_alerts", _alerts),
    ("0007_notifications", _notifications),
    ("0008_query_views", _query_views),
    ("0009_state_json", _state_json),
    ("0010_sweep_target", _sweep_target),
    ("0011_fleet", _fleet),
    ("0012_engines", _engines),
    ("0013_masked_urls", _masked_urls),
    ("0014_masked_query_tokens", _masked_query_tokens),
    ("0015_series_limit", _series_limit),
    ("0016_notification_channel", _notification_channel),
    ("0017_kv_bytes_per_token", _kv_bytes_per_token),
    ("0018_min_mbu", _min_mbu),
    ("0019_ttft_slo_attainment", _ttft_slo_attainment),
    ("0020_verdicts", _verdicts),
    ("0021_sweet_spot_unknown", _sweet_spot_unknown),
    ("0023_stale_after", _stale_after),
    ("0025_mbu_model_bytes", _mbu_model_bytes),
    ("0026_compute_roof", _compute_roof),
    ("0027_masked_url_values", _masked_url_values),
    ("0030_bench_runs", _bench_runs),
    ("0031_config_epochs", _config_epochs),
    ("0032_gateway_wait", _gateway_wait),
    ("0034_learned_sweet_spots", _learned_sweet_spots),
    ("0050_delivery_state", _delivery_state),
    ("0051_cannot_tell", _cannot_tell),
    ("0052_retired_targets", _retired_targets),
    ("0060_running_limit", _running_limit),
    ("0065_history_fill", _history_fill),
    ("0075_future_rows", _future_rows),
    ("0085_sweep_ends_at", _sweep_ends_at),
]

_NAME = re.compile(r"(\d{4})_[a-z0-9_]+")


def check_order(migrations: list[tuple[str, Migration]]) -> None:
    """Raise :class:`MigrationOrderError` unless every name is ``NNNN_words`` with numbers strictly ascending."""
    before = ""
    for name, _ in migrations:
        match = _NAME.fullmatch(name)
        if match is None:
            raise MigrationOrderError(f"migration {name!r} has no four-digit number: name it NNNN_what_it_does")
        if before and match.group(1) <= before[:4]:
            how = "reuses the number of" if match.group(1) == before[:4] else "is listed after"
            raise MigrationOrderError(
                f"migration {name!r} {how} {before!r}: give it the next free number and list it last (db/migrations.py)"
            )
        before = name


check_order(MIGRATIONS)


def _catalogue_columns(conn: Connection) -> list[str]:
    added = []
    for table, names in schema.CATALOGUE_COLUMNS.items():
        have = _columns(conn, table)
        for name in names:
            if name not in have:
                kind = schema.metadata.tables[table].c[name].type.compile(dialect=conn.dialect)
                conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {name} {kind}"))
                log.info("added the catalogue column %s.%s (NULL in older rows: not scraped then)", table, name)
                added.append(f"column {table}.{name}")
    return added


def _missing_views(conn: Connection) -> list[str]:
    from db.query_views import create_views

    return [f"view {name}" for name in create_views(conn)]


# After the numbered ones, every time, in this order (the views read catalogue columns); no bookkeeping
# row. Each returns what it made.
STANDING: list[tuple[str, Callable[[Connection], list[str]]]] = [
    ("catalogue_columns", _catalogue_columns),
    ("query_views", _missing_views),
]


@dataclass(frozen=True)
class Upgrade:
    """What one :func:`upgrade` did: the numbered migrations applied, and what the standing steps made."""

    numbered: list[str]
    standing: list[str]


def applied(conn: Connection) -> set[str]:
    """Names of the migrations already applied (empty on a fresh database)."""
    if not inspect(conn).has_table(schema.migrations_table.name):
        return set()
    return set(conn.execute(select(schema.migrations_table.c.name)).scalars())


def newer_migrations(conn: Connection) -> list[str]:
    """Applied migrations this version does not know: a newer Sweetspot wrote the database."""
    known = {name for name, _ in MIGRATIONS}
    return sorted(applied(conn) - known)


def refuse_newer(conn: Connection, url: Any = None) -> None:
    """Raise StorageError when a newer Sweetspot wrote this database: an older writer would write rows
    the newer schema does not expect (and call it up to date)."""
    newer = newer_migrations(conn)
    if newer:
        raise StorageError(f"{what_database(url)} was written by a newer Sweetspot (its schema has migration "
                           f"{newer[-1]}, unknown to this version); nothing was written",
                           "Upgrade Sweetspot to the version that wrote it (or point --db / db_url at another database)")


def migrate(engine: Engine) -> list[str]:
    """Apply pending numbered migrations in order, then the standing steps; return the numbered names
    applied now (empty when up to date). A database a newer Sweetspot wrote is refused (StorageError),
    never migrated or written."""
    return upgrade(engine).numbered


def upgrade(engine: Engine) -> Upgrade:
    """:func:`migrate`, saying also what the standing steps made (``column samples.x``, ``view minutes``)."""
    check_order(MIGRATIONS)
    done: list[str] = []
    made: list[str] = []
    try:
        with engine.begin() as conn:
            schema.migrations_table.create(conn, checkfirst=True)
            refuse_newer(conn, engine.url)
        for name, step in MIGRATIONS:
            with engine.begin() as conn:
                if name in applied(conn):
                    continue
                step(conn)
                conn.execute(schema.migrations_table.insert().values(name=name, applied_at=int(time.time())))
                done.append(name)
        for _, standing in STANDING:
            with engine.begin() as conn:
                made += standing(conn)
    except SQLAlchemyError as exc:
        raise storage_error("migrating the schema", exc, engine.url) from None
    return Upgrade(done, made)
