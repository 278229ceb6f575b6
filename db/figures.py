"""Every figure Sweetspot shows, said once: how it is computed, from what, how it combines, and how
it is presented (unit, scale, label, help, the hint shown when its metric is missing).

The query facade's engine (db/queries.py), ``status``'s lines, the names alert rules may use
(app/alerts/names.py), the Targets page's missing-metric hints, the panels' extra lines (a row's
``panel``: app/ui/charts.py), the query views' columns and the tables of docs/reference.md
(:func:`alert_names_markdown`, :func:`status_markdown`; ``make docs``) are derived from
:data:`FIGURES`. The typed fields of its figures are :class:`EngineFigures`, below, so a new figure
is one edit of this file; tests/test_figures.py holds the records and this table in step.

Rate and quantile rows come from the catalogue (collectors/catalogue.py: a counter's ``rate``, a
histogram's ``quantiles``): a catalogue line with ``rate=`` is a figure without a line here; a row
here adds only how it is presented. Values are None where there is no data (docs/storage.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from collectors.catalogue import CATALOGUE
from core.settings import NO_CEILING
from db import derived

# rate: a counter's increase ÷ the time the rounds cover; quantile: a histogram's, every model's
# buckets merged; gauge_avg / gauge_max: a gauge over the step; ratio: one counter's increase ÷
# another's; count: a counter's increase itself; derived: a function of other figures (``fn``);
# record: computed where the result record is built (ceiling, health, engine: db/queries.py);
# share: a histogram's share of observations within the target's threshold (db/quantiles.py
# attainment_matrix; the TTFT SLO).
Compute = Literal["rate", "quantile", "gauge_avg", "gauge_max", "ratio", "count", "derived", "record", "share"]


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure. ``inputs``: the stored columns it reads (catalogue keys, ``covered_ms``);
    ``across``: how the values of several models (and engines) of a target combine, "sum" or "max"
    (a server-wide value such as KV usage is the largest model's, not a sum). ``scale`` turns the
    stored value into ``unit`` (100 for a 0–1 ratio shown in %; None: a timestamp). ``label``: its
    line in ``status`` ("" = not shown there); ``help``: its meaning as an alert-rule name ("" =
    rules cannot use it); ``hint``: why its metric may be missing though the engine is healthy."""

    name: str
    compute: Compute
    inputs: tuple[str, ...] = ()
    across: Literal["sum", "max"] = "sum"
    unit: str = ""
    scale: float | None = 1.0
    label: str = ""
    help: str = ""
    hint: str = ""
    quantile: float = 0.0
    rows: Literal["model", "target"] = "model"  # model rows, or the target's own (scrapes, gateway)
    fallback: str = ""  # ratio: a gauge averaged over the step where the counters are absent (SGLang)
    fn: Callable[[dict[str, np.ndarray]], np.ndarray | None] | None = None  # derived: from the step arrays
    # the Overview panel (app/ui/charts.py PANELS, drawn by the dashboard and the alert e-mail) that
    # draws it as a line in the panel's own unit, and the line's legend ("" = its label)
    panel: str = ""
    line: str = ""
    # its gauge on the collector's own /metrics (app/telemetry.py), a name Grafana dashboards keep; a
    # gauge row rules may use is exported without one, as ``sweetspot_<name>`` (telemetry.metric_name)
    metric: str = ""

    @property
    def column(self) -> str:
        """A gauge's column in the reduced rows (the facade's per-step sums and maxima)."""
        return f"{self.inputs[0]}_{'sum' if self.compute == 'gauge_avg' else 'max'}"


def _from_catalogue(
    name: str, *, unit: str = "", scale: float | None = 1.0, label: str = "", help: str = "", hint: str = "",
    panel: str = "", line: str = "", metric: str = "",
) -> Figure:  # fmt: skip
    """The rate or quantile ``name`` of a catalogue line, with how it is presented."""
    for spec in CATALOGUE:
        found = [("rate", 0.0)] if spec.rate == name else [("quantile", q) for q, n in spec.quantiles if n == name]
        if found:
            compute, q = found[0]
            inputs = (spec.key, "covered_ms") if compute == "rate" else (spec.key,)
            return Figure(name, "rate" if compute == "rate" else "quantile", inputs, unit=unit, scale=scale,
                          label=label, help=help, hint=hint, quantile=q, panel=panel, line=line,
                          metric=metric)  # fmt: skip
    raise KeyError(f"{name}: no catalogue line has this rate or quantile")


_C = _from_catalogue
_V32 = "vLLM ≥ 0.32"
_MFU = "vLLM ≥ 0.32 with --enable-mfu-metrics"
# vLLM 0.32+ exposes its byte counters whatever its flags, and they stay 0 without this one
MFU_OFF = "vLLM's byte counters stay 0 without --enable-mfu-metrics: start vLLM with it to get this figure"
_SPEC = "speculative decoding off"
_PRESENTED: tuple[Figure, ...] = (
    # status's lines, in the order operators read them
    Figure("up", "record", rows="target", scale=None, label="target up"),
    Figure("last_scrape_at", "record", rows="target", scale=None, label="last scrape"),
    _C("tokens_per_s", unit="tok/s", label="output tokens", help="output tokens per second",
       metric="sweetspot_tokens_per_second"),
    Figure("ceiling_steps_per_s", "record", unit="steps/s", label="ceiling",
           help="the report's ceiling: at most this many decode steps/s (bandwidth ÷ weights per GPU)", hint=NO_CEILING,
           metric="sweetspot_ceiling_steps_per_second"),
    Figure("ceiling_share", "record", unit="%", scale=100.0, label="the report's % of ceiling",
           help="the report's % of ceiling: tokens_per_s ÷ ceiling_steps_per_s (0–1; not an efficiency)", hint=NO_CEILING),
    Figure("mbu", "record", unit="%", scale=100.0, label="MBU",
           help="model bandwidth utilisation (0–1): the model's bytes a step must read × steps/s ÷ peak; "
                "vLLM's byte counters, else the step model; never a DRAM reading", metric="sweetspot_mbu_ratio"),
    Figure("dram_bw_util", "record", unit="%", scale=100.0, label="DRAM bandwidth",
           help="DRAM bandwidth utilisation (0–1): every byte the GPUs moved (NVML GPM or DCGM DRAM active), "
                "averaged over the target's GPUs", metric="sweetspot_dram_bw_util_ratio"),
    Figure("overhead_traffic_gbps", "record", unit="GB/s per GPU", label="overhead traffic",
           help="bytes moved beyond the model's: (dram_bw_util − mbu) × peak bandwidth, GB/s per GPU",
           metric="sweetspot_overhead_traffic_gbps"),
    Figure("overhead_ratio", "record", unit="×", label="moved ÷ model's bytes",
           help="dram_bw_util ÷ mbu: how many times the model's bytes the GPUs moved"),
    Figure("steps_per_s", "rate", ("iteration_tokens", "covered_ms"), unit="steps/s", label="engine steps",
           help="engine steps (decode steps) per second: rate of vllm:iteration_tokens_total_count",
           hint="vLLM V1 (iteration_tokens_total); SGLang does not expose a step count",
           metric="sweetspot_steps_per_second"),
    Figure("decode_tok_s_per_request", "derived", ("generation_tokens", "covered_ms", "requests_running", "iteration_tokens"),
           unit="tok/s", label="decode tok/s per request",
           help="tokens_per_s ÷ the requests running while the engine stepped (running_avg, at least tokens per step): "
           "each request's decode speed, never above steps_per_s",
           fn=derived.decode_tok_s_per_request),
    Figure("mean_context_tokens", "derived", ("request_prompt_tokens", "request_generation_tokens"), unit="tokens",
           label="mean context", help="mean prompt + half the mean output of finished requests (tokens)",
           hint="vLLM's request-length histograms (request_prompt_tokens, request_generation_tokens)",
           fn=derived.mean_context_tokens),
    _C("prompt_tokens_per_s", unit="tok/s", label="prompt tokens", help="prompt tokens per second"),
    _C("requests_per_s", unit="req/s", label="finished requests", help="finished requests per second",
       metric="sweetspot_requests_per_second"),
    _C("ttft_p50_s", unit="s", label="TTFT P50", help="TTFT P50 (s)"),
    _C("ttft_p95_s", unit="s", label="TTFT P95", help="TTFT P95 (s)", metric="sweetspot_ttft_p95_seconds"),
    _C("ttft_p99_s", unit="s", label="TTFT P99", help="TTFT P99 (s)"),
    Figure("ttft_slo_attainment", "share", ("ttft",), unit="%", scale=100.0, label="TTFT SLO attainment",
           help="share of requests with TTFT within the target's ttft_p95_slo_s, from the buckets (0–1)"),
    _C("itl_p95_s", unit="s", label="ITL P95", help="inter-token latency P95 (s)"),
    _C("e2e_p95_s", unit="s", label="E2E P95", help="end-to-end latency P95 (s)"),
    Figure("preemptions", "count", ("preemptions",), label="preemptions", help="preemptions in the window (count)",
           metric="sweetspot_preemptions"),
    Figure("running_avg", "gauge_avg", ("requests_running",), unit="requests", label="running (avg)",
           help="running requests, average", metric="sweetspot_running_requests"),
    Figure("running_max", "gauge_max", ("requests_running",), unit="requests", label="running (max)",
           help="running requests, max"),
    Figure("waiting_max", "gauge_max", ("requests_waiting",), unit="requests", label="waiting in vLLM (max)",
           help="requests waiting in vLLM, max"),
    Figure("queue_depth_max", "gauge_max", ("queue_depth",), rows="target", unit="requests",
           label="gateway queue (max)", help="gateway queue depth, max"),
    Figure("kv_cache_usage_max", "gauge_max", ("kv_cache_usage",), "max", "%", 100.0, "KV-cache usage (max)",
           "KV-cache usage, max (0–1)", metric="sweetspot_kv_cache_usage_ratio"),
    _C("queue_time_p95_s", unit="s", label="queue time in vLLM P95"),
    Figure("prefix_cache_hit_rate", "ratio", ("prefix_cache_hits", "prefix_cache_queries"), unit="%", scale=100.0,
           label="prefix-cache hit rate", help="prefix-cache hit rate (0–1)",
           hint="prefix caching off, or vLLM before it was exported", fallback="prefix_cache_hit_rate"),
    # vLLM ≥ 0.32 / SGLang figures: "no data" where the engine does not expose them
    Figure("engine", "record", rows="target", scale=0.0, label="engine"),
    Figure("sleep_state", "record", scale=0.0, label="sleep state"),
    Figure("kv_capacity_tokens", "gauge_max", ("kv_capacity_tokens",), "max", "tokens", label="KV capacity",
           help="KV-cache capacity in tokens"),
    Figure("engine_bw_gbps", "derived", ("engine_read_bytes", "engine_write_bytes", "covered_ms", "generation_tokens"),
           unit="GB/s per GPU", label="engine memory traffic",
           help="engine-estimated memory traffic per GPU, GB/s (vLLM ≥ 0.32 --enable-mfu-metrics)", fn=derived.engine_bw_gbps,
           metric="sweetspot_engine_bandwidth_gbps"),
    _C("finished_abort_per_s", unit="req/s", label="aborted requests",
       help="requests aborted per second (vLLM finished_reason=abort, SGLang aborted requests)"),
    _C("finished_error_per_s", unit="req/s", label="failed requests",
       help="requests finished by an engine error per second (vLLM ≥ 0.32)", hint="vLLM ≥ 0.32 (error reason)"),
    Figure("admission_rejections_per_min", "record", unit="req/min", label="rejected at admission"),
    _C("prefill_time_p95_s", unit="s", label="prefill time P95", hint="vLLM ≥ 0.6; SGLang does not expose it"),
    Figure("spec_decode_acceptance_rate", "ratio", ("spec_decode_accepted_tokens", "spec_decode_draft_tokens"),
           unit="%", scale=100.0, label="spec-decode acceptance", hint=_SPEC),
    # not among status's lines
    Figure("mbu_engine", "record", unit="%", scale=100.0,
           help="MBU from vLLM's byte counters per GPU ÷ peak bandwidth (0–1; --enable-mfu-metrics)"),
    Figure("mbu_modelled", "record", unit="%", scale=100.0,
           help="MBU of the step model: steps/s × bytes per step ÷ peak bandwidth (0–1)"),
    Figure("mbu_source", "record", scale=0.0),
    Figure("mbu_kv_source", "record", scale=0.0),
    Figure("dram_bw_source", "record", scale=0.0),
    Figure("kv_resident_tokens_avg", "gauge_avg", ("kv_resident_tokens",), unit="tokens",
           help="KV-cache tokens resident, average: the tokens a decode step reads (kv_cache_usage_perc × kv_cache_size_tokens)",
           hint="vLLM V1's kv_cache_usage_perc with cache_config_info"),
    Figure("engines_max", "gauge_max", ("engine_count",), "max", "engines",
           help="data-parallel engines serving the target (distinct engine labels), max"),
    Figure("step_bound_breach", "record", scale=0.0),
    Figure("scrapes", "record", rows="target", help="scrapes in the window"),
    Figure("failed_scrapes", "record", rows="target", help="failed scrapes in the window"),
    _C("admission_rejections_per_s", unit="req/s",
       help="requests refused at admission (HTTP 503) per second (vLLM ≥ 0.32)", hint=_V32),
    _C("engine_read_bytes_per_s", unit="B/s per GPU", hint=_MFU),
    _C("engine_write_bytes_per_s", unit="B/s per GPU", hint=_MFU),
    _C("tpot_p95_s", unit="s", hint="vLLM ≥ 0.11"),
    Figure("waiting_capacity_max", "gauge_max", ("waiting_capacity",), unit="requests", hint=_V32),
    Figure("waiting_deferred_max", "gauge_max", ("waiting_deferred",), unit="requests", hint=_V32),
    Figure("kv_capacity_bytes", "gauge_max", ("kv_capacity_bytes",), "max", "bytes"),
    Figure("sleep_weights_offloaded_max", "gauge_max", ("sleep_weights_offloaded",), "max", hint=_V32),
    Figure("sleep_discard_all_max", "gauge_max", ("sleep_discard_all",), "max", hint=_V32),
    Figure("lora_running_adapters_max", "gauge_max", ("lora_running_adapters",), "max", "adapters"),
    Figure("lora_waiting_adapters_max", "gauge_max", ("lora_waiting_adapters",), "max", "adapters"),
    Figure("spec_decode_mean_acceptance_length", "derived", ("spec_decode_accepted_tokens", "spec_decode_drafts"),
           unit="tokens per draft", hint=_SPEC, fn=derived.mean_acceptance_length),
    # the latency clients see behind a gateway (issue 28): its wait by Little's law, added to the engine's
    Figure("queue_depth_avg", "gauge_avg", ("queue_depth",), rows="target", unit="requests",
           help="gateway queue depth, average"),
    Figure("waiting_avg", "gauge_avg", ("requests_waiting",), unit="requests"),  # the headroom forecast's demand
    Figure("requests_started_per_s", "rate", ("ttft", "covered_ms"), unit="req/s",
           help="requests entering the engine per second (the rate of its TTFT count: each got a first token)"),
    Figure("gateway_wait_s", "derived", ("ttft", "request_success", "covered_ms"), unit="s", label="gateway wait",
           help="the mean wait in the gateway (s): its own wait histogram's (targets[].gateway.wait_metric) where it "
           "counted waits, else by Little's law, average queue ÷ requests entering the engine per second (an "
           "estimate; none where nobody was admitted); gateway_wait_source says which", fn=derived.gateway_wait_s),
    Figure("gateway_wait_p95_s", "derived", ("ttft", "request_success", "covered_ms"), unit="s",
           label="gateway wait P95",
           help="the gateway wait's P95 (s): its own wait histogram's where it counted waits, else estimated from "
           "the queue and the admission rate", fn=derived.gateway_wait_p95_s),
    Figure("gateway_waits", "count", ("gateway_wait",), rows="target", unit="requests",
           help="waits the gateway's own wait histogram counted in the window (none: no histogram read)"),
    Figure("client_ttft_p95_s", "derived", ("ttft",), unit="s", label="TTFT P95 (clients)",
           help="TTFT P95 as clients see it (s): max(the engine's TTFT P95, its median + the gateway wait's P95) "
           "(the engine's where no gateway)",
           fn=derived.client_ttft_p95_s, panel="ttft", line="P95 as clients see it"),
    Figure("client_ttft_slo_attainment", "share", ("ttft",), unit="%", scale=100.0,
           label="SLO attainment (clients)",
           help="share of requests whose gateway wait + engine TTFT was within ttft_p95_slo_s (0–1)"),
    # a series step's share of successful scrapes (a window has scrapes and failed_scrapes)
    Figure("up_ratio", "ratio", ("up_scrapes", "scrapes"), rows="target"),
)  # fmt: skip


def _catalogue_rows(presented: tuple[Figure, ...]) -> tuple[Figure, ...]:
    """Every catalogue rate and quantile that no row above presents, as a bare figure."""
    named = {f.name for f in presented}
    names = [spec.rate for spec in CATALOGUE if spec.rate] + [n for spec in CATALOGUE for _, n in spec.quantiles]
    return tuple(_C(name) for name in names if name not in named)


FIGURES: tuple[Figure, ...] = (*_PRESENTED, *_catalogue_rows(_PRESENTED))
# Record figures a series step carries too: computed per step after the pipeline (db/queries.py).
SERIES_RECORDS = frozenset({"mbu", "dram_bw_util"})
BY_NAME: dict[str, Figure] = {f.name: f for f in FIGURES}
# Catalogue metrics that feed no figure, and why they may be missing.
_UNREAD_HINTS = {"requests_swapped": "V0 engine only: expected on V1", "lora_requests": "LoRA off"}
# Why a catalogue metric may be absent though the engine is healthy (the Targets page).
MISSING_HINTS: dict[str, str] = {
    **{col: f.hint for f in FIGURES if f.hint for col in f.inputs if col != "covered_ms"},
    **_UNREAD_HINTS,
}


def shown_in_status() -> tuple[Figure, ...]:
    """``status``'s lines, in order."""
    return tuple(f for f in FIGURES if f.label)


def rule_names() -> dict[str, str]:
    """The figures alert rules may use → their meaning."""
    return {f.name: f.help for f in FIGURES if f.help}


def _unit(f: Figure) -> str:
    if f.scale is None:
        return "unix seconds" if f.name != "up" else "yes/no"
    return "0–1" if f.scale == 100.0 else f.unit or "count"


def alert_names_markdown() -> str:
    """The table of the figures rules may use in docs/reference.md (generated: ``make docs``)."""
    rows = [f"| `{f.name}` | {_unit(f)} | {f.help} |" for f in FIGURES if f.help]
    return "\n".join(["| name | unit | meaning |", "|---|---|---|", *rows])


def status_markdown() -> str:
    """The table of ``status``'s lines in docs/reference.md (generated: ``make docs``)."""
    rows = [f"| {f.label} | `{f.name}` | {f.unit or '—'} |" for f in shown_in_status()]
    return "\n".join(["| line | JSON key | unit |", "|---|---|---|", *rows])


def record_fields(cls: type) -> frozenset[str]:
    """The field names of a result record (tests hold FIGURES against them)."""
    return frozenset(field.name for field in dataclasses.fields(cls))


@dataclass(frozen=True, kw_only=True)
class EngineFigures:
    """The typed fields of the table's figures that a window and a series step share (db/results.py
    ``WindowFigures`` and ``SeriesPoint`` extend it): vLLM 0.33 / SGLang figures, the step model's,
    the client-seen latency; None where the engine does not expose them. Keyword-only, so records add
    them after their own. Kept beside :data:`FIGURES` so that a new figure's row and its typed field
    are one edit of one file (tests/test_figures.py holds them in step)."""

    finished_stop_per_s: float | None = None
    finished_length_per_s: float | None = None
    finished_abort_per_s: float | None = None
    finished_error_per_s: float | None = None
    admission_rejections_per_s: float | None = None  # HTTP 503 at the door
    engine_read_bytes_per_s: float | None = None  # per GPU, the engine's estimate (--enable-mfu-metrics)
    engine_write_bytes_per_s: float | None = None
    engine_bw_gbps: float | None = None  # (read + write) per GPU ÷ 1e9
    waiting_capacity_max: float | None = None
    waiting_deferred_max: float | None = None
    kv_capacity_tokens: float | None = None
    kv_capacity_bytes: float | None = None
    prefix_cache_hit_rate: float | None = None  # 0–1
    sleep_weights_offloaded_max: float | None = None  # 1 when an engine slept so in the step
    sleep_discard_all_max: float | None = None
    lora_running_adapters_max: float | None = None
    lora_waiting_adapters_max: float | None = None
    spec_decode_acceptance_rate: float | None = None  # 0–1
    spec_decode_mean_acceptance_length: float | None = None  # tokens per draft, ≥ 1
    queue_time_p95_s: float | None = None  # TTFT ≈ input processing + queue + prefill
    prefill_time_p95_s: float | None = None
    tpot_p95_s: float | None = None  # per-request mean time per output token
    # the decode step model's inputs and MBU (core/mbu.py, docs/ceiling.md)
    steps_per_s: float | None = None  # engine steps/s: rate of vllm:iteration_tokens_total_count
    mean_context_tokens: float | None = None  # mean prompt + half the mean generation of finished requests
    decode_tok_s_per_request: float | None = None  # tokens_per_s ÷ max(running_avg, tokens per step)
    # the step model's KV tokens and data-parallel engines (core/mbu.py per_engine)
    kv_resident_tokens_avg: float | None = None  # KV-cache tokens resident, all engines together
    engines_max: float | None = None  # data-parallel engines (distinct `engine` labels)
    # MBU, 0–1, of the best source present (db/mbu_figures.py): the model's bytes, never a DRAM reading;
    # a window also gives its source and each source's
    mbu: float | None = None
    # the GPUs' own DRAM bandwidth utilisation (0–1, NVML GPM or DCGM), averaged over the target's GPUs
    dram_bw_util: float | None = None
    # the latency clients see behind a gateway (db/derived.py): the gateway queue's average, the rate
    # requests enter the engine (its TTFT count, else finished requests), the wait by Little's law
    # (None: unknown, a queue with nobody admitted), and the client-seen TTFT P95 and SLO attainment
    queue_depth_avg: float | None = None
    waiting_avg: float | None = None  # requests waiting in vLLM, average (the headroom forecast's demand)
    requests_started_per_s: float | None = None
    gateway_wait_s: float | None = None
    client_ttft_p95_s: float | None = None
    client_ttft_slo_attainment: float | None = None  # 0–1
    # the gateway's own wait histogram (targets[].gateway.wait_metric): the wait's P95 (the histogram's
    # where it counted waits, else the estimate) and the waits it counted (None: no histogram read)
    gateway_wait_p95_s: float | None = None
    gateway_waits: float | None = None
