"""Typed records passed from collectors to storage. Pure data: no I/O here.

Units are in the field names (``_s`` seconds, ``_bytes``, ``_pct`` 0–100, ``_ratio`` 0–1, ``_gbps``
GB/s, ``_w`` watts, ``_c`` degrees Celsius). ``None`` always means "not exposed / not readable",
never zero: storage writes NULL and charts draw a gap.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from core.engines import DEFAULT as DEFAULT_ENGINE

INF = float("inf")


@dataclass(frozen=True, slots=True)
class Histogram:
    """A Prometheus histogram as scraped: cumulative counts per upper bound (the last bound is +Inf)."""

    bounds: tuple[float, ...]
    cumulative: tuple[float, ...]
    count: float | None = None
    sum: float | None = None


@dataclass(frozen=True, slots=True)
class ModelFigures:
    """One model's figures in one scrape, already aggregated across engines.

    ``counters`` and ``histograms`` are summed across engines; ``gauges`` follow the catalogue's
    aggregation (sum for running/waiting, max for KV usage). A key absent from a mapping means the
    metric was not exposed. ``created`` maps a counter/histogram key to the largest ``*_created``
    timestamp seen for it (a change means vLLM restarted).
    """

    counters: Mapping[str, float] = field(default_factory=dict)
    gauges: Mapping[str, float] = field(default_factory=dict)
    histograms: Mapping[str, Histogram] = field(default_factory=dict)
    created: Mapping[str, float] = field(default_factory=dict)
    # counter/histogram key → the engines left out of its sum because their value was NaN, infinite
    # or negative (e.g. "1"): the others still count, and the writer starts a new baseline whenever
    # this set changes (the sum is then over other series).
    partial: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class VllmScrape:
    """Everything read from one vLLM ``/metrics`` payload."""

    models: Mapping[str, ModelFigures]
    engines: tuple[str, ...] = ()
    process_start_time_s: float | None = None
    metric_names_used: Mapping[str, str] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    cache_config: Mapping[str, str] = field(default_factory=dict)
    engine: str = DEFAULT_ENGINE.name  # a name of core.engines.ENGINES: whose names the page used
    # the newest vllm:lora_requests_info labels (running_lora_adapters, waiting_lora_adapters, max_lora)
    lora: Mapping[str, str] = field(default_factory=dict)
    # Series (model × engine label sets) beyond the target's max_series: their samples were dropped
    series_dropped: int = 0
    series_limit: int | None = None  # the limit applied (None: none)
    lines_refused: int = 0  # lines over the parser's bounds (collectors/expfmt.py: line, label value, buckets)
    # Samples that repeated a name and label set already on the page: dropped, the first kept
    duplicate_samples: int = 0


@dataclass(frozen=True, slots=True)
class GatewayReading:
    """Gateway queue depth (requests waiting in the gateway, not yet sent to vLLM)."""

    queue_depth: float | None
    source: str = ""
    # the gateway's own wait histogram (seconds, cumulative as scraped; targets[].gateway.wait_metric),
    # None where none is configured or it could not be read (``wait_note`` says why)
    wait: Histogram | None = None
    wait_note: str = ""


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU at one instant. Every field but ``uuid`` may be None (unsupported or failed call)."""

    uuid: str
    index: int | None = None
    name: str | None = None
    memory_used_bytes: float | None = None
    memory_total_bytes: float | None = None
    memory_reserved_bytes: float | None = None
    memory_busy_pct: float | None = None  # NVML utilization.memory: % of TIME, not bandwidth
    dram_bw_util_pct: float | None = None  # true bandwidth utilization (GPM or DCGM DRAM active)
    dram_bw_source: str | None = None  # "gpm" or "dcgm" when dram_bw_util_pct is set
    peak_bw_gbps: float | None = None
    peak_bw_source: str | None = None  # "config", "nvml-formula" or None
    power_w: float | None = None
    temperature_c: float | None = None
    host: str | None = None


@dataclass(frozen=True, slots=True)
class SourceResult:
    """Outcome of one source in a round: either a value or an error message, never both."""

    ok: bool
    error: str | None = None
    duration_s: float = 0.0


@dataclass(frozen=True, slots=True)
class ScrapeRound:
    """One scheduled round for one target: what storage writes in one transaction."""

    target: str
    ts: float  # unix seconds at the start of the round
    vllm: VllmScrape | None
    vllm_status: SourceResult
    gateway: GatewayReading | None = None
    gateway_status: SourceResult | None = None
    gpus: tuple[GpuReading, ...] = ()
    gpu_status: SourceResult | None = None
    # unix seconds (on ts's clock) when the vLLM page came: the instant its counters hold. A server
    # answering late under load (a busy event loop) makes it seconds after ts, unevenly from round to
    # round; increases are divided by the time between these instants. None: ts.
    vllm_at: float | None = None
