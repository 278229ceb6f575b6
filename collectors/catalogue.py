"""The one table of vLLM metrics Sweetspot reads (DOMAIN.md §4).

Each row names a catalogue key (storage columns depend on it), the exposed names in preference order
(aliases across vLLM versions), the kind, the unit, how several engines of one model combine, and a
description. A new or renamed metric costs one line here; the parser, the collector, ``inspect`` and
docs/metrics.md (checked by a test) all follow this table.

Names are *exposed sample names* as a Prometheus server stores them: a counter keeps its ``_total``
suffix, a histogram is its base name (``_bucket``/``_sum``/``_count`` are added), a gauge and an info
metric are the sample name itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["counter", "gauge", "histogram", "info"]
# "first" (info only): label sets are not numbers; the first engine's labels are kept. "mean": a figure
# that each data-parallel engine states per GPU (MFU bytes) or as a ratio (SGLang's hit rate).
Aggregation = Literal["sum", "max", "mean", "first"]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One catalogue row. ``names[0]`` is preferred when several aliases are exposed at once."""

    key: str
    kind: Kind
    unit: str
    agg: Aggregation
    names: tuple[str, ...]
    description: str
    # one part of a family split by a label (a reason): samples whose label has another value are
    # skipped; samples without the label are kept (another engine's name for the same figure)
    where: tuple[tuple[str, str], ...] = ()
    # What the query facade shows of it: a counter's rate per second (its name there), a
    # histogram's quantiles ((q, name) pairs). Every counter, gauge and histogram is stored.
    rate: str = ""
    quantiles: tuple[tuple[float, str], ...] = ()

    def sample_names(self, name: str) -> tuple[str, ...]:
        """The sample names one exposed ``name`` of this metric produces (``_created`` excluded)."""
        if self.kind == "histogram":
            return (f"{name}_bucket", f"{name}_sum", f"{name}_count")
        return (name,)

    def created_name(self, name: str) -> str | None:
        """The ``*_created`` sample of ``name`` (counters and histograms only), else None."""
        if self.kind == "counter":
            return name.removesuffix("_total") + "_created"
        if self.kind == "histogram":
            return name + "_created"
        return None


_S = MetricSpec
_REASON = "finished_reason"
CATALOGUE: tuple[MetricSpec, ...] = (
    # counters: cumulative since the engine started; storage turns them into reset-aware increases
    _S("generation_tokens", "counter", "tokens", "sum", ("vllm:generation_tokens_total", "sglang:generation_tokens_total"), "output tokens generated (tok/s = windowed rate)", rate="tokens_per_s"),
    _S("prompt_tokens", "counter", "tokens", "sum", ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total"), "prompt tokens prefilled", rate="prompt_tokens_per_s"),
    _S("preemptions", "counter", "preemptions", "sum", ("vllm:num_preemptions_total", "sglang:num_retracted_requests_total"), "sequences preempted (KV cache exhausted: work destroyed); SGLang calls it retraction", rate="preemptions_per_s"),
    _S("request_success", "counter", "requests", "sum", ("vllm:request_success_total", "sglang:num_requests_total"), "finished requests, summed over finished_reason", rate="requests_per_s"),
    _S("prefix_cache_hits", "counter", "tokens", "sum", ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"), "prefix-cache hits (tokens)"),
    _S("prefix_cache_queries", "counter", "tokens", "sum", ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"), "prefix-cache queries (tokens)"),
    _S("finished_stop", "counter", "requests", "sum", ("vllm:request_success_total",), "requests finished by a stop token or string", where=((_REASON, "stop"),), rate="finished_stop_per_s"),
    _S("finished_length", "counter", "requests", "sum", ("vllm:request_success_total",), "requests cut at max_tokens or the model length", where=((_REASON, "length"),), rate="finished_length_per_s"),
    _S("finished_abort", "counter", "requests", "sum", ("vllm:request_success_total", "sglang:num_aborted_requests_total"), "requests aborted (client gone, cancelled)", where=((_REASON, "abort"),), rate="finished_abort_per_s"),
    _S("finished_error", "counter", "requests", "sum", ("vllm:request_success_total",), "requests finished by an engine error", where=((_REASON, "error"),), rate="finished_error_per_s"),
    _S("admission_rejections", "counter", "requests", "sum", ("vllm:admission_rejections_total",), "requests refused at the door (HTTP 503), summed over reason", rate="admission_rejections_per_s"),
    _S("engine_read_bytes", "counter", "bytes per GPU", "mean", ("vllm:estimated_read_bytes_per_gpu_total",), "engine's estimate of bytes read from GPU memory (--enable-mfu-metrics)", rate="engine_read_bytes_per_s"),
    _S("engine_write_bytes", "counter", "bytes per GPU", "mean", ("vllm:estimated_write_bytes_per_gpu_total",), "engine's estimate of bytes written to GPU memory (--enable-mfu-metrics)", rate="engine_write_bytes_per_s"),
    _S("spec_decode_drafts", "counter", "drafts", "sum", ("vllm:spec_decode_num_drafts_total",), "speculative-decoding drafts proposed"),
    _S("spec_decode_draft_tokens", "counter", "tokens", "sum", ("vllm:spec_decode_num_draft_tokens_total",), "draft tokens proposed"),
    _S("spec_decode_accepted_tokens", "counter", "tokens", "sum", ("vllm:spec_decode_num_accepted_tokens_total",), "draft tokens accepted"),
    # gauges: the value at scrape time
    _S("requests_running", "gauge", "requests", "sum", ("vllm:num_requests_running", "sglang:num_running_reqs"), "requests being decoded or prefilled (concurrency)"),
    _S("requests_waiting", "gauge", "requests", "sum", ("vllm:num_requests_waiting", "sglang:num_queue_reqs"), "requests queued inside the engine"),
    _S("requests_swapped", "gauge", "requests", "sum", ("vllm:num_requests_swapped",), "requests swapped to CPU (V0 only)"),
    _S("kv_cache_usage", "gauge", "ratio 0-1", "max", ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"), "KV-cache blocks in use, fraction 0-1 (both vLLM names coexist in 0.9.2-0.10)"),
    _S("waiting_capacity", "gauge", "requests", "sum", ("vllm:num_requests_waiting_by_reason",), "requests waiting for KV capacity", where=(("reason", "capacity"),)),
    _S("waiting_deferred", "gauge", "requests", "sum", ("vllm:num_requests_waiting_by_reason",), "requests waiting, deferred (not for capacity)", where=(("reason", "deferred"),)),
    _S("sleep_weights_offloaded", "gauge", "0/1", "max", ("vllm:engine_sleep_state",), "an engine sleeps with its weights offloaded (level 1)", where=(("sleep_state", "weights_offloaded"),)),
    _S("sleep_discard_all", "gauge", "0/1", "max", ("vllm:engine_sleep_state",), "an engine sleeps with weights and KV discarded (level 2)", where=(("sleep_state", "discard_all"),)),
    _S("kv_capacity_tokens", "gauge", "tokens", "sum", ("sglang:max_total_num_tokens",), "KV-cache capacity in tokens (vLLM: from cache_config_info)"),
    _S("kv_capacity_bytes", "gauge", "bytes", "sum", (), "KV-cache memory per GPU in bytes, summed over engines (cache_config_info kv_cache_memory_bytes, vLLM's per-GPU setting: present only when --kv-cache-memory-bytes is given)"),
    _S("kv_resident_tokens", "gauge", "tokens", "sum", (), "KV-cache tokens resident, the tokens a decode step reads: Σ over engines of kv_cache_usage_perc × the engine's kv_cache_size_tokens (cache_config_info; num_gpu_blocks × block_size before vLLM 0.32)"),
    _S("kv_token_bytes", "gauge", "bytes per GPU", "max", (), "KV bytes one token of context holds on one GPU: cache_config_info kv_cache_memory_bytes ÷ kv_cache_size_tokens (vLLM ≥ 0.32)"),
    _S("engine_count", "gauge", "engines", "max", (), "data-parallel engines serving the model: distinct `engine` labels of num_requests_running (each steps on its own GPUs)"),
    _S("prefix_cache_hit_rate", "gauge", "ratio 0-1", "mean", ("sglang:cache_hit_rate",), "prefix-cache hit rate as SGLang states it (vLLM: hits / queries)"),
    _S("lora_running_adapters", "gauge", "adapters", "max", (), "LoRA adapters running (vLLM: lora_requests_info running_lora_adapters)"),
    _S("lora_waiting_adapters", "gauge", "adapters", "max", (), "LoRA adapters waiting (vLLM: lora_requests_info waiting_lora_adapters)"),
    # histograms: cumulative buckets; bounds are read from each scrape
    _S("ttft", "histogram", "seconds", "sum", ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds"), "time to first token", quantiles=((0.5, "ttft_p50_s"), (0.95, "ttft_p95_s"), (0.99, "ttft_p99_s"))),
    _S("itl", "histogram", "seconds", "sum", ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds", "sglang:inter_token_latency_seconds"), "inter-token latency (TPOT before 0.11)", quantiles=((0.95, "itl_p95_s"),)),
    _S("e2e", "histogram", "seconds", "sum", ("vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds"), "end-to-end request latency", quantiles=((0.95, "e2e_p95_s"),)),
    _S("queue_time", "histogram", "seconds", "sum", ("vllm:request_queue_time_seconds", "sglang:queue_time_seconds"), "time spent waiting in the engine's queue", quantiles=((0.95, "queue_time_p95_s"),)),
    _S("prefill_time", "histogram", "seconds", "sum", ("vllm:request_prefill_time_seconds",), "time spent in prefill (TTFT ≈ input processing + queue + prefill)", quantiles=((0.95, "prefill_time_p95_s"),)),
    _S("tpot", "histogram", "seconds", "sum", ("vllm:request_time_per_output_token_seconds", "sglang:request_time_per_output_token_seconds"), "each finished request's mean time per output token", quantiles=((0.95, "tpot_p95_s"),)),
    # the decode step model's inputs (core/mbu.py): the count of tokens per engine step is the engine's
    # steps (a histogram despite its name); the request-length histograms' sum ÷ count the mean lengths
    _S("iteration_tokens", "histogram", "tokens", "sum", ("vllm:iteration_tokens_total",), "tokens per engine step (a histogram despite its name): its count's rate is the engine's steps/s"),
    _S("request_prompt_tokens", "histogram", "tokens", "sum", ("vllm:request_prompt_tokens",), "prompt tokens of each finished request (sum ÷ count: the mean prompt)"),
    _S("request_generation_tokens", "histogram", "tokens", "sum", ("vllm:request_generation_tokens",), "output tokens of each finished request (sum ÷ count: the mean output)"),
    # info: labels carry the values
    _S("cache_config", "info", "labels", "first", ("vllm:cache_config_info",), "cache configuration (num_gpu_blocks, block_size, ...)"),
    _S("lora_requests", "info", "labels", "first", ("vllm:lora_requests_info",), "LoRA adapters running and waiting (the newest sample: its value is a timestamp)"),
)

# Which vLLM or SGLang versions an exposed name implies (ENGINES.md), for inspect and the Targets page.
# Names not listed are stable across the versions Sweetspot reads.
NAME_VERSIONS: dict[str, str] = {
    "vllm:gpu_cache_usage_perc": "vLLM ≤ 0.10.2 (hidden in 0.11, removed in 0.12)",
    "vllm:gpu_prefix_cache_hits_total": "vLLM ≤ 0.10.2 (hidden in 0.11, removed in 0.12)",
    "vllm:gpu_prefix_cache_queries_total": "vLLM ≤ 0.10.2 (hidden in 0.11, removed in 0.12)",
    "vllm:kv_cache_usage_perc": "vLLM V1 ≥ 0.9.2",
    "vllm:prefix_cache_hits_total": "vLLM V1 (the name from 0.11 on)",
    "vllm:prefix_cache_queries_total": "vLLM V1 (the name from 0.11 on)",
    "vllm:time_per_output_token_seconds": "vLLM ≤ 0.11 (hidden in 0.12-0.14, removed in 0.15)",
    "vllm:inter_token_latency_seconds": "vLLM ≥ 0.10.2",
    "vllm:request_time_per_output_token_seconds": "vLLM ≥ 0.11",
    "vllm:num_requests_swapped": "vLLM V0 (≤ 0.10)",
    "vllm:admission_rejections_total": "vLLM ≥ 0.32",
    "vllm:num_requests_waiting_by_reason": "vLLM ≥ 0.32",
    "vllm:engine_sleep_state": "vLLM ≥ 0.32",
    "vllm:estimated_read_bytes_per_gpu_total": "vLLM ≥ 0.32 with --enable-mfu-metrics",
    "vllm:estimated_write_bytes_per_gpu_total": "vLLM ≥ 0.32 with --enable-mfu-metrics",
}


def name_versions(name: str) -> str:
    """The versions an exposed name implies: ``NAME_VERSIONS``, else its engine (stable name)."""
    if name in NAME_VERSIONS:
        return NAME_VERSIONS[name]
    return "SGLang 0.5" if name.startswith("sglang:") else "vLLM (all versions read)"


BY_KEY: dict[str, MetricSpec] = {spec.key: spec for spec in CATALOGUE}
# The figures that divide one counter's increase by another's are ratio rows of db/figures.py.


def catalogue_markdown() -> str:
    """docs/metrics.md's table of the catalogue (between ``catalogue:begin`` and ``catalogue:end``)."""
    rows = [
        f"| `{s.key}` | {s.kind} | {s.unit} | {s.agg} | {', '.join(f'`{n}`' for n in s.names) or '(derived)'} | "
        f"{s.description}{''.join(f' (`{k}={v}`)' for k, v in s.where)} |"
        for s in CATALOGUE
    ]
    head = "| key | kind | unit | across engines | exposed names (preferred first) | description |"
    return "\n".join([head, "|---|---|---|---|---|---|", *rows])


def keys(kind: Kind) -> tuple[str, ...]:
    """The catalogue keys of one kind, in catalogue order (the storage columns follow it)."""
    return tuple(spec.key for spec in CATALOGUE if spec.kind == kind)
# Outside the vllm: namespace, read for restart detection (V0 has no *_created series).
PROCESS_START = "process_start_time_seconds"


def wanted_sample_names() -> frozenset[str]:
    """Every sample name the collector reads: catalogue samples, their ``*_created``, process start."""
    names = {PROCESS_START}
    for spec in CATALOGUE:
        for name in spec.names:  # names=() rows are derived from other samples by the collector
            names.update(spec.sample_names(name))
            created = spec.created_name(name)
            if created:
                names.add(created)
    return frozenset(names)


# Finished requests by reason: reason → catalogue key (inspect's and status's requests_finished_by_reason).
FINISHED_BY_REASON: dict[str, str] = {
    "stop": "finished_stop", "length": "finished_length", "abort": "finished_abort", "error": "finished_error",
}


def sleep_state(offloaded: float | None, discarded: float | None) -> str | None:
    """vLLM's engine_sleep_state as one word: "discard_all", "weights_offloaded", "awake"; None when
    not exposed (an engine before 0.33, or SGLang). A sleeping engine is neither down nor in the sweet spot."""
    if offloaded is None and discarded is None:
        return None
    if discarded:
        return "discard_all"
    return "weights_offloaded" if offloaded else "awake"
