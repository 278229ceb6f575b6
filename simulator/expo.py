"""Prometheus exposition of the simulated vLLM, gateway and GPUs, built with prometheus_client.

Each endpoint is a list of metric families built from a plain snapshot (no global registry), so a
restart is just a new snapshot with new ``started_at``: counters back to zero, new ``*_created``,
new ``process_start_time_seconds``. Names, labels and bucket bounds follow vLLM V1 (0.33: MFU bytes
counters, finished-by-reason with ``error``, admission rejections, waiting by reason, sleep state,
``kv_cache_size_tokens``) or, with ``version="v0"``, the old V0 engine (DOMAIN.md §4); with
``engine="sglang"``, SGLang 0.5's names (ENGINES.md). ``api_servers > 1`` is vLLM's multiprocess
mode: no ``*_created``, no ``process_start_time_seconds``, each histogram's ``_sum`` before its buckets.
SGLang always serves that way (its processes share prometheus_client's multiprocess directory).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.samples import Sample

from core.engines import DEFAULT as DEFAULT_ENGINE
from core.engines import SGLANG, VLLM
from simulator.params import EngineParams
from simulator.stats import (
    ITL_BUCKETS_V0,
    REQUEST_BUCKETS_V0,
    TTFT_BUCKETS_V0,
    EngineStats,
    Hist,
)


@dataclass(frozen=True)
class VllmView:
    """What vLLM's /metrics shows at one instant (counts since ``stats.started_at``)."""

    model: str
    stats: EngineStats
    running: int
    waiting: int
    kv_usage: float  # fraction 0–1
    num_gpu_blocks: int
    block_size: int
    gpu_memory_utilization: float
    version: str = "v1"
    engine: str = DEFAULT_ENGINE.name  # a name of core.engines.ENGINES (its page: LAYOUTS)
    api_servers: int = 1  # vLLM --api-server-count: > 1 is multiprocess mode
    sleep_level: int = 0  # 0 awake, 1 weights offloaded, 2 discard all (vLLM's /sleep?level=)
    # KV bytes one token holds on one GPU (EngineParams.kv_bytes_per_token_per_gpu): cache_config_info's
    # kv_cache_memory_bytes, from which a collector derives the step model's KV bytes per token.
    kv_bytes_per_token_per_gpu: float = EngineParams().kv_bytes_per_token_per_gpu

    @property
    def multiprocess(self) -> bool:
        return self.api_servers > 1 or LAYOUTS[self.engine].multiprocess


@dataclass(frozen=True)
class GatewayView:
    """The gateway's figures: requests waiting in its FIFO, requests forwarded and not finished."""

    queue_depth: int
    in_flight: int
    limit: int
    started_at: float
    requests: dict[str, float] = field(default_factory=dict)  # outcome → count
    # each admitted request's wait, seconds (LiteLLM's litellm_request_queue_time_seconds); None: not exposed
    waits: Hist | None = None


@dataclass(frozen=True)
class GpuView:
    """One simulated GPU (units as dcgm-exporter: MiB, %, ratio, W, °C)."""

    index: int
    uuid: str
    fb_used_mib: float
    fb_free_mib: float
    dram_active: float
    mem_copy_util: float
    gpu_util: float
    power_w: float
    temp_c: float
    sm_clock: float = 1530.0  # MHz, V100 boost
    mem_clock: float = 877.0  # MHz, V100 HBM2


class _Families:
    """A collector over a fixed list of families (what generate_latest needs)."""

    def __init__(self, families: Sequence[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


def render(families: Sequence[Metric]) -> str:
    """Prometheus text format 0.0.4, as prometheus_client writes it."""
    return generate_latest(_Families(families)).decode("utf-8")


# (exposed name, stats key, help) of the latency histograms; V0 renames/re-bins some below.
_HISTOGRAMS = (
    ("vllm:time_to_first_token_seconds", "ttft", "Histogram of time to first token in seconds."),
    ("vllm:inter_token_latency_seconds", "itl", "Histogram of inter-token latency in seconds."),
    ("vllm:e2e_request_latency_seconds", "e2e", "Histogram of e2e request latency in seconds."),
    ("vllm:request_queue_time_seconds", "queue", "Histogram of time spent in WAITING phase for request."),
    ("vllm:request_prefill_time_seconds", "prefill", "Histogram of time spent in PREFILL phase for request."),
    ("vllm:request_decode_time_seconds", "decode", "Histogram of time spent in DECODE phase for request."),
    ("vllm:iteration_tokens_total", "iteration", "Histogram of number of tokens per engine_step."),
    ("vllm:request_time_per_output_token_seconds", "tpot", "Histogram of time_per_output_token_seconds per request."),
    ("vllm:request_prompt_tokens", "prompt_len", "Number of prefill tokens processed."),
    ("vllm:request_generation_tokens", "generation_len", "Number of generation tokens processed."),
)
_V0_BOUNDS = {"ttft": TTFT_BUCKETS_V0, "itl": ITL_BUCKETS_V0, "e2e": REQUEST_BUCKETS_V0}
START_DOC = "Start time of the process since unix epoch in seconds."


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


class FamilySink:
    """Collects prometheus_client metric families (the reference output)."""

    def __init__(self) -> None:
        self.families: list[Metric] = []

    def gauge(self, name: str, doc: str, labels: dict[str, str], value: float) -> None:
        family = GaugeMetricFamily(name, doc, labels=list(labels))
        family.add_metric(list(labels.values()), value)
        self.families.append(family)

    def gauges(self, name: str, doc: str, labelnames: list[str], children: list[tuple[list[str], float]]) -> None:
        family = GaugeMetricFamily(name, doc, labels=labelnames)
        for values, value in children:
            family.add_metric(values, value)
        self.families.append(family)

    def counter(self, name: str, doc: str, labelnames: list[str], children: list[tuple[list[str], float]],
                created: float | None) -> None:
        family = CounterMetricFamily(name, doc, labels=labelnames)
        for values, value in children:
            family.add_metric(values, value, created=created)
        self.families.append(family)

    def histogram(self, name: str, doc: str, labels: dict[str, str], hist: Hist, bounds: tuple[float, ...] | None,
                  created: float | None, sum_first: bool = False) -> None:
        family = HistogramMetricFamily(name, doc, labels=list(labels))
        buckets = [(_le(le), count) for le, count in hist.cumulative(bounds)]
        family.add_metric(list(labels.values()), buckets, hist.total)
        if sum_first:  # as prometheus_client's multiprocess collector often serves it
            family.samples.sort(key=lambda sample: not sample.name.endswith("_sum"))
        if created is not None:
            family.samples.append(Sample(name + "_created", dict(labels), created, None))
        self.families.append(family)


class ValueSink:
    """Collects only the sample values, in the order FamilySink's families hold their samples."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def gauge(self, name: str, doc: str, labels: dict[str, str], value: float) -> None:
        self.values.append(value)

    def gauges(self, name: str, doc: str, labelnames: list[str], children: list[tuple[list[str], float]]) -> None:
        self.values.extend(value for _, value in children)

    def counter(self, name: str, doc: str, labelnames: list[str], children: list[tuple[list[str], float]],
                created: float | None) -> None:
        for _, value in children:
            self.values.append(value)
            if created is not None:
                self.values.append(created)

    def histogram(self, name: str, doc: str, labels: dict[str, str], hist: Hist, bounds: tuple[float, ...] | None,
                  created: float | None, sum_first: bool = False) -> None:
        cumulative = hist.cumulative(bounds)
        if sum_first:
            self.values.append(hist.total)
        self.values.extend(count for _, count in cumulative)
        self.values.append(cumulative[-1][1])
        if not sum_first:
            self.values.append(hist.total)
        if created is not None:
            self.values.append(created)


Sink = FamilySink | ValueSink


def vllm_layout(view: VllmView, sink: Sink) -> None:
    """Write every family of the engine's /metrics for ``view`` into ``sink`` (its layout: LAYOUTS)."""
    LAYOUTS[view.engine].write(view, sink)


def _vllm_page(view: VllmView, sink: Sink) -> None:
    """vLLM's /metrics (V1 names unless version v0)."""
    v0 = view.version == "v0"
    labels = {"model_name": view.model} if v0 else {"model_name": view.model, "engine": "0"}
    created = None if v0 or view.multiprocess else view.stats.started_at
    stats = view.stats
    if not view.multiprocess:
        sink.gauge("process_start_time_seconds", START_DOC, {}, stats.started_at)
    sink.gauge("vllm:num_requests_running", "Number of requests in model execution batches.", labels, view.running)
    sink.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels, view.waiting)
    if v0:
        sink.gauge("vllm:num_requests_swapped", "Number of requests swapped to CPU.", labels, 0)
        sink.gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", labels,
                   view.kv_usage)
        sink.gauge("vllm:cpu_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.", labels, 0)
    else:
        sink.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels, view.kv_usage)
    names, values = list(labels), list(labels.values())
    for name, doc, value in (
        ("vllm:num_preemptions", "Cumulative number of preemption from the engine.", stats.preemptions),
        ("vllm:prompt_tokens", "Number of prefill tokens processed.", stats.prompt_tokens),
        ("vllm:generation_tokens", "Number of generation tokens processed.", stats.generation_tokens),
    ):
        sink.counter(name, doc, names, [(values, value)], created)
    success = stats.success if v0 else {"error": 0.0, **stats.success}
    reasons = [([*values, reason], count) for reason, count in success.items()]
    sink.counter("vllm:request_success", "Count of successfully processed requests.", [*names, "finished_reason"],
                 reasons, created)
    if not v0:  # registered whatever the setting: with prefix caching off (the simulated engine) they stay at 0
        for name, doc in (("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."),
                          ("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.")):
            sink.counter(name, doc, names, [(values, 0.0)], created)
    for name, key, doc in _HISTOGRAMS:
        if v0 and key == "tpot":
            continue  # vLLM >= 0.11
        if v0 and key == "itl":
            name, doc = "vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds."
        bounds = _V0_BOUNDS.get(key) if v0 else None
        sink.histogram(name, doc, labels, stats.hists[key], bounds, created, view.multiprocess)
    sink.gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", _cache_config(view, labels), 1.0)
    if not v0:
        _v033_layout(view, labels, created, sink)


_SLEEP_STATES = ("awake", "weights_offloaded", "discard_all")


def _v033_layout(view: VllmView, labels: dict[str, str], created: float | None, sink: Sink) -> None:
    """The families vLLM 0.33 adds (MFU bytes as with --enable-mfu-metrics)."""
    names, values = list(labels), list(labels.values())
    sink.gauges("vllm:num_requests_waiting_by_reason", "Number of requests waiting, by reason.", [*names, "reason"],
                [([*values, "capacity"], view.waiting), ([*values, "deferred"], 0.0)])
    sink.gauges("vllm:engine_sleep_state", "Engine sleep state; awake = 0 means engine is sleeping.",
                [*names, "sleep_state"],
                [([*values, state], float(view.sleep_level == i)) for i, state in enumerate(_SLEEP_STATES)])
    sink.counter("vllm:admission_rejections", "Requests rejected at admission (HTTP 503).", ["model_name", "reason"],
                 [([view.model, reason], 0.0) for reason in ("max_num_queued_reqs", "max_num_queued_tokens")], created)
    for name, doc, value in (
        ("vllm:estimated_read_bytes_per_gpu", "Estimated bytes read from memory per GPU.", view.stats.read_bytes),
        ("vllm:estimated_write_bytes_per_gpu", "Estimated bytes written to memory per GPU.", view.stats.write_bytes),
    ):
        sink.counter(name, doc, names, [(values, value)], created)


def sglang_layout(view: VllmView, sink: Sink) -> None:
    """SGLang 0.5's /metrics (--enable-metrics) for ``view``: scheduler figures on rank labels,
    tokenizer figures per model; served through prometheus_client's multiprocess collector."""
    stats = view.stats
    sched = {"model_name": view.model, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
    tok = {"model_name": view.model}
    capacity = view.num_gpu_blocks * view.block_size
    for name, doc, value in (
        ("sglang:num_running_reqs", "The number of running requests.", view.running),
        ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", view.waiting),
        ("sglang:token_usage", "The token usage.", view.kv_usage),
        ("sglang:num_used_tokens", "The number of used tokens.", round(view.kv_usage * capacity)),
        ("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV pool.", capacity),
        ("sglang:cache_hit_rate", "The prefix cache hit rate.", 0.0),
    ):
        sink.gauge(name, doc, sched, value)
    sink.counter("sglang:num_retracted_requests", "Number of retracted requests.", list(sched),
                 [(list(sched.values()), stats.preemptions)], None)
    for name, doc, value in (
        ("sglang:prompt_tokens", "Number of prefill tokens processed.", stats.prompt_tokens),
        ("sglang:generation_tokens", "Number of generation tokens processed.", stats.generation_tokens),
        ("sglang:num_requests", "Number of requests processed.", sum(stats.success.values())),
        ("sglang:num_aborted_requests", "Number of requests aborted.", stats.success.get("abort", 0.0)),
    ):
        sink.counter(name, doc, list(tok), [(list(tok.values()), value)], None)
    for name, key, doc, labels in (
        ("sglang:time_to_first_token_seconds", "ttft", "Histogram of time to first token in seconds.", tok),
        ("sglang:inter_token_latency_seconds", "itl", "Histogram of inter-token latency in seconds.", tok),
        ("sglang:e2e_request_latency_seconds", "e2e", "Histogram of End-to-end request latency in seconds", tok),
        ("sglang:queue_time_seconds", "queue", "Histogram of queueing time in seconds.", sched),
    ):
        sink.histogram(name, doc, labels, stats.hists[key], None, None, True)


class Layout(NamedTuple):
    """How the simulator writes one engine's page: ``multiprocess``, always served through
    prometheus_client's multiprocess collector (no ``*_created``, no ``process_*``)."""

    write: Callable[[VllmView, Sink], None]
    multiprocess: bool


# engine name (core.engines.ENGINES) → its page; tests/test_sim_engines.py holds one for every engine
LAYOUTS: dict[str, Layout] = {
    VLLM.name: Layout(_vllm_page, multiprocess=False),
    SGLANG.name: Layout(sglang_layout, multiprocess=True),
}


def vllm_families(view: VllmView) -> list[Metric]:
    """vLLM's /metrics families for ``view`` (prometheus_client objects)."""
    sink = FamilySink()
    vllm_layout(view, sink)
    return sink.families


def _cache_config(view: VllmView, labels: dict[str, str]) -> dict[str, str]:
    info = {
        "block_size": str(view.block_size),
        "cache_dtype": "auto",
        "enable_prefix_caching": "False",
        "gpu_memory_utilization": str(view.gpu_memory_utilization),
        "num_cpu_blocks": "0",
        "num_gpu_blocks": str(view.num_gpu_blocks),
    }
    if "engine" not in labels:
        info["swap_space"] = "4"  # V0's CPU swap; V1 has none
    else:
        info["engine"] = labels["engine"]
        tokens = view.num_gpu_blocks * view.block_size  # 0.33 states the capacity itself
        info["kv_cache_size_tokens"] = str(tokens)
        info["kv_cache_memory_bytes"] = str(round(tokens * view.kv_bytes_per_token_per_gpu))
    return info


def gateway_layout(view: GatewayView, sink: Sink) -> None:
    """The gateway's own metrics: queue depth (the figure Sweetspot watches), in-flight, limit, totals."""
    sink.gauge("process_start_time_seconds", START_DOC, {}, view.started_at)
    sink.gauge("sweetspot_gateway_queue_depth", "Requests waiting in the gateway's FIFO queue.", {}, view.queue_depth)
    sink.gauge("sweetspot_gateway_in_flight", "Requests forwarded to vLLM and not finished yet.", {}, view.in_flight)
    sink.gauge("sweetspot_gateway_limit", "Concurrency limit of the gateway.", {}, view.limit)
    children = [([outcome], count) for outcome, count in sorted(view.requests.items())]
    sink.counter("sweetspot_gateway_requests", "Requests the gateway finished, by outcome.", ["outcome"], children,
                 view.started_at)
    if view.waits is not None:
        sink.histogram("litellm_request_queue_time_seconds", "Time a request waited in the gateway before it was "
                       "forwarded (seconds), as LiteLLM's", {}, view.waits, None, view.started_at)


def gateway_families(view: GatewayView) -> list[Metric]:
    sink = FamilySink()
    gateway_layout(view, sink)
    return sink.families


# dcgm-exporter field → (help, GpuView attribute, integer field?), in the exporter's default order.
_DCGM_FIELDS = (
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "sm_clock", True),
    ("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", "mem_clock", True),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "temp_c", True),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "power_w", False),
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "gpu_util", True),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", "mem_copy_util", True),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", "fb_free_mib", True),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "fb_used_mib", True),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active sending or receiving data.",
     "dram_active", False),
)
GPU_MODEL_NAME = "Tesla V100-SXM2-32GB"
DRIVER_VERSION = "535.183.01"


@lru_cache(maxsize=16)
def _dcgm_labels(gpus: tuple[tuple[int, str], ...], hostname: str) -> list[str]:
    return [
        f'{{gpu="{index}",UUID="{uuid}",pci_bus_id="00000000:{0x15 + index * 0x11:02X}:00.0",'
        f'device="nvidia{index}",modelName="{GPU_MODEL_NAME}",Hostname="{hostname}",'
        f'DCGM_FI_DRIVER_VERSION="{DRIVER_VERSION}"}} '
        for index, uuid in gpus
    ]


def dcgm_text(gpus: Sequence[GpuView], hostname: str) -> str:
    """dcgm-exporter's text for ``gpus``, in its own style: label order gpu, UUID, pci_bus_id, device,
    modelName, Hostname, DCGM_FI_DRIVER_VERSION; integers without a decimal point (it is a Go program,
    not prometheus_client)."""
    labels = _dcgm_labels(tuple((g.index, g.uuid) for g in gpus), hostname)
    out = []
    for name, doc, attr, integer in _DCGM_FIELDS:
        out.append(f"# HELP {name} {doc}\n# TYPE {name} gauge\n")
        for gpu, label in zip(gpus, labels, strict=True):
            value = getattr(gpu, attr)
            out.append(f"{name}{label}{int(round(value)) if integer else f'{value:g}'}\n")
    return "".join(out)
