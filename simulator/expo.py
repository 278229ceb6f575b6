"""Prometheus exposition of the simulated vLLM, gateway and GPUs, built with prometheus_client.

Each endpoint is a list of metric families built from a plain snapshot (no global registry), so a
restart is just a new snapshot with new ``started_at``: counters back to zero, new ``*_created``,
new ``process_start_time_seconds``. Names, labels and bucket bounds follow vLLM V1 (≥ 0.11) or, with
``version="v0"``, the old V0 engine (DOMAIN.md §4).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.samples import Sample

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


@dataclass(frozen=True)
class GatewayView:
    """The gateway's figures: requests waiting in its FIFO, requests forwarded and not finished."""

    queue_depth: int
    in_flight: int
    limit: int
    started_at: float
    requests: dict[str, float] = field(default_factory=dict)  # outcome → count


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
)
_V0_BOUNDS = {"ttft": TTFT_BUCKETS_V0, "itl": ITL_BUCKETS_V0, "e2e": REQUEST_BUCKETS_V0}


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


def _histogram(name: str, doc: str, hist: Hist, labels: dict[str, str], bounds: tuple[float, ...] | None,
               created: float | None) -> Metric:
    family = HistogramMetricFamily(name, doc, labels=list(labels))
    buckets = [(_le(le), count) for le, count in hist.cumulative(bounds)]
    family.add_metric(list(labels.values()), buckets, hist.total)
    if created is not None:
        family.samples.append(Sample(name + "_created", dict(labels), created, None))
    return family


def _gauge(name: str, doc: str, labels: dict[str, str], value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=list(labels))
    family.add_metric(list(labels.values()), value)
    return family


def _counter(name: str, doc: str, labels: dict[str, str], value: float, created: float | None) -> Metric:
    family = CounterMetricFamily(name, doc, labels=list(labels))
    family.add_metric(list(labels.values()), value, created=created)
    return family


def vllm_families(view: VllmView) -> list[Metric]:
    """Every family of vLLM's /metrics for ``view`` (V1 names unless ``view.version == "v0"``)."""
    v0 = view.version == "v0"
    labels = {"model_name": view.model} if v0 else {"model_name": view.model, "engine": "0"}
    created = None if v0 else view.stats.started_at
    stats = view.stats
    out: list[Metric] = [
        _gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", {},
               stats.started_at),
        _gauge("vllm:num_requests_running", "Number of requests in model execution batches.", labels, view.running),
        _gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels, view.waiting),
    ]
    if v0:
        out.append(_gauge("vllm:num_requests_swapped", "Number of requests swapped to CPU.", labels, 0))
        out.append(_gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", labels,
                          view.kv_usage))
        out.append(_gauge("vllm:cpu_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.", labels, 0))
    else:
        out.append(_gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels,
                          view.kv_usage))
    out += [
        _counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", labels,
                 stats.preemptions, created),
        _counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels, stats.prompt_tokens, created),
        _counter("vllm:generation_tokens", "Number of generation tokens processed.", labels,
                 stats.generation_tokens, created),
    ]
    success = CounterMetricFamily("vllm:request_success", "Count of successfully processed requests.",
                                  labels=[*labels, "finished_reason"])
    for reason, count in stats.success.items():
        success.add_metric([*labels.values(), reason], count, created=created)
    out.append(success)
    for name, key, doc in _HISTOGRAMS:
        if v0 and key == "itl":
            name, doc = "vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds."
        bounds = _V0_BOUNDS.get(key) if v0 else None
        out.append(_histogram(name, doc, stats.hists[key], labels, bounds, created))
    out.append(_cache_config(view, labels))
    return out


def _cache_config(view: VllmView, labels: dict[str, str]) -> Metric:
    info = {
        "block_size": str(view.block_size),
        "cache_dtype": "auto",
        "enable_prefix_caching": "False",
        "gpu_memory_utilization": str(view.gpu_memory_utilization),
        "num_cpu_blocks": "0",
        "num_gpu_blocks": str(view.num_gpu_blocks),
        "swap_space": "4",
    }
    if "engine" in labels:
        info["engine"] = labels["engine"]
    return _gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", info, 1.0)


def gateway_families(view: GatewayView) -> list[Metric]:
    """The gateway's own metrics: queue depth (the figure Sweetspot watches), in-flight, limit, totals."""
    requests = CounterMetricFamily("sweetspot_gateway_requests", "Requests the gateway finished, by outcome.",
                                   labels=["outcome"])
    for outcome, count in sorted(view.requests.items()):
        requests.add_metric([outcome], count, created=view.started_at)
    return [
        _gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", {},
               view.started_at),
        _gauge("sweetspot_gateway_queue_depth", "Requests waiting in the gateway's FIFO queue.", {}, view.queue_depth),
        _gauge("sweetspot_gateway_in_flight", "Requests forwarded to vLLM and not finished yet.", {}, view.in_flight),
        _gauge("sweetspot_gateway_limit", "Concurrency limit of the gateway.", {}, view.limit),
        requests,
    ]


# dcgm-exporter field → (help, GpuView attribute); dcgm-exporter exposes every field as a gauge.
_DCGM_FIELDS = (
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "temp_c"),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "power_w"),
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "gpu_util"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", "mem_copy_util"),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", "fb_free_mib"),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "fb_used_mib"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active sending or receiving data.",
     "dram_active"),
)
GPU_MODEL_NAME = "Tesla V100-SXM2-32GB"


def dcgm_families(gpus: Sequence[GpuView], hostname: str) -> list[Metric]:
    """dcgm-exporter's text for ``gpus`` (labels gpu, UUID, pci_bus_id, device, modelName, Hostname)."""
    names = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"]
    out: list[Metric] = []
    for name, doc, attr in _DCGM_FIELDS:
        family = GaugeMetricFamily(name, doc, labels=names)
        for gpu in gpus:
            values = [str(gpu.index), gpu.uuid, f"00000000:{0x15 + gpu.index * 0x11:02X}:00.0", f"nvidia{gpu.index}",
                      GPU_MODEL_NAME, hostname, "535.183.01"]
            family.add_metric(values, round(getattr(gpu, attr), 4))
        out.append(family)
    return out
