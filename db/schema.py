"""Table definitions (SQLAlchemy Core). Times are integer unix seconds; ``NULL`` means "no data".

Layout, per target (see docs/storage.md for the sizes):

- ``targets``, ``models`` (one row per (target, model name)), ``gpus`` (one row per (target, UUID)),
  ``bucket_layouts`` (histogram bounds, referenced by id).
- raw, kept ``raw_retention_s``: ``scrapes`` (one row per round: up, error, duration, gateway queue
  depth), ``samples`` (one row per (model, round): gauges, counter *increases*, packed histogram
  increases), ``gpu_samples``.
- rollups, keyed by ``step`` (60 or 3600 s): ``target_rollups``, ``model_rollups``, ``gpu_rollups``.
- ``rollup_marks``: per step, the time before which rollups are complete (queries read finer data after it).
- ``series_state``: the cumulative values the writer needs to resume after a collector restart.
- ``sweep_runs`` + ``sweep_levels``.

Histogram increases are stored per histogram as four columns: ``<h>_layout`` (bucket_layouts.id),
``<h>_count`` and ``<h>_sum`` (increase of ``_count``/``_sum``) and ``<h>_buckets``: a packed blob
of little-endian uint32 values ``increase << 8 | bucket_index`` for the buckets that grew (sparse;
NULL when none grew). See :mod:`db.histo`.

Rollups keep gauge *sums* with the sample count (``samples``) rather than averages: sums of
integral readings (running requests, NVML percentages, bytes) are integers, which SQLite stores in
1–6 bytes instead of an 8-byte REAL; the average is sum ÷ samples.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Column,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from collectors import catalogue

# The catalogue's figures stored as columns (the parser's ModelFigures keys), in catalogue order.
# A new one costs its catalogue line: an existing database gets its columns from the standing step
# of db/migrations.py (CATALOGUE_COLUMNS below), no migration (docs/architecture.md, "Adding a metric").
COUNTERS = catalogue.keys("counter")
GAUGES = catalogue.keys("gauge")
HISTOGRAMS = catalogue.keys("histogram")
GPU_FIELDS = (
    "memory_used_bytes",
    "memory_total_bytes",
    "memory_busy_pct",
    "dram_bw_util_pct",
    "power_w",
    "temperature_c",
)
STEPS = (60, 3600)

metadata = MetaData()
_NO_ROWID: dict[str, Any] = {"sqlite_with_rowid": False}


def _hist_columns() -> list[Column[Any]]:
    cols: list[Column[Any]] = []
    for h in HISTOGRAMS:
        cols += [Column(f"{h}_layout", Integer), Column(f"{h}_count", Float), Column(f"{h}_sum", Float)]
        cols.append(Column(f"{h}_buckets", LargeBinary))
    return cols


GATEWAY_WAIT = "gateway_wait"  # the target rows' histogram: the gateway's own wait (seconds)


def GATEWAY_WAIT_COLUMNS() -> list[Column[Any]]:  # noqa: N802 (reads as the constant it stands for)
    """The target rows' (scrapes, target_rollups) columns of the gateway's wait histogram."""
    h = GATEWAY_WAIT
    return [Column(f"{h}_layout", Integer), Column(f"{h}_count", Float), Column(f"{h}_sum", Float),
            Column(f"{h}_buckets", LargeBinary)]


migrations_table = Table(
    "sweetspot_migrations", metadata, Column("name", String(200), primary_key=True), Column("applied_at", Integer)
)

targets = Table(
    "targets",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", Text, nullable=False, unique=True),
    Column("vllm_url", Text, nullable=False, default=""),
    Column("gateway_source", Text, nullable=False, default=""),
    Column("gpu_source", Text, nullable=False, default=""),
    Column("weight_gb", Float),
    Column("tensor_parallel", Integer),
    Column("bandwidth_gbps", Float),
    Column("kv_bytes_per_token", Float),  # configured (0017_kv_bytes_per_token); NULL: from cache_config_info or unknown
    Column("metric_names_used", Text),  # JSON object, last successful scrape
    Column("missing_metrics", Text),  # JSON list, last successful scrape
    Column("cache_config", Text),  # JSON object
    Column("updated_at", Integer),
    Column("engine", Text),  # "vllm" or "sglang", from the last successful scrape's names (0012_engines)
    Column("lora", Text),  # JSON object: the newest vllm:lora_requests_info labels (0012_engines)
    Column("discovered_by", Text),  # the Prometheus source that found it; NULL: configured
    # series of the last successful page beyond the target's max_series (dropped), and that limit
    # (0015_series_limit); 0 / NULL: within it
    Column("series_dropped", Integer),
    Column("series_limit", Integer),
    # how long after its last scrape the target reads stale: 2 × interval + scrape timeout, written by the
    # collector that scrapes it (0023_stale_after); NULL: never judged stale (a Prometheus source's target)
    Column("stale_after_s", Float),
    # the compute roof's inputs (0026_compute_roof): targets[].ceiling.active_params_b, targets[].gpu.peak_tflops
    # and .precision; NULL: unknown (the peak then from the datasheet table by the GPUs' names)
    Column("active_params_b", Float),
    Column("peak_tflops", Float),
    Column("compute_precision", Text),
    Column("max_num_seqs", Integer),  # the engine's running limit (targets[].max_num_seqs); NULL: unknown
    Column("shape_source", Text),  # where unset ceiling inputs were read from (config.json, the table); NULL: typed
    # no longer configured (0052_retired_targets): when the collector started without it in its settings
    # (NULL: configured, or found by a [[prometheus]] source); shown as "not configured any more", then
    # left out of the lists after retired_shown_s. dropped_at: `python -m app targets drop` kept its
    # history but took it out of every list (NULL: listed)
    Column("retired_at", Integer),
    Column("dropped_at", Integer),
)

models = Table(
    "models",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("target_id", Integer, ForeignKey("targets.id"), nullable=False),
    Column("name", Text, nullable=False),
    UniqueConstraint("target_id", "name"),
)

gpus = Table(
    "gpus",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("target_id", Integer, ForeignKey("targets.id"), nullable=False),
    Column("uuid", Text, nullable=False),
    Column("gpu_index", Integer),
    Column("name", Text),
    Column("host", Text),
    Column("peak_bw_gbps", Float),
    Column("peak_bw_source", Text),
    Column("dram_bw_source", Text),
    # when the writer last wrote this row: first seen, or identity/meta changed (not every round;
    # the newest reading is max(gpu_samples.ts))
    Column("last_seen", Integer),
    UniqueConstraint("target_id", "uuid"),
)

bucket_layouts = Table(
    "bucket_layouts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("bounds", Text, nullable=False, unique=True),  # JSON list, last element "+Inf"
)

scrapes = Table(
    "scrapes",
    metadata,
    Column("target_id", Integer, primary_key=True),
    Column("ts", Integer, primary_key=True),
    Column("up", SmallInteger, nullable=False),
    Column("error", Text),
    Column("duration_ms", Integer),
    Column("queue_depth", Float),
    Column("gateway_error", Text),
    Column("gpu_error", Text),
    # the gateway's own wait histogram (targets[].gateway.wait_metric), its increase in the round, packed as
    # a model's histograms are (0032_gateway_wait); NULL: none read, or no increase known (first read, reset of layout)
    *GATEWAY_WAIT_COLUMNS(),
    **_NO_ROWID,
)

def _raw_figure_columns() -> list[Column[Any]]:
    return [*[Column(g, Float) for g in GAUGES], *[Column(c, Float) for c in COUNTERS], *_hist_columns()]


def _rollup_figure_columns() -> list[Column[Any]]:
    gauges = [c for g in GAUGES for c in (Column(f"{g}_sum", Float), Column(f"{g}_max", Float))]
    return [*gauges, *[Column(c, Float) for c in COUNTERS], *_hist_columns()]


# The nullable columns each table has per catalogue figure: db/migrations.py adds those a database
# lacks (NULL in its older rows: the figure was not scraped then, drawn as a gap).
CATALOGUE_COLUMNS: dict[str, tuple[str, ...]] = {
    "samples": tuple(c.name for c in _raw_figure_columns()),
    "model_rollups": tuple(c.name for c in _rollup_figure_columns()),
}

samples = Table(
    "samples",
    metadata,
    Column("model_id", Integer, primary_key=True),
    Column("ts", Integer, primary_key=True),
    *_raw_figure_columns(),
    # This row's share of the time its round's increases cover: milliseconds since the target's
    # previous successful scrape, split among the round's models (NULL when unknown). Rates divide
    # by the sum over a target's rows, not by the step's length: see docs/storage.md.
    Column("covered_ms", Integer),
    **_NO_ROWID,
)

# Keyed (target, round, GPU): the GPUs of one round are neighbours, so a round's rows land on one
# leaf page (one WAL frame) instead of one page per GPU, and a target's window is one range scan.
gpu_samples = Table(
    "gpu_samples",
    metadata,
    Column("target_id", Integer, primary_key=True),
    Column("ts", Integer, primary_key=True),
    Column("gpu_id", Integer, primary_key=True),
    *[Column(f, Float) for f in GPU_FIELDS],
    **_NO_ROWID,
)

target_rollups = Table(
    "target_rollups",
    metadata,
    Column("target_id", Integer, primary_key=True),
    Column("step", Integer, primary_key=True),
    Column("ts", Integer, primary_key=True),
    Column("scrapes", Integer, nullable=False),
    Column("up_scrapes", Integer, nullable=False),
    Column("queue_samples", Integer, nullable=False),
    Column("queue_depth_sum", Float),
    Column("queue_depth_max", Float),
    *GATEWAY_WAIT_COLUMNS(),  # the gateway's wait histogram, its raw rows' increases merged (0032_gateway_wait)
    **_NO_ROWID,
)

model_rollups = Table(
    "model_rollups",
    metadata,
    Column("model_id", Integer, primary_key=True),
    Column("step", Integer, primary_key=True),
    Column("ts", Integer, primary_key=True),
    Column("samples", Integer, nullable=False),
    *_rollup_figure_columns(),
    Column("covered_ms", Integer),  # Σ of the raw rows' covered_ms
    # TTFT P95 of the period, computed when it is rolled up (db/quantiles.py): the query views judge
    # every minute by it, and a Python call per row would cost seconds over a fleet's week.
    Column("ttft_p95_s", Float),
    **_NO_ROWID,
)

gpu_rollups = Table(
    "gpu_rollups",
    metadata,
    Column("gpu_id", Integer, primary_key=True),
    Column("step", Integer, primary_key=True),
    Column("ts", Integer, primary_key=True),
    Column("samples", Integer, nullable=False),
    *[Column(f"{f}_sum", Float) for f in GPU_FIELDS],
    Column("temperature_c_max", Float),
    **_NO_ROWID,
)

rollup_marks = Table(
    "rollup_marks",
    metadata,
    Column("step", Integer, primary_key=True),
    Column("until_ts", Integer, nullable=False),  # every raw row (or minute) with ts < until_ts is rolled up
)

series_state = Table(
    "series_state",
    metadata,
    Column("model_id", Integer, primary_key=True),
    Column("ts", Integer, nullable=False),
    Column("state", Text, nullable=False),  # SeriesState.to_json: cumulative values (plain JSON since migration 0009)
)

sweep_runs = Table(
    "sweep_runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("started_at", Float, nullable=False),
    Column("url", Text, nullable=False),
    Column("model", Text, nullable=False),
    Column("mix", Text, nullable=False),
    Column("ttft_slo_s", Float, nullable=False),
    Column("recommendation", Text, nullable=False),  # JSON object
    # the configured target whose server the sweep loaded; NULL: no target watches that URL (or the
    # run predates migration 0010): the URL alone says what was measured
    Column("target", Text, nullable=True),
    # when the sweep's load ends: planned while it runs (the run is stored at its start, without
    # levels), its end once whole; NULL for a run stored before 0085 (its levels' durations say)
    Column("ends_at", Float, nullable=True),
)

SWEEP_LEVEL_FIELDS = (
    "tokens_per_s",
    "qps",
    "ttft_p50_s",
    "ttft_p95_s",
    "ttft_p99_s",
    "itl_p95_s",
    "e2e_mean_s",
    "e2e_p95_s",
    "error_rate",
)

sweep_levels = Table(
    "sweep_levels",
    metadata,
    Column("run_id", Integer, ForeignKey("sweep_runs.id"), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("concurrency", Integer, nullable=False),
    Column("duration_s", Float, nullable=False),
    Column("requests", Integer, nullable=False),
    Column("errors", Integer, nullable=False),
    *[Column(f, Float) for f in SWEEP_LEVEL_FIELDS],
)

# --- alerting (docs/alerts.md) ------------------------------------------------------------------
# Alerts are keyed by names, not ids: a transition stays readable (and joinable from the query
# views) after a target is renamed or dropped from the config. ``model`` is "" for an alert about
# the whole target. Times are unix seconds.

alert_states = Table(
    "alert_states",
    metadata,
    Column("rule", Text, primary_key=True),
    Column("target", Text, primary_key=True),
    Column("model", Text, primary_key=True),
    Column("state", Text, nullable=False),  # inactive, pending, firing, resolved, no_data, error
    Column("severity", Text, nullable=False),  # warning or critical
    Column("pending_since", Integer),  # the condition first held (the `for` timer's start)
    Column("firing_since", Integer),  # the alert fired (kept while it keeps firing)
    Column("cleared_since", Integer),  # the condition stopped holding while firing (keep_firing_for)
    Column("resolved_at", Integer),
    Column("last_change_at", Integer, nullable=False),
    Column("last_eval_at", Integer, nullable=False),
    Column("value", Float),  # the figure that decided the last evaluation, in the rule's unit
    Column("threshold", Float),
    Column("summary", Text),  # one line: which clause, value against threshold and window
    Column("recommendation", Text),
    Column("labels", Text),  # JSON object
)

alert_transitions = Table(
    "alert_transitions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("rule", Text, nullable=False),
    Column("target", Text, nullable=False),
    Column("model", Text, nullable=False),
    Column("from_state", Text, nullable=False),
    Column("to_state", Text, nullable=False),
    Column("at", Integer, nullable=False),
    Column("value", Float),
    Column("threshold", Float),
    Column("severity", Text, nullable=False),
    Column("summary", Text),
    Column("recommendation", Text),
    Column("labels", Text),  # JSON object
)

silences = Table(
    "silences",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("matchers", Text, nullable=False),  # JSON object: any of rule, target, model, severity → exact value
    Column("starts_at", Integer, nullable=False),
    Column("ends_at", Integer, nullable=False),
    Column("author", Text, nullable=False),
    Column("comment", Text, nullable=False),
    Column("created_at", Integer, nullable=False),
    Column("expired_at", Integer),  # set when expired early by a user
)

# One row per singleton job (the alert evaluator): the process holding an unexpired lease runs it.
leases = Table(
    "leases",
    metadata,
    Column("name", Text, primary_key=True),
    Column("holder", Text, nullable=False),  # host:pid:random, logged by both sides
    Column("acquired_at", Integer, nullable=False),
    Column("expires_at", Integer, nullable=False),
)

# --- alert e-mail (docs/alerts.md, E-mail) -------------------------------------------------------
# The durable outbox: a notification is a row before it is sent, and marked sent only after the
# SMTP server accepted it. ``recipients`` and ``alerts`` are JSON lists, ``images`` a JSON object
# (content id → base64 PNG) the message's HTML refers to. Times are unix seconds.
notifications = Table(
    "notifications",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("group_key", Text, nullable=False),
    Column("kind", Text, nullable=False),  # firing, resolved, digest (alerts test-email sends directly, unrecorded)
    Column("status", Text, nullable=False),  # queued, sent, failed, suppressed
    Column("recipients", Text, nullable=False),
    Column("subject", Text, nullable=False),
    Column("body_text", Text, nullable=False),
    Column("body_html", Text, nullable=False),
    Column("images", Text, nullable=False),
    Column("alerts", Text, nullable=False),  # JSON list of {rule, target, model, state, severity}
    Column("created_at", Integer, nullable=False),
    Column("due_at", Integer, nullable=False),  # the next attempt (queued only)
    Column("attempts", Integer, nullable=False),
    Column("last_error", Text),
    Column("sent_at", Integer),
    Column("answer", Text),  # the server's answer to the message, once accepted
    Column("channel", Text, nullable=False, server_default="email"),  # email, alertmanager, webhook
)

# Every attempt to send a notification, with the server's answer or the error: the retries of the log.
notification_attempts = Table(
    "notification_attempts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("notification_id", Integer, ForeignKey("notifications.id"), nullable=False),
    Column("at", Integer, nullable=False),
    Column("ok", Integer, nullable=False),  # 1 accepted, 0 failed
    Column("answer", Text, nullable=False),  # the server's answer, or the one-line error
)

# The notification log per group (Alertmanager's nflog): which alerts were last notified as firing
# (alert key → firing_since), which were held back by a silence, and when the group was last
# notified. Updated in the transaction that queues the notification.
notification_groups = Table(
    "notification_groups",
    metadata,
    Column("group_key", Text, primary_key=True),
    Column("recipients", Text, nullable=False),  # JSON list
    Column("firing", Text, nullable=False),  # JSON object
    Column("held", Text, nullable=False),  # JSON object: alert key → firing_since, held back and logged
    Column("last_notified_at", Integer),
    Column("last_notification_id", Integer),
)

# --- ad-hoc queries (docs/query.md) -------------------------------------------------------------
# The sweet-spot thresholds in effect per target, written by the collector when it starts (from
# the settings), so that the target_info view shows the numbers the banner and alerts judge by.
# target "*" holds the global [sweetspot] table, used for a target without a row of its own.
sweetspot_thresholds = Table(
    "sweetspot_thresholds",
    metadata,
    Column("target", Text, primary_key=True),
    Column("ttft_p95_slo_s", Float, nullable=False),
    Column("concurrency", Float),  # NULL: no configured sweet spot (0021_sweet_spot_unknown)
    Column("kv_warning", Float, nullable=False),
    Column("kv_critical", Float, nullable=False),
    Column("min_mbu", Float, nullable=False),  # 0018_min_mbu (was min_efficiency)
    Column("queue_growth_s", Float, nullable=False),
    Column("updated_at", Integer, nullable=False),
)

# Queries users saved from the Query page (or the CLI), by name.
saved_queries = Table(
    "saved_queries",
    metadata,
    Column("name", Text, primary_key=True),
    Column("sql", Text, nullable=False),
    Column("description", Text, nullable=False, default=""),
    Column("saved_at", Integer, nullable=False),
)

# How far `backfill --prometheus` got, per (server, selector): a second run continues from there.
backfill_progress = Table(
    "backfill_progress",
    metadata,
    Column("source", Text, primary_key=True),  # "<server URL> <selector>"
    Column("done_until", Integer, nullable=False),  # every step before it is imported
    Column("updated_at", Integer, nullable=False),
)

# --- the demo's simulated week as it is written behind the live dashboard (db/history_fill.py) ----
history_fill = Table(
    "history_fill",
    metadata,
    Column("target", Text, primary_key=True),
    Column("start_ts", Integer, nullable=False),  # the history written spans [start_ts, end_ts] (unix s)
    Column("end_ts", Integer, nullable=False),
    Column("days_total", Integer, nullable=False),
    Column("days_done", Integer, nullable=False),  # written, rolled up and judged
    Column("started_at", Float, nullable=False),  # when the fill began (unix s)
    Column("updated_at", Float, nullable=False),
    Column("eta_at", Float),  # when it should end (unix s); NULL until a first day was timed
    Column("finished_at", Float),  # NULL while it runs
)

# --- rows dated after the clock, moved aside when it stepped back (db/future.py, 0075_future_rows) --
# A clock that ran ahead and was set back left rows "from the future": the writer moves a target's
# rows dated at or after its new round here (each as a JSON object, blobs as hex), so storage resumes
# at once instead of skipping rounds until the clock passes them. Kept for inspection; nothing reads them.
future_rows = Table(
    "future_rows",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("moved_at", Integer, nullable=False),  # the round that found them (unix s, the clock set back)
    Column("table_name", Text, nullable=False),
    Column("target", Text, nullable=False),
    Column("ts", Integer, nullable=False),
    Column("row", Text, nullable=False),  # JSON object: the row as it was
)

# --- the sweet-spot verdict of each minute (db/verdicts.py) ---------------------------------------
# Written by the alert evaluator, one row per target and minute, with the target's effective rules
# (overrides included); the query views, the digest and the Overview read it. Kept as long as the
# minute rollups (rollup_retention_s).
verdicts = Table(
    "verdicts",
    metadata,
    Column("target", Text, primary_key=True),
    Column("ts", Integer, primary_key=True),  # the minute's start (unix s, a multiple of 60)
    Column("state", Text, nullable=False),  # in_sweet_spot, outside or no_data
    Column("rules_held", Text, nullable=False),  # names of the rules that held, comma-separated, in rule order
    Column("held_values", Text, nullable=False),  # JSON object: each rule that held → its value (unscaled)
    Column("evaluated_at", Integer, nullable=False),  # the evaluation: each rule's window ended then
    Column("thresholds", Text),  # JSON object: the sweet-spot thresholds it judged by (0023_stale_after); NULL before
    # JSON object: each default rule that could not judge the minute → why (0051_cannot_tell); NULL before
    Column("not_judged", Text),
)

# --- the collector's delivery (db/delivery.py) ----------------------------------------------------------
# Where the process holding the evaluator's lease sends notifications, stored at its every evaluation:
# ``status`` and the UI, run elsewhere with other settings, show this, not their own (0050_delivery_state).
delivery_state = Table(
    "delivery_state",
    metadata,
    Column("name", Text, primary_key=True),  # "delivery": one row
    Column("holder", Text, nullable=False),  # the lease holder that stored it (host:pid:random)
    Column("written_at", Integer, nullable=False),
    Column("line", Text, nullable=False),  # "e-mail on: host:587 (starttls) to ops@…; also to Alertmanager …"
    Column("channels", Text, nullable=False),  # JSON list: email, alertmanager, webhook (empty: none on)
)

# --- imported benchmark files (`bench import`, db/benches.py) ----------------------------------------
# One row per file imported (its tool, when it ran, its settings as JSON) and one per load level in it.
bench_runs = Table(
    "bench_runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("tool", Text, nullable=False),  # "vllm bench serve" or "guidellm"
    Column("run_at", Float, nullable=False),  # unix s the benchmark ran (the file's date)
    Column("imported_at", Float, nullable=False),
    Column("target", Text, nullable=True),  # the target whose server it measured
    Column("model", Text, nullable=False),
    Column("file_name", Text, nullable=False),
    Column("settings", Text, nullable=False),  # JSON object: the tool's settings of the run
)

bench_points = Table(
    "bench_points",
    metadata,
    Column("run_id", Integer, ForeignKey("bench_runs.id"), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("label", Text, nullable=False),
    Column("concurrency", Float, nullable=False),
    Column("concurrency_source", Text, nullable=False),
    Column("tokens_per_s", Float, nullable=False),
    Column("requests", Integer, nullable=False),
    Column("failed", Integer, nullable=False),
    Column("duration_s", Float),
    Column("request_rate", Float),
    Column("ttft_p95_s", Float),
    Column("itl_p95_s", Float),
)

# --- configuration epochs (db/epochs.py) -------------------------------------------------------------
# One row each time a target's configuration as its /metrics page tells it changed (cache_config_info's
# watched labels, the models served, the engine), or its process restarted; the first row of a target
# is its first configuration seen. Written by the writer in the round's transaction.
config_epochs = Table(
    "config_epochs",
    metadata,
    Column("target_id", Integer, ForeignKey("targets.id"), primary_key=True),
    Column("ts", Integer, primary_key=True),  # the round that first showed it (unix s)
    Column("kind", Text, nullable=False),  # first, config, restart, or config+restart
    Column("config", Text, nullable=False),  # JSON object: the watched values from then on
    Column("changes", Text, nullable=False),  # JSON list of [key, before, after] (empty for a restart alone)
    Column("process_start_s", Float),  # process_start_time_seconds then (NULL: not exposed)
)

# --- learned sweet spots (db/learned.py) ----------------------------------------------------------------
# What the learner found for a target, each time the alert evaluator learned it (every 10 minutes): the
# knee (NULL: it refused, ``reason`` says why), the plateau, what it rests on, the fitted levels, and the
# configuration epoch and models it was learned under. Every surface reads the latest row.
learned_sweet_spots = Table(
    "learned_sweet_spots",
    metadata,
    Column("target", Text, primary_key=True),
    Column("learned_at", Integer, primary_key=True),  # the evaluation that learned it (unix s)
    Column("knee", Integer),  # NULL: the learner refused
    Column("plateau", Float),  # output tok/s of the fitted curve's plateau (NULL: no curve)
    Column("minutes", Float, nullable=False),  # busy minutes it rests on
    Column("levels", Integer, nullable=False),  # concurrency levels it rests on
    Column("reason", Text, nullable=False),  # how the knee was found, or what is missing
    Column("more_hours", Float),  # refused: about how many more hours of traffic it needs
    Column("ttft_slo_s", Float, nullable=False),  # the SLO its TTFT cap judged by
    Column("curve", Text, nullable=False),  # JSON list of [concurrency, tok/s, fitted tok/s, minutes, TTFT P95 or null]
    Column("config_epoch", Integer),  # ts of the target's configuration epoch then (NULL: none stored)
    Column("models", Text),  # the models its page served then (that epoch's config), comma-separated
)
