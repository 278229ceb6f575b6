"""The stable views users query (docs/query.md): their SQL, and the one table of their columns.

:data:`VIEWS` is the only description of the views: the Query page's schema browser, ``python -m
app query --schema`` and docs/query.md's reference (:func:`reference_markdown`) are generated from
it, and a test fails when a view's real columns or the docs drift from it.

The views read the internal tables (docs/storage.md) and never expose the packed histogram encoding
except as an opaque pair (``<h>_bounds``, ``<h>_buckets``) that only ``histogram_quantile`` reads.
Rates divide a period's increases by the time its target's rounds cover (``covered_s``), as the
facade does; quantiles interpolate as :mod:`db.quantiles`. On SQLite they live beside the tables;
on PostgreSQL in the ``sweetspot_query`` schema, the only schema on a user's search path.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, inspect, text

from collectors.catalogue import CATALOGUE
from core import mbu
from db.figures import FIGURES, Figure
from db.query_functions import SCHEMA
from db.verdicts import CANNOT_TELL, IN_SWEET_SPOT, NO_DATA, NOT_STORED, OUTSIDE


@dataclass(frozen=True)
class Col:
    name: str
    unit: str
    meaning: str


@dataclass(frozen=True)
class View:
    name: str
    meaning: str
    columns: tuple[Col, ...]
    needs_table: str = ""  # created only when this table exists (a feature merged later)


TIME = Col("time", "ISO 8601 UTC", "the period's start as text, e.g. 2026-12-01T20:15:00Z")


# Per-model figures the minutes and hours views write by hand (with their history of names and
# their own words); every other one of the figures table comes from its row (:func:`table_figures`).
_BY_HAND = frozenset({"tokens_per_s", "prompt_tokens_per_s", "requests_per_s", "steps_per_s",
                      "running_avg", "running_max", "waiting_avg", "waiting_max", "kv_cache_usage_max",
                      *(f"{h}_p{q}_s" for h in ("ttft", "itl", "e2e") for q in (50, 95, 99))})  # fmt: skip
_KINDS = {s.key: s.kind for s in CATALOGUE}
_GAUGES = ("gauge_avg", "gauge_max")
_HOW = {"quantile": "the buckets interpolated", "rate": "increase ÷ covered_s",
        "gauge_avg": "average over the scrapes", "gauge_max": "maximum over the scrapes"}  # fmt: skip


def table_figures() -> tuple[Figure, ...]:
    """The figures table's per-model rates, quantiles and gauges the views compute from its rows: a
    new catalogue rate or quantile, or a gauge row that rules may use (``help``), is a column of
    ``minutes`` and ``hours`` with no edit here."""
    return tuple(f for f in FIGURES if f.rows == "model" and f.name not in _BY_HAND
                 and (f.compute in ("rate", "quantile") or (f.compute in _GAUGES and f.help)))  # fmt: skip


def _table_columns() -> tuple[Col, ...]:
    return tuple(Col(f.name, f.unit, f"{f.help or f.label or f.name.replace('_', ' ')} (figures table: {_HOW[f.compute]})")
                 for f in table_figures())  # fmt: skip


def _table_sql() -> tuple[list[str], list[str], list[str]]:
    """(the base rows' columns, the views' expressions, the bucket layouts' joins) of table_figures()."""
    base: list[str] = []
    exprs: list[str] = []
    joins: list[str] = []
    for f in table_figures():
        key = f.inputs[0]
        if f.compute == "quantile":
            if f"l_{key}" not in " ".join(joins):
                joins.append(f"LEFT JOIN bucket_layouts l_{key} ON l_{key}.id = r.{key}_layout")
                base.append(f"l_{key}.bounds AS {key}_bounds, r.{key}_buckets")
            exprs.append(f"bucket_quantile({f.quantile}, b.{key}_bounds, b.{key}_buckets) AS {f.name}")
        elif f.compute == "gauge_avg":  # the rollup keeps each gauge's sum and max over its scrapes
            base.append(f"{_real(f'r.{key}_sum')} / r.samples AS {f.name}")
            exprs.append(f"b.{f.name}")
        elif f.compute == "gauge_max":
            base.append(f"r.{key}_max AS {f.name}")
            exprs.append(f"b.{f.name}")
        else:
            column = f"{key}_count" if _KINDS[key] == "histogram" else key
            base.append(f"r.{column} AS {f.name}_increase")
            exprs.append(f"b.{f.name}_increase / b.covered_s AS {f.name}")
    return base, exprs, joins


_PCT = {50: "median", 95: "95th percentile", 99: "99th percentile"}


def _figures(period: str) -> tuple[Col, ...]:
    p = period
    quantiles = tuple(
        Col(f"{h}_p{q}_s", "s", f"{label}, {_PCT[q]} over the {p}: {q} % of requests took less (Prometheus histogram_quantile; NULL: no request)")
        for h, label in (("ttft", "time to first token (TTFT)"), ("itl", "inter-token latency (ITL: the gap between two output tokens)"),
                          ("e2e", "end-to-end latency (request sent to last token)"))
        for q in (50, 95, 99)
    )
    buckets = tuple(
        c
        for h in ("ttft", "itl", "e2e")
        for c in (
            Col(f"{h}_bounds", "JSON", f"{h.upper()} histogram bucket bounds of the {p}: pass to histogram_quantile"),
            Col(f"{h}_buckets", "opaque", f"{h.upper()} bucket increases of the {p}: pass to histogram_quantile"),
        )
    )
    return (
        Col("target", "", "target name (targets[].name)"),
        Col("model", "", "model name as vLLM labels it"),
        Col("ts", "unix s", f"the {p}'s start (UTC), a multiple of its length"),
        TIME,
        Col("samples", "scrapes", f"successful scrapes of the model in the {p}"),
        Col("covered_s", "s", f"time the {p}'s increases cover (the target's rounds; the {p}'s length when unknown)"),
        Col("tokens_per_s", "tok/s", "output (generation) tokens per second"),
        Col("prompt_tokens_per_s", "tok/s", "prompt tokens per second"),
        Col("requests_finished", "requests", f"requests finished successfully in the {p}"),
        Col("requests_per_s", "req/s", "requests finished per second"),
        Col("preemptions", "preemptions", f"preemptions in the {p}: requests the engine paused and must recompute because its KV cache"
            " (the memory holding running requests' context) ran out; any is work redone"),
        Col("running_avg", "requests", "running requests, average over the scrapes"),
        Col("running_max", "requests", "running requests, maximum"),
        Col("waiting_avg", "requests", "requests waiting in vLLM, average"),
        Col("waiting_max", "requests", "requests waiting in vLLM, maximum"),
        Col("queue_depth_max", "requests", "gateway queue depth, maximum (the target's; NULL: no gateway source)"),
        Col("kv_cache_usage_max", "fraction 0–1", "KV-cache usage (share of the memory holding running requests' context), maximum"),
        *quantiles,
        Col("ttft_slo_attainment_pct", "%", f"share of the {p}'s requests with TTFT within the target's ttft_p95_slo_s"
            " (target_info), from the buckets: exact at a bucket bound, else interpolated (docs/metrics.md); NULL: no request"),
        Col("gpu_memory_used_gib", "GiB (2³⁰ B)", "GPU memory used, summed over the target's GPUs (averages); GiB as"
            " nvidia-smi and NVML count it"),
        Col("dram_bw_gbps", "GB/s", "GPU memory (DRAM) traffic the hardware measured, GB/s (10⁹ B/s), summed over the target's GPUs"
            " (NULL: no bandwidth source)"),
        Col("dram_bw_pct", "% of peak", "GPU memory (DRAM) traffic as % of the GPUs' peak bandwidth, mean over the target's GPUs"),
        Col("steps_per_s", "steps/s", "engine steps per second (one step adds at most one token to each running request):"
            " vllm:iteration_tokens_total's count"),
        Col("mbu_pct", "% of peak", "model bandwidth utilisation (MBU): bytes the model needs per second (weights and KV cache; vLLM's"
            " byte counters, else modelled per step) as % of peak bandwidth; never a hardware reading (NULL: no source;"
            " docs/ceiling.md)"),
        Col("mbu_source", "", "where mbu_pct came from: engine estimate (vLLM byte counters) or modelled"),
        Col("dram_bw_source", "", "where dram_bw_pct came from: NVML's GPU performance monitoring (GPM) or DCGM's DRAM-active field"
            " (NULL: no reading)"),
        Col("overhead_traffic_gbps", "GB/s per GPU", "memory traffic beyond what the model needs: (dram_bw_pct − mbu_pct) ÷ 100 × peak bandwidth"),
        Col("overhead_ratio", "×", "dram_bw_pct ÷ mbu_pct: how many times the model's bytes the GPUs moved"),
        Col("ceiling_steps_per_s", "steps/s", "ceiling: at most this many engine steps/s, bandwidth ÷ model weight bytes per GPU (each step reads every"
            " weight once; NULL: an input is missing, see target_info)"),
        Col("ceiling_share", "fraction", "share of the ceiling: tokens_per_s ÷ ceiling_steps_per_s (one step adds up to one token per running request,"
            " so it can pass 1: not an efficiency)"),
        *_verdict_columns(period),
        *buckets,
        *_table_columns(),
    )


def _verdict_columns(period: str) -> tuple[Col, ...]:
    # The alert evaluator's stored verdicts (db/verdicts.py): the views judge nothing themselves.
    if period == "minute":
        return (
            Col("in_sweet_spot", "1/0/NULL", "the target's verdict of the minute: 1 in the sweet spot, 0 outside, "
                "NULL cannot tell, no data or no verdict stored: no collector judged that minute (the verdict_history view)"),
            Col("verdict", "", "in_sweet_spot, outside, cannot_tell (a rule could not be judged), no_data, or 'no verdict "
                "stored' (no collector judged that minute:"
                " none ran, or the data was backfilled)"),
            Col("rules_broken", "", "the rules whose condition held that minute (what broke), comma-separated (NULL: no "
                "verdict stored)"),
        )
    return (
        Col("in_sweet_spot", "1/0/NULL", "from the hour's minute verdicts: 0 when a minute was outside, 1 when "
            "none was, none could not tell and one was in the sweet spot, NULL otherwise"),
        Col("verdict", "", "outside, cannot_tell, in_sweet_spot or no_data by the same rule (the first that a minute "
            "had, in that order), or 'no verdict stored' (no minute of the hour"
            " was judged)"),
    )  # fmt: skip


def _gpu_figures(period: str) -> tuple[Col, ...]:
    return (
        Col("target", "", "target name"),
        Col("gpu_uuid", "", "GPU UUID"),
        Col("gpu_index", "", "GPU index on its host"),
        Col("gpu_name", "", "GPU model name"),
        Col("host", "", "host name (dcgm) or empty"),
        Col("ts", "unix s", f"the {period}'s start (UTC)"),
        TIME,
        Col("samples", "readings", f"readings in the {period}"),
        Col("memory_used_gib", "GiB (2³⁰ B)", "memory used, average (GiB, as nvidia-smi counts it)"),
        Col("memory_total_gib", "GiB (2³⁰ B)", "memory total (a \"32 GB\" card reads 32 GiB)"),
        Col("memory_busy_pct", "% of time", "NVML memory-busy time (not bandwidth), average"),
        Col("dram_bw_pct", "% of peak", "GPU memory (DRAM) traffic as % of peak bandwidth, average (NULL: no bandwidth source)"),
        Col("dram_bw_gbps", "GB/s", "GPU memory (DRAM) traffic, GB/s (10⁹ B/s) = dram_bw_pct ÷ 100 × peak_bw_gbps"),
        Col("peak_bw_gbps", "GB/s", "the GPU's peak memory bandwidth, GB/s (10⁹ B/s) as NVIDIA's datasheets give it"),
        Col("power_w", "W", "power draw, average"),
        Col("temperature_c", "°C", "temperature, average"),
        Col("temperature_c_max", "°C", "temperature, maximum"),
    )


def _at(name: str, meaning: str) -> tuple[Col, Col]:
    return Col(f"{name}_at", "unix s", meaning), Col(f"{name}_time", "ISO 8601 UTC", f"{name}_at as text")


VIEWS: tuple[View, ...] = (
    View(
        "target_info",
        "one row per target: sources, ceiling and the sweet-spot thresholds the views judge it by",
        (
            Col("target", "", "target name"),
            Col("vllm_url", "", "vLLM metrics URL"),
            Col("gateway_source", "", "gateway queue-depth source, as configured"),
            Col("gpu_source", "", "GPU figures source (nvml, dcgm, none)"),
            Col("models", "", "models seen"),
            Col("gpus", "", "GPUs seen"),
            Col("weight_gb", "GB (10⁹ B)", "model weight size as configured (targets[].ceiling.weight_gb, 10⁹ bytes like"
                " bandwidth_gbps: the ceiling divides one by the other; memory columns elsewhere are GiB)"),
            Col("tensor_parallel", "GPUs", "tensor-parallel size: GPUs the weights are split over (ceiling input)"),
            Col("bandwidth_gbps", "GB/s", "peak bandwidth per GPU the ceiling uses (config, else NVML's formula; NULL: none)"),
            Col("kv_bytes_per_token", "bytes", "configured KV-cache bytes per token of context (used to model the bytes each step reads)"),
            Col("ceiling_steps_per_s", "steps/s", "ceiling: bandwidth_gbps ÷ (weight_gb ÷ tensor_parallel), a bound on engine steps/s (each step reads"
                " every weight once; NULL: an input is missing)"),
            Col("ttft_p95_slo_s", "s", "time to first token (TTFT), 95th percentile: above this leaves the sweet spot"),
            Col("concurrency", "requests", "running requests (average) above this leave the sweet spot"),
            Col("kv_warning", "fraction 0–1", "KV-cache usage at or above this leaves the sweet spot"),
            Col("min_mbu", "fraction 0–1", "model bandwidth utilisation (mbu_pct ÷ 100) under this while requests wait leaves the sweet spot"),
            *_at("thresholds_updated", "when the collector last wrote the thresholds"),
        ),
    ),
    View("minutes", "one row per target, model and minute (minute rollups, kept rollup_retention_s)", _figures("minute")),
    View("hours", "one row per target, model and hour (hourly rollups, kept hourly_retention_s)", _figures("hour")),
    View(
        "verdict_history",
        "one row per target and minute the alert evaluator judged, with the target's effective rules "
        "(kept rollup_retention_s)",
        (
            Col("target", "", "target name"),
            Col("ts", "unix s", "the minute's start (UTC)"),
            TIME,
            Col("state", "", "in_sweet_spot, outside, cannot_tell or no_data, as status says it"),
            Col("rules_broken", "", "the rules whose condition held (what broke), comma-separated in rule order "
                "(empty: none)"),
            Col("broken_values", "JSON", "each rule that broke → its value, unscaled (e.g. kv_cache_usage_max as 0–1)"),
            *_at("evaluated", "the evaluation that judged the minute: each rule's window ended then"),
            Col("not_judged", "JSON", "each rule that could not judge the minute → why (\"\": the window's own reason, an "
                "outage inside it); NULL when every rule was judged, or stored before the verdict said so"),
        ),
    ),
    View("gpu_minutes", "one row per GPU and minute", _gpu_figures("minute")),
    View("gpu_hours", "one row per GPU and hour", _gpu_figures("hour")),
    View(
        "alert_history",
        "one row per alert state transition (the alert engine writes them)",
        (
            Col("id", "", "transition id, increasing"),
            Col("rule", "", "alert rule name"),
            Col("target", "", "target name"),
            Col("model", "", "model, empty for the whole target"),
            Col("from_state", "", "state before: inactive, pending, firing, resolved, no_data, error"),
            Col("to_state", "", "state after"),
            *_at("changed", "when the state changed"),
            Col("value", "the rule's unit", "the figure that decided"),
            Col("threshold", "the rule's unit", "the threshold it was compared with"),
            Col("severity", "", "warning or critical"),
            Col("summary", "", "one line: which clause, value against threshold"),
            Col("recommendation", "", "what to do"),
            Col("labels", "JSON", "the alert's labels"),
        ),
    ),
    View(
        "silence_list",
        "one row per silence",
        (
            Col("id", "", "silence id"),
            Col("matchers", "JSON", "rule/target/model/severity → exact value"),
            *_at("starts", "start"),
            *_at("ends", "end"),
            Col("author", "", "who silenced"),
            Col("comment", "", "why"),
            *_at("created", "when it was created"),
            *_at("expired", "when a user expired it early (NULL: not expired early)"),
        ),
    ),
    View(
        "notification_list",
        "one row per alert e-mail in the outbox",
        (
            Col("id", "", "notification id"),
            Col("group_key", "", "the alert group it belongs to"),
            Col("kind", "", "what it says (firing, resolved, ...)"),
            Col("status", "", "delivery status"),
            Col("recipients", "", "addresses"),
            Col("subject", "", "e-mail subject"),
            *_at("created", "when it was queued"),
            *_at("due", "when it is (was) due"),
            Col("attempts", "", "delivery attempts"),
            Col("last_error", "", "last delivery error"),
            *_at("sent", "when it was sent (NULL: not sent)"),
        ),
        needs_table="notifications",
    ),
    View(
        "sweeps",
        "one row per load sweep run",
        (
            Col("run_id", "", "sweep id"),
            *_at("started", "when the sweep started"),
            Col("url", "", "the endpoint swept"),
            Col("model", "", "model"),
            Col("mix", "", "request mix"),
            Col("ttft_slo_s", "s", "time-to-first-token objective the sweep judged by"),
            Col("recommendation", "JSON", "the recommended operating point"),
        ),
    ),
    View(
        "sweep_results",
        "one row per load sweep level (concurrency step)",
        (
            Col("run_id", "", "sweep id"),
            Col("started_time", "ISO 8601 UTC", "when the sweep started"),
            Col("model", "", "model"),
            Col("position", "", "level order within the sweep"),
            Col("concurrency", "requests", "concurrency of the level"),
            Col("duration_s", "s", "level length"),
            Col("requests", "requests", "requests completed"),
            Col("errors", "requests", "requests failed"),
            Col("tokens_per_s", "tok/s", "output tokens per second"),
            Col("qps", "req/s", "requests per second"),
            Col("ttft_p50_s", "s", "time to first token (TTFT), median"),
            Col("ttft_p95_s", "s", "TTFT, 95th percentile"),
            Col("ttft_p99_s", "s", "TTFT, 99th percentile"),
            Col("itl_p95_s", "s", "inter-token latency (gap between two output tokens), 95th percentile"),
            Col("e2e_mean_s", "s", "end-to-end latency, mean"),
            Col("e2e_p95_s", "s", "end-to-end latency, 95th percentile"),
            Col("error_rate", "fraction", "errors ÷ requests"),
        ),
    ),
    View(
        "config_changes",
        "one row per configuration epoch of a target: its first configuration seen, each change of a watched "
        "cache_config_info label, of the models or the engine, and each restart (docs/plan.md)",
        (
            Col("target", "", "target name"),
            Col("ts", "unix s", "the round that first showed it"),
            TIME,
            Col("kind", "", "first, config, restart or config+restart"),
            Col("changes", "JSON", "list of [key, before, after] (empty for a restart alone)"),
            Col("config", "JSON", "the watched values from then on"),
            Col("process_start_s", "unix s", "process_start_time_seconds then (NULL: not exposed)"),
            Col("until_ts", "unix s", "when the next epoch of the target began (NULL: the current one)"),
        ),
    ),
    View(
        "learned_history",
        "one row each time the alert evaluator learned a target's sweet spot from its traffic (every 10 minutes): "
        "how the learned knee and plateau moved, and what they rested on (docs/alerts.md)",
        (
            Col("target", "", "target name"),
            Col("learned_at", "unix s", "the evaluation that learned it"),
            TIME,
            Col("knee", "requests", "the learned sweet-spot concurrency (NULL: the learner refused; reason says why)"),
            Col("plateau_tokens_per_s", "tok/s", "the fitted curve's plateau (NULL: no curve)"),
            Col("minutes", "min", "busy minutes it rests on (faulty periods left out)"),
            Col("levels", "", "concurrency levels it rests on"),
            Col("reason", "", "how the knee was found, or what traffic it still needs"),
            Col("more_hours", "h", "refused: about how many more hours of traffic it needs"),
            Col("ttft_slo_s", "s", "the TTFT P95 SLO its cap judged by"),
            Col("curve", "JSON", "list of [concurrency, tok/s, fitted tok/s, minutes, TTFT P95 or null]"),
            Col("config_epoch", "unix s", "the target's configuration epoch then (config_changes.ts; NULL: none stored)"),
            Col("models", "", "the models its page served then, comma-separated"),
        ),
    ),
)
BY_NAME = {v.name: v for v in VIEWS}


GIB = 1073741824  # 2³⁰ bytes: memory in GiB, as NVML and nvidia-smi count it (bandwidth stays GB/s, 10⁹ B/s)


def _real(expr: str) -> str:
    return f"CAST({expr} AS DOUBLE PRECISION)"


def _bandwidth(t: str) -> str:
    # db/ceiling.py: configured bandwidth, else the slowest NVML peak, else none (NULL: no ceiling)
    return (
        f"COALESCE({t}.bandwidth_gbps, (SELECT MIN(g.peak_bw_gbps) FROM gpus g WHERE g.target_id = {t}.id"
        f" AND g.peak_bw_gbps IS NOT NULL AND g.peak_bw_source = 'nvml-formula'))"
    )


def _ceiling(t: str) -> str:
    return f"CASE WHEN {t}.weight_gb > 0 AND {t}.tensor_parallel > 0 THEN {_bandwidth(t)} / ({t}.weight_gb / {t}.tensor_parallel) END"


# The thresholds row of a target, or the global one ("*").
_THRESHOLDS = (
    "LEFT JOIN sweetspot_thresholds th ON th.target = "
    "COALESCE((SELECT x.target FROM sweetspot_thresholds x WHERE x.target = t.name), '*')"
)


def _target_info() -> str:
    return f"""SELECT t.name AS target, t.vllm_url, t.gateway_source, t.gpu_source,
 (SELECT COUNT(*) FROM models m WHERE m.target_id = t.id) AS models,
 (SELECT COUNT(*) FROM gpus g WHERE g.target_id = t.id) AS gpus,
 t.weight_gb, t.tensor_parallel,
 {_bandwidth("t")} AS bandwidth_gbps,
 t.kv_bytes_per_token,
 {_ceiling("t")} AS ceiling_steps_per_s,
 th.ttft_p95_slo_s, th.concurrency, th.kv_warning, th.min_mbu,
 th.updated_at AS thresholds_updated_at, iso_time(th.updated_at) AS thresholds_updated_time
FROM targets t {_THRESHOLDS}"""


# One row per target, computed once per query (the GROUP BY keeps SQLite from copying its
# subqueries into every minute row): name, ceiling, model count and the thresholds in effect.
_PER_TARGET = f"""SELECT t.id, t.name, {_ceiling("t")} AS ceiling, {_bandwidth("t")} AS peak_gbps,
 CASE WHEN t.weight_gb > 0 AND t.tensor_parallel > 0 THEN t.weight_gb * 1000000000 / t.tensor_parallel END AS weight_bytes,
 t.kv_bytes_per_token / t.tensor_parallel AS kv_bytes,
 (SELECT CASE WHEN MIN(g.dram_bw_source) = 'dcgm' AND MAX(g.dram_bw_source) = 'dcgm' THEN '{mbu.DRAM_DCGM}'
   ELSE '{mbu.DRAM_GPM}' END FROM gpus g WHERE g.target_id = t.id) AS measured_source,
 (SELECT COUNT(*) FROM models cm WHERE cm.target_id = t.id) AS models,
 th.target AS th_target, th.ttft_p95_slo_s AS th_ttft, th.concurrency AS th_concurrency,
 th.kv_warning AS th_kv, th.min_mbu AS th_mbu
FROM targets t {_THRESHOLDS} GROUP BY t.id, th.target"""


def _mbu_sql() -> tuple[str, str]:
    """MBU in % of peak and its source, best first (db/mbu_figures.py; the step model of core/mbu.py
    with the engine's KV bytes per token, else the configured, per engine): the engine's bytes, the model. The KV term
    reads the tokens resident in the cache, else running × the mean context. Never the GPUs' DRAM."""
    engine = ("CASE WHEN b.peak_gbps > 0 AND COALESCE(b.engine_read_bytes, 0) + COALESCE(b.engine_write_bytes, 0) > 0"
              " THEN (COALESCE(b.engine_read_bytes, 0) + COALESCE(b.engine_write_bytes, 0)) / b.covered_s"
              " / (b.peak_gbps * 1000000000) * 100 END")
    context = ("b.request_prompt_tokens_sum / NULLIF(b.request_prompt_tokens_count, 0)"
               " + b.request_generation_tokens_sum / NULLIF(b.request_generation_tokens_count, 0) / 2")
    engines = "(CASE WHEN b.engines > 1 THEN b.engines ELSE 1 END)"
    modelled = (f"b.iteration_tokens_count / b.covered_s / {engines} * (b.weight_bytes + COALESCE(COALESCE(b.kv_resident,"
                f" b.running_avg * ({context})) / {engines} * b.kv_bytes, 0)) / (b.peak_gbps * 1000000000) * 100")
    value = f"COALESCE({engine}, {modelled})"
    source = f"CASE WHEN ({engine}) IS NOT NULL THEN '{mbu.ENGINE}' WHEN ({modelled}) IS NOT NULL THEN '{mbu.MODELLED}' END"
    return value, source


def _figures_sql(step: int) -> str:
    # The covered time of the target's rounds: the row's own when the target has one model (the
    # usual case, no lookup), else the sum over its models' rows of the period.
    covered = (
        "CASE WHEN tx.models = 1 THEN r.covered_ms ELSE (SELECT SUM(c.covered_ms) FROM model_rollups c"
        " WHERE c.step = r.step AND c.ts = r.ts AND c.model_id IN (SELECT cm.id FROM models cm WHERE cm.target_id = m.target_id)) END"
    )
    gpu = f"FROM gpu_rollups gr JOIN gpus g ON g.id = gr.gpu_id WHERE g.target_id = m.target_id AND gr.step = {step} AND gr.ts = r.ts"
    # TTFT P95 is stored with the rollup (charts read it every minute); the others on demand
    quantiles = ",\n ".join(
        "b.ttft_p95_s" if (h, q) == ("ttft", 95) else f"bucket_quantile({q / 100}, b.{h}_bounds, b.{h}_buckets) AS {h}_p{q}_s"
        for h in ("ttft", "itl", "e2e")
        for q in (50, 95, 99)
    )
    table_base, table_exprs, table_joins = _table_sql()
    layouts = ",\n ".join([*(f"l_{h}.bounds AS {h}_bounds, r.{h}_buckets" for h in ("ttft", "itl", "e2e")), *table_base])
    joins = "\n".join([*(f"LEFT JOIN bucket_layouts l_{h} ON l_{h}.id = r.{h}_layout" for h in ("ttft", "itl", "e2e")),
                        *table_joins])  # fmt: skip
    base = f"""SELECT tx.name AS target, m.name AS model, r.ts, r.samples,
 COALESCE({_real(f"NULLIF({covered}, 0)")} / 1000, {step}) AS covered_s,
 r.generation_tokens, r.prompt_tokens, r.request_success, r.preemptions,
 {_real("r.requests_running_sum")} / r.samples AS running_avg, r.requests_running_max AS running_max,
 {_real("r.requests_waiting_sum")} / r.samples AS waiting_avg, r.requests_waiting_max AS waiting_max,
 tr.queue_depth_max, r.kv_cache_usage_max,
 (SELECT SUM({_real("gr.memory_used_bytes_sum")} / gr.samples) / {GIB} {gpu}) AS gpu_memory_used_gib,
 (SELECT SUM(gr.dram_bw_util_pct_sum / gr.samples / 100 * g.peak_bw_gbps) {gpu}) AS dram_bw_gbps,
 (SELECT AVG(gr.dram_bw_util_pct_sum / gr.samples) {gpu}) AS dram_bw_pct,
 r.ttft_p95_s, tx.ceiling AS ceiling_steps_per_s, tx.th_target, tx.th_ttft, tx.th_concurrency, tx.th_kv, tx.th_mbu,
 tx.peak_gbps, tx.weight_bytes, tx.measured_source, r.engine_read_bytes, r.engine_write_bytes,
 r.iteration_tokens_count, r.request_prompt_tokens_sum, r.request_prompt_tokens_count,
 {_real("r.kv_resident_tokens_sum")} / r.samples AS kv_resident, r.engine_count_max AS engines,
 COALESCE(r.kv_token_bytes_max, tx.kv_bytes) AS kv_bytes,
 r.request_generation_tokens_sum, r.request_generation_tokens_count,
 {layouts}
FROM model_rollups r JOIN models m ON m.id = r.model_id JOIN ({_PER_TARGET}) tx ON tx.id = m.target_id
LEFT JOIN target_rollups tr ON tr.target_id = m.target_id AND tr.step = r.step AND tr.ts = r.ts
{joins}
WHERE r.step = {step}"""
    mbu_pct, mbu_source = _mbu_sql()
    figures = f"""SELECT b.target, b.model, b.ts, iso_time(b.ts) AS time, b.samples, b.covered_s,
 b.generation_tokens / b.covered_s AS tokens_per_s, b.prompt_tokens / b.covered_s AS prompt_tokens_per_s,
 b.request_success AS requests_finished, b.request_success / b.covered_s AS requests_per_s,
 b.preemptions, b.running_avg, b.running_max, b.waiting_avg, b.waiting_max, b.queue_depth_max,
 b.kv_cache_usage_max,
 {quantiles},
 100 * bucket_share(b.th_ttft, b.ttft_bounds, b.ttft_buckets) AS ttft_slo_attainment_pct,
 b.gpu_memory_used_gib, b.dram_bw_gbps, b.dram_bw_pct,
 b.iteration_tokens_count / b.covered_s AS steps_per_s, {mbu_pct} AS mbu_pct, {mbu_source} AS mbu_source,
 CASE WHEN b.dram_bw_pct IS NOT NULL THEN b.measured_source END AS dram_bw_source,
 (b.dram_bw_pct - ({mbu_pct})) / 100 * b.peak_gbps AS overhead_traffic_gbps,
 b.dram_bw_pct / NULLIF({mbu_pct}, 0) AS overhead_ratio,
 b.ceiling_steps_per_s, b.generation_tokens / b.covered_s / b.ceiling_steps_per_s AS ceiling_share,
 b.th_target, b.th_ttft, b.th_concurrency, b.th_kv, b.th_mbu,
 CASE WHEN COALESCE(b.waiting_max, 0) > COALESCE(b.queue_depth_max, 0) THEN COALESCE(b.waiting_max, 0)
   ELSE COALESCE(b.queue_depth_max, 0) END AS queued,
 b.ttft_bounds, b.ttft_buckets, b.itl_bounds, b.itl_buckets, b.e2e_bounds, b.e2e_buckets,
 {", ".join(table_exprs)}
FROM ({base}) b"""
    names = [c.name for c in _figures("minute" if step == 60 else "hour")]
    if step == 60:  # the minute's stored verdict: lookups by its key, made only for a query that reads them
        stored: Callable[[str], str] = lambda column: f"(SELECT v.{column} FROM verdicts v WHERE v.target = f.target AND v.ts = f.ts)"  # noqa: E731
        verdict = {"in_sweet_spot": _in_sweet_spot(stored("state")), "verdict": _verdict_text(stored("state")),
                   "rules_broken": stored("rules_held")}  # fmt: skip
        return f"SELECT {_select(names, verdict)}\nFROM ({figures}) f"
    # the hour's, from its minutes' (a range of the verdicts' key: one index read per hour row)
    count: Callable[[str], str] = lambda state: f"SUM(CASE WHEN v.state = '{state}' THEN 1 ELSE 0 END)"  # noqa: E731
    hour = (f"(SELECT CASE WHEN COUNT(*) = 0 THEN NULL WHEN {count(OUTSIDE)} > 0 THEN '{OUTSIDE}'"
            f" WHEN {count(CANNOT_TELL)} > 0 THEN '{CANNOT_TELL}'"
            f" WHEN {count(IN_SWEET_SPOT)} > 0 THEN '{IN_SWEET_SPOT}' ELSE '{NO_DATA}' END"
            f" FROM verdicts v WHERE v.target = h.target AND v.ts >= h.ts AND v.ts < h.ts + {step})")  # fmt: skip
    verdict = {"in_sweet_spot": _in_sweet_spot("f.v_state"), "verdict": _verdict_text("f.v_state")}
    return f"SELECT {_select(names, verdict)}\nFROM (SELECT h.*, {hour} AS v_state FROM ({figures}) h) f"


def _select(names: list[str], verdict: dict[str, str]) -> str:
    return ", ".join(f"{verdict[n]} AS {n}" if n in verdict else f"f.{n}" for n in names)


def _in_sweet_spot(state: str) -> str:
    return f"CASE {state} WHEN '{IN_SWEET_SPOT}' THEN 1 WHEN '{OUTSIDE}' THEN 0 END"


def _verdict_text(state: str) -> str:
    return f"COALESCE({state}, '{NOT_STORED}')"


def _gpu_sql(step: int) -> str:
    avg: Callable[[str], str] = lambda c: f"{_real(f'r.{c}_sum')} / r.samples"  # noqa: E731
    return f"""SELECT t.name AS target, g.uuid AS gpu_uuid, g.gpu_index, g.name AS gpu_name, g.host, r.ts,
 iso_time(r.ts) AS time, r.samples,
 {avg("memory_used_bytes")} / {GIB} AS memory_used_gib, {avg("memory_total_bytes")} / {GIB} AS memory_total_gib,
 {avg("memory_busy_pct")} AS memory_busy_pct, {avg("dram_bw_util_pct")} AS dram_bw_pct,
 {avg("dram_bw_util_pct")} / 100 * g.peak_bw_gbps AS dram_bw_gbps, g.peak_bw_gbps,
 {avg("power_w")} AS power_w, {avg("temperature_c")} AS temperature_c, r.temperature_c_max
FROM gpu_rollups r JOIN gpus g ON g.id = r.gpu_id JOIN targets t ON t.id = g.target_id WHERE r.step = {step}"""


def _times(*names: str) -> str:
    return ", ".join(f"{n}_at, iso_time({n}_at) AS {n}_time" for n in names)


SQL: dict[str, str] = {
    "target_info": _target_info(),
    "minutes": _figures_sql(60),
    "hours": _figures_sql(3600),
    "gpu_minutes": _gpu_sql(60),
    "gpu_hours": _gpu_sql(3600),
    # "held" is the evaluator's word (a rule's condition holds: it fires); read as "kept", it said the
    # opposite of what it lists, so the views say what broke
    "verdict_history": "SELECT target, ts, iso_time(ts) AS time, state, rules_held AS rules_broken,"
    " held_values AS broken_values, evaluated_at,"
    " iso_time(evaluated_at) AS evaluated_time, not_judged FROM verdicts",
    "alert_history": "SELECT id, rule, target, model, from_state, to_state, at AS changed_at,"
    " iso_time(at) AS changed_time, value, threshold, severity, summary, recommendation, labels FROM alert_transitions",
    "silence_list": f"SELECT id, matchers, {_times('starts', 'ends')}, author, comment,"
    f" {_times('created', 'expired')} FROM silences",
    "notification_list": f"SELECT id, group_key, kind, status, recipients, subject, {_times('created', 'due')},"
    f" attempts, last_error, {_times('sent')} FROM notifications",
    "sweeps": "SELECT id AS run_id, started_at, iso_time(started_at) AS started_time, url, model, mix, ttft_slo_s,"
    " recommendation FROM sweep_runs",
    "sweep_results": "SELECT l.run_id, iso_time(s.started_at) AS started_time, s.model, l.position, l.concurrency,"
    " l.duration_s, l.requests, l.errors, l.tokens_per_s, l.qps, l.ttft_p50_s, l.ttft_p95_s, l.ttft_p99_s,"
    " l.itl_p95_s, l.e2e_mean_s, l.e2e_p95_s, l.error_rate FROM sweep_levels l JOIN sweep_runs s ON s.id = l.run_id",
    "learned_history": "SELECT target, learned_at, iso_time(learned_at) AS time, knee, plateau AS plateau_tokens_per_s,"
    " minutes, levels, reason, more_hours, ttft_slo_s, curve, config_epoch, models FROM learned_sweet_spots",
    "config_changes": "SELECT t.name AS target, e.ts, iso_time(e.ts) AS time, e.kind, e.changes, e.config,"
    " e.process_start_s, (SELECT MIN(n.ts) FROM config_epochs n WHERE n.target_id = e.target_id AND n.ts > e.ts)"
    " AS until_ts FROM config_epochs e JOIN targets t ON t.id = e.target_id",
}


def view_hash(name: str) -> str:
    """A short hash of a view's SQL as the code writes it (PostgreSQL keeps it as the view's comment)."""
    return "sweetspot:" + hashlib.sha256(SQL[name].encode()).hexdigest()[:16]


def stale_views(conn: Connection) -> list[str]:
    """The views present whose SQL is not the code's: SQLite keeps each view's text (its copy is
    compared), PostgreSQL only a normalised one (the hash in the view's comment is compared)."""
    present = views_present(conn)
    if conn.dialect.name == "postgresql":
        stored = {name: conn.execute(text(f"SELECT obj_description('{SCHEMA}.{name}'::regclass, 'pg_class')")).scalar()
                  for name in present}  # fmt: skip
        return [name for name in present if stored[name] != view_hash(name)]
    rows = {name: sql for name, sql in conn.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'view'"))}
    return [name for name in present if not str(rows.get(name) or "").endswith(f" AS {SQL[name]}")]


def create_views(conn: Connection) -> list[str]:
    """Create every missing view whose tables exist (PostgreSQL: in ``sweetspot_query``, with its
    functions when they are not there yet), after dropping them all when one's SQL is not the
    code's (:func:`stale_views`: a view changed by a new version is rebuilt at the writer's start,
    with no numbered migration); return the names created."""
    if stale_views(conn):
        drop_views(conn)
    present = set(views_present(conn))
    missing = [v for v in VIEWS if v.name not in present and (not v.needs_table or _has_columns(conn, v))]
    if not missing:
        return []
    postgres = conn.dialect.name == "postgresql"
    if postgres:
        from db.query_functions import POSTGRES_DDL

        if conn.execute(text(f"SELECT to_regtype('{SCHEMA}.histogram_state')")).scalar() is None:
            for statement in POSTGRES_DDL:  # (its type and aggregate cannot be created twice)
                conn.execute(text(statement))
        # names in the views resolve now (to the tables in public, the functions here) and stay bound
        conn.execute(text(f"SET LOCAL search_path TO {SCHEMA}, public"))
    for view in missing:
        name = f"{SCHEMA}.{view.name}" if postgres else view.name
        conn.execute(text(f"CREATE VIEW {name} AS {SQL[view.name]}"))
        if postgres:
            conn.execute(text(f"COMMENT ON VIEW {name} IS '{view_hash(view.name)}'"))
    if postgres:
        conn.execute(text("SET LOCAL search_path TO DEFAULT"))
    return [v.name for v in missing]


def _has_columns(conn: Connection, view: View) -> bool:
    # A table another branch adds: its view is made only when every column it reads is there, so a
    # differing table skips the view instead of failing the migration.
    if not inspect(conn).has_table(view.needs_table):
        return False
    have = {c["name"] for c in inspect(conn).get_columns(view.needs_table)}
    wanted = {c.name.removesuffix("_time") for c in view.columns if not c.name.endswith("_time")}
    return wanted <= have


def views_present(conn: Connection) -> list[str]:
    """Names of the views this database holds (the conditional ones only when created)."""
    if conn.dialect.name == "postgresql":
        names = set(inspect(conn).get_view_names(schema=SCHEMA))
    else:
        names = set(inspect(conn).get_view_names())
    return [v.name for v in VIEWS if v.name in names]


def drop_views(conn: Connection) -> None:
    """Drop every query view (a later migration that changes one drops and recreates them)."""
    prefix = f"{SCHEMA}." if conn.dialect.name == "postgresql" else ""
    for name in reversed(views_present(conn)):
        conn.execute(text(f"DROP VIEW {prefix}{name}"))


def reference_markdown() -> str:
    """The views' reference in docs/reference.md (generated: ``make docs``, app/reference_doc.py)."""
    out = []
    for view in VIEWS:
        when = f" Present once the `{view.needs_table}` table exists (see below)." if view.needs_table else ""
        out += [f"### `{view.name}`", "", f"{view.meaning[0].upper()}{view.meaning[1:]}.{when}", ""]
        out += ["| column | unit | meaning |", "|---|---|---|"]
        out += [f"| `{c.name}` | {c.unit} | {c.meaning} |" for c in view.columns]
        out.append("")
    return "\n".join(out)
