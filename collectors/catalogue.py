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
# "first" (info only): label sets are not numbers; the first engine's labels are kept.
Aggregation = Literal["sum", "max", "first"]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One catalogue row. ``names[0]`` is preferred when several aliases are exposed at once."""

    key: str
    kind: Kind
    unit: str
    agg: Aggregation
    names: tuple[str, ...]
    description: str
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
CATALOGUE: tuple[MetricSpec, ...] = (
    # counters: cumulative since the engine started; storage turns them into reset-aware increases
    _S("generation_tokens", "counter", "tokens", "sum", ("vllm:generation_tokens_total",), "output tokens generated (tok/s = windowed rate)", rate="tokens_per_s"),
    _S("prompt_tokens", "counter", "tokens", "sum", ("vllm:prompt_tokens_total",), "prompt tokens prefilled", rate="prompt_tokens_per_s"),
    _S("preemptions", "counter", "preemptions", "sum", ("vllm:num_preemptions_total",), "sequences preempted (KV cache exhausted: work destroyed)", rate="preemptions_per_s"),
    _S("request_success", "counter", "requests", "sum", ("vllm:request_success_total",), "finished requests, summed over finished_reason", rate="requests_per_s"),
    _S("prefix_cache_hits", "counter", "tokens", "sum", ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"), "prefix-cache hits (tokens)"),
    _S("prefix_cache_queries", "counter", "tokens", "sum", ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"), "prefix-cache queries (tokens)"),
    # gauges: the value at scrape time
    _S("requests_running", "gauge", "requests", "sum", ("vllm:num_requests_running",), "requests being decoded or prefilled (concurrency)"),
    _S("requests_waiting", "gauge", "requests", "sum", ("vllm:num_requests_waiting",), "requests queued inside vLLM"),
    _S("requests_swapped", "gauge", "requests", "sum", ("vllm:num_requests_swapped",), "requests swapped to CPU (V0 only)"),
    _S("kv_cache_usage", "gauge", "ratio 0-1", "max", ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), "KV-cache blocks in use, fraction 0-1 (both names coexist in 0.9.2-0.10)"),
    # histograms: cumulative buckets; bounds are read from each scrape
    _S("ttft", "histogram", "seconds", "sum", ("vllm:time_to_first_token_seconds",), "time to first token",
       quantiles=((0.5, "ttft_p50_s"), (0.95, "ttft_p95_s"), (0.99, "ttft_p99_s"))),
    _S("itl", "histogram", "seconds", "sum", ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"), "inter-token latency (TPOT before 0.11)", quantiles=((0.95, "itl_p95_s"),)),
    _S("e2e", "histogram", "seconds", "sum", ("vllm:e2e_request_latency_seconds",), "end-to-end request latency", quantiles=((0.95, "e2e_p95_s"),)),
    _S("queue_time", "histogram", "seconds", "sum", ("vllm:request_queue_time_seconds",), "time spent waiting in vLLM's queue", quantiles=((0.95, "queue_time_p95_s"),)),
    # info: labels carry the values
    _S("cache_config", "info", "labels", "first", ("vllm:cache_config_info",), "cache configuration (num_gpu_blocks, block_size, ...)"),
)

BY_KEY: dict[str, MetricSpec] = {spec.key: spec for spec in CATALOGUE}
# Figures of the facade that divide one counter's increase by another's over the same steps.
RATIOS: dict[str, tuple[str, str]] = {"prefix_cache_hit_rate": ("prefix_cache_hits", "prefix_cache_queries")}


def keys(kind: Kind) -> tuple[str, ...]:
    """The catalogue keys of one kind, in catalogue order (the storage columns follow it)."""
    return tuple(spec.key for spec in CATALOGUE if spec.kind == kind)
# Outside the vllm: namespace, read for restart detection (V0 has no *_created series).
PROCESS_START = "process_start_time_seconds"


def wanted_sample_names() -> frozenset[str]:
    """Every sample name the collector reads: catalogue samples, their ``*_created``, process start."""
    names = {PROCESS_START}
    for spec in CATALOGUE:
        for name in spec.names:
            names.update(spec.sample_names(name))
            created = spec.created_name(name)
            if created:
                names.add(created)
    return frozenset(names)
