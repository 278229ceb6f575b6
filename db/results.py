"""Plain result records returned by the query facade and stored by the sweep tool.

Units are in the field names; ``None`` means "no data" (drawn as a gap, printed as null).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.mbu import StepBoundBreach, StepModel
from core.settings import NO_CEILING
from db.figures import EngineFigures


@dataclass(frozen=True)
class SweepLevel:
    """One concurrency level of a load sweep (key names shared with ``sim --calibrate``)."""

    concurrency: int
    duration_s: float
    requests: int
    errors: int
    tokens_per_s: float | None
    qps: float | None
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    ttft_p99_s: float | None
    itl_p95_s: float | None
    e2e_mean_s: float | None
    e2e_p95_s: float | None
    error_rate: float | None


@dataclass(frozen=True)
class SweepRun:
    """A whole load sweep: its inputs, levels and verdict."""

    started_at: float
    url: str
    model: str
    mix: str
    ttft_slo_s: float
    levels: tuple[SweepLevel, ...]
    recommendation: dict[str, Any] = field(default_factory=dict)
    id: int | None = None
    target: str | None = None  # the configured target whose server was loaded; None: only ``url`` says
    ends_at: float | None = None  # when its load ends (planned while it runs); None: its levels' durations say

    @property
    def running(self) -> bool:
        """Stored at its start (with its planned end) and not yet whole: no level stored yet."""
        return not self.levels and self.ends_at is not None

    def load_ends_at(self) -> float:
        """When the sweep's load ends (unix s): as stored, else its start plus its levels' durations."""
        return self.ends_at if self.ends_at is not None else self.started_at + sum(lv.duration_s for lv in self.levels)


@dataclass(frozen=True)
class SweepSpan:
    """When a stored sweep loaded its server: ``ends_at`` planned while it runs (unix seconds)."""

    id: int
    started_at: float
    url: str
    target: str | None
    ends_at: float


@dataclass(frozen=True)
class CeilingInfo:
    """The report's ceiling and its provenance: a bound on decode STEPS per second,
    ``steps_per_s = bandwidth_gbps ÷ (weight_gb ÷ tensor_parallel)`` (core/mbu.py, docs/ceiling.md).
    Only a target given weight_gb and tensor_parallel, with a bandwidth from config or NVML, has one."""

    steps_per_s: float
    weight_gb: float
    tensor_parallel: int
    bandwidth_gbps: float
    bandwidth_source: str  # "config" or "nvml-formula"
    kv_bytes_per_token: float | None = None  # all layers and GPUs; None: unknown (the weights only)
    kv_source: str | None = None  # "cache_config_info", "config" or None
    # the compute roof's configured inputs (core/roofline.py); None: not configured
    active_params_b: float | None = None  # billions of parameters a token passes through
    peak_tflops: float | None = None  # peak dense TFLOP/s per GPU; None: the datasheet table by GPU name
    compute_precision: str | None = None  # which datasheet peak (bf16_tensor, fp16_cuda_core, ...)
    shape_source: str | None = None  # where unset inputs were read: "config.json (path)", the table; None: typed

    def model(self) -> StepModel:
        """The target's decode step model (bytes per step, MBU, the roofline)."""
        return StepModel(self.weight_gb, self.tensor_parallel, self.bandwidth_gbps, self.kv_bytes_per_token)


@dataclass(frozen=True)
class GpuFigures:
    """One GPU over a window (latest memory, max/avg utilisation). None where never read."""

    uuid: str
    index: int | None
    name: str | None
    host: str | None
    memory_used_bytes: float | None
    memory_total_bytes: float | None
    memory_busy_pct_avg: float | None  # NVML time-based figure, never converted to GB/s
    dram_bw_util_pct_avg: float | None  # true bandwidth utilisation (GPM or DCGM)
    dram_bw_gbps_avg: float | None  # dram_bw_util_pct_avg × peak, only when both are known
    dram_bw_source: str | None
    peak_bw_gbps: float | None
    peak_bw_source: str | None
    power_w_avg: float | None
    temperature_c_max: float | None


@dataclass(frozen=True)
class WindowFigures(EngineFigures):
    """Every figure of ``status --json`` for one target (one model, or all) over one window."""

    target: str
    model: str | None
    window_s: float
    start: float
    end: float
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    ttft_p99_s: float | None
    ttft_p95_in_inf_bucket: bool  # the P95 rank fell in +Inf: the value is the largest finite bound
    itl_p95_s: float | None
    e2e_p95_s: float | None
    tokens_per_s: float | None
    prompt_tokens_per_s: float | None
    preemptions: float | None
    requests_per_s: float | None
    running_avg: float | None
    running_max: float | None
    waiting_max: float | None
    queue_depth_max: float | None
    kv_cache_usage_max: float | None  # 0–1
    ceiling_steps_per_s: float | None  # the report's ceiling: a bound on decode steps/s
    ceiling_share: float | None  # tokens_per_s ÷ ceiling_steps_per_s: "the report's % of ceiling", not efficiency
    ceiling: CeilingInfo | None
    gpus: tuple[GpuFigures, ...]
    last_scrape_at: float | None
    up: bool | None  # None when never scraped
    last_error: str | None
    scrapes: int  # rounds in the window
    failed_scrapes: int
    engine: str | None = None  # "vllm" or "sglang" (the last successful scrape's names)
    sleep_state: str | None = None  # at the window's last scrape: awake, weights_offloaded, discard_all
    admission_rejections_per_min: float | None = None
    requests_finished_per_s_by_reason: dict[str, float | None] = field(default_factory=dict)
    # The histogram bucket (lower, upper] holding each quantile ("ttft_p95_s" → (0.25, 0.5)): the
    # engine's buckets are all the server side knows; a client's own figure may differ within it.
    quantile_buckets: dict[str, tuple[float, float]] = field(default_factory=dict)
    mbu_source: str | None = None  # one of core.mbu.MBU_SOURCES; None: no source
    mbu_kv_source: str | None = None  # where the step model's KV term came from (db/mbu_figures.KV_*)
    dram_bw_source: str | None = None  # one of core.mbu.DRAM_SOURCES; None: no DRAM reading
    overhead_traffic_gbps: float | None = None  # (dram_bw_util − mbu) × peak, GB/s per GPU
    overhead_ratio: float | None = None  # dram_bw_util ÷ mbu: × the model's bytes the GPU moved
    mbu_engine: float | None = None  # vLLM's byte counters per GPU ÷ peak (--enable-mfu-metrics)
    mbu_modelled: float | None = None  # steps/s × bytes per step ÷ peak (the target's step model)
    # the measured step rate above the ceiling's bound: its inputs are wrong (core.mbu.check_step_bound)
    step_bound_breach: StepBoundBreach | None = None
    # TTFT SLO attainment (db/quantiles.py attainment_matrix): the share of requests whose TTFT was
    # within ttft_slo_s (0–1). Exact where the SLO is a bucket bound (ttft_slo_bounds None), else
    # interpolated between the bounds either side: (lower_le, lower_share, upper_le, upper_share).
    ttft_slo_attainment: float | None = None
    ttft_slo_bounds: tuple[float, float, float, float] | None = None
    # the same for the clients' share (the SLO less the gateway wait; None also where the gateway's own
    # wait histogram was convolved with the engine's: that share has no single pair of bounds)
    client_ttft_slo_bounds: tuple[float, float, float, float] | None = None
    ttft_slo_s: float | None = None  # the SLO it was judged against (the target's ttft_p95_slo_s)
    # the age (s) of the last scrape at ``end`` once past the target's stale_after_s (``up`` is then
    # False: nobody has read it for two intervals and a timeout); None: fresh, or never judged stale
    stale_s: float | None = None
    # when the collector started without this target in its settings (unix s; None: configured): it is
    # "not configured any more", never "down" (db/schema.py targets.retired_at)
    retired_at: float | None = None
    # where gateway_wait_s comes from ("measured: ..." the gateway's histogram, "estimate: Little's law ..."
    # and why the histogram did not serve), or why it is unknown; None: no gateway
    gateway_wait_source: str | None = None
    # without a ceiling: what the target lacks and which inputs it has (core.settings.ceiling_missing);
    # "" where the ceiling is known
    ceiling_missing: str = NO_CEILING

    def ttft_slo_in_p95_bucket(self) -> tuple[float, float] | None:
        """The TTFT P95's bucket (lower, upper] when the SLO lies strictly inside it: the buckets
        cannot tell whether the P95 meets the SLO (a P95 in (2.5, 5] against 3 s). None otherwise."""
        bucket = self.quantile_buckets.get("ttft_p95_s")
        if bucket is None or self.ttft_slo_s is None or not bucket[0] < self.ttft_slo_s < bucket[1]:
            return None
        return bucket


@dataclass(frozen=True)
class SeriesPoint(EngineFigures):
    """The figures of one step of a series (``ts`` = step start, unix seconds). None = no data: a gap."""

    ts: float
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    ttft_p99_s: float | None
    itl_p95_s: float | None
    e2e_p95_s: float | None
    tokens_per_s: float | None
    prompt_tokens_per_s: float | None
    preemptions: float | None
    requests_per_s: float | None
    running_avg: float | None
    running_max: float | None
    waiting_max: float | None
    queue_depth_max: float | None
    kv_cache_usage_max: float | None
    up_ratio: float | None  # share of successful scrapes in the step
    # preemptions ÷ the time their scrapes cover (a bar per step would spike after a gap otherwise)
    preemptions_per_s: float | None = None
    ttft_slo_attainment: float | None = None  # 0–1, against the target's stored ttft_p95_slo_s


@dataclass(frozen=True)
class GpuPoint:
    """One GPU in one step of a series."""

    ts: float
    uuid: str
    memory_used_bytes: float | None
    memory_total_bytes: float | None
    memory_busy_pct: float | None
    dram_bw_util_pct: float | None
    dram_bw_gbps: float | None
    power_w: float | None
    temperature_c: float | None


@dataclass(frozen=True)
class TargetInfo:
    """A target's health and configuration as stored."""

    name: str
    vllm_url: str
    up: bool | None
    last_scrape_at: float | None
    last_error: str | None
    metric_names_used: dict[str, str]
    missing_metrics: tuple[str, ...]
    models: tuple[str, ...]
    gpus: tuple[str, ...]  # UUIDs seen
    gpu_source: str
    gateway_source: str
    ceiling: CeilingInfo | None
    engine: str | None = None  # "vllm" or "sglang"
    metric_versions: dict[str, str] = field(default_factory=dict)  # key → versions its name implies
    cache_config: dict[str, str] = field(default_factory=dict)
    lora: dict[str, str] = field(default_factory=dict)  # newest vllm:lora_requests_info labels
    discovered_by: str | None = None  # the Prometheus source that found it; None: configured
    series_dropped: int = 0  # series of the last successful page left out over series_limit
    series_limit: int | None = None  # the max_series that page was read with
    stale_after_s: float | None = None  # seconds after the last scrape it reads stale (None: never)
    ceiling_missing: str = NO_CEILING  # without a ceiling: what it lacks, with the inputs set
    max_num_seqs: int | None = None  # the engine's running limit as configured (targets[].max_num_seqs)
    retired_at: float | None = None  # when the collector stopped having it in its settings (None: configured)

    def listed(self, now: float, shown_s: float) -> bool:
        """Still in the lists (Fleet, digest, ``status --all``): configured, or retired less than ``shown_s`` ago."""
        return self.retired_at is None or now - self.retired_at < shown_s

    def stale_age(self, now: float) -> float | None:
        """The age of the last scrape at ``now`` when it is past ``stale_after_s``; None while fresh."""
        return stale_age(self.last_scrape_at, now, self.stale_after_s)

    @property
    def prefix_caching(self) -> bool | None:
        """Whether the engine's config turns prefix caching on (vLLM's ``cache_config_info`` label
        ``enable_prefix_caching``); None where the engine does not say."""
        value = self.cache_config.get("enable_prefix_caching", "").strip().lower()
        return {"true": True, "false": False}.get(value)

    def health(self, now: float) -> bool | None:
        """``up``, but False once stale: a target nobody has read lately is not known to be up."""
        return False if self.stale_age(now) is not None else self.up


def stale_age(last_scrape_at: float | None, now: float, stale_after_s: float | None) -> float | None:
    """``now − last_scrape_at`` once it is past ``stale_after_s``; None while fresh or when unknown."""
    if last_scrape_at is None or stale_after_s is None:
        return None
    age = now - last_scrape_at
    return age if age > stale_after_s else None


@dataclass(frozen=True)
class BenchPoint:
    """One load level of an imported benchmark (``vllm bench serve``: the whole run; GuideLLM: one
    benchmark of its report). ``concurrency`` is where it sits on the Operating point's axis; its
    provenance in ``concurrency_source`` (``max_concurrency``, ``little`` = request/s × mean latency,
    ``measured mean``)."""

    concurrency: float
    concurrency_source: str
    tokens_per_s: float
    requests: int
    failed: int
    duration_s: float | None = None
    request_rate: float | None = None  # the configured rate; None: as fast as the limit allows
    ttft_p95_s: float | None = None
    itl_p95_s: float | None = None
    label: str = ""  # the level's setting in words: ``max_concurrency 8``, ``concurrent 16 streams``


@dataclass(frozen=True)
class BenchRun:
    """One imported benchmark file: what tool, when it ran, against what, with what settings."""

    tool: str  # "vllm bench serve" or "guidellm"
    run_at: float  # unix seconds the benchmark ran (the file's own date)
    model: str
    settings: dict[str, Any]
    points: tuple[BenchPoint, ...]
    file_name: str = ""
    target: str | None = None
    imported_at: float | None = None
    id: int | None = None


@dataclass(frozen=True)
class ConfigEpoch:
    """A target's configuration from ``ts`` on, as its /metrics page told it (db/epochs.py): ``kind`` is
    ``first`` (the first seen), ``config`` (a watched value changed: ``changes`` lists each as
    (key, before, after)), ``restart`` (a new process, the same configuration) or ``config+restart``."""

    target: str
    ts: float
    kind: str
    config: dict[str, str]
    changes: tuple[tuple[str, str, str], ...] = ()
    process_start_s: float | None = None

    def text(self) -> str:
        """``gpu_memory_utilization 0.92 → 0.95, block_size 16 → 32 (restart)``; ``restart``; ``first seen``."""
        said = ", ".join(f"{k} {b or '—'} → {a or '—'}" for k, b, a in self.changes)
        if self.kind == "first":
            return "first configuration seen"
        if "restart" in self.kind:
            return f"{said} (restart)" if said else "restart (same configuration)"
        return said


# Where a window's gateway wait comes from (WindowFigures.gateway_wait_source, db/pipeline.py wait_source)
LITTLE = "estimate: Little's law, the gateway queue's average ÷ the requests entering the engine per second"
WAIT_UNKNOWN = "unknown: requests waited in the gateway while none entered the engine"
MEASURED = "measured: the gateway's own wait histogram"


def wait_label(source: str | None) -> str:
    """A wait source in a few words, for tiles and e-mails: ``measured, <metric>``, ``estimate, Little's
    law`` or ``unknown``; "" without a gateway."""
    if source is None:
        return ""
    if source.startswith(MEASURED):
        name = source.removeprefix(MEASURED).split(",", 1)[0].strip()
        return f"measured, {name}" if name else "measured by the gateway"
    return "estimate, Little's law" if source.startswith(LITTLE) else "unknown"
