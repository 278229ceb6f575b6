"""The decode step model: what the bandwidth ceiling bounds, model bandwidth utilisation (MBU), the
GPU's DRAM bandwidth utilisation beside it, the per-step truth check and the roofline (docs/ceiling.md).

MBU counts the bytes the MODEL must read (vLLM's byte counters, else this step model); a GPU's DRAM
reading (NVML GPM, DCGM) counts every byte moved, and is its own figure: their gap is overhead traffic.

Every decode step reads each GPU's share of the weights once, plus the KV cache of the requests it
decodes, and yields one token for each running request. So, per GPU:

    bytes per step   = weight_bytes ÷ TP + running × mean context × KV bytes per token ÷ TP
    steps/s bound    = peak bandwidth ÷ (weight_bytes ÷ TP)       (the report's "ceiling": steps/s)
    MBU              = bytes per step × steps/s ÷ peak bandwidth  (0–1)
    roofline tok/s   = c × peak ÷ bytes per step(c)               (aggregate decode tok/s at c running)

The ceiling bounds decode STEPS per second (the most tokens/s ONE request can decode), not the
aggregate tokens/s of a batch: 180 steps/s on the reference, while 32 running requests may yield far
more tokens than 180 per second. Units: bytes and GB/s are decimal (1 GB = 1e9 bytes), as NVML's
peak-bandwidth formula and the configured weight sizes are.

Pure functions of numbers: no I/O, no settings (the layers above pass what they read or were given).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GB = 1e9

# Where an MBU figure came from, best first (docs/ceiling.md "Provenance"). MBU is always the MODEL's
# bytes: a GPU's DRAM reading is another figure (DRAM bandwidth utilisation, below), never MBU.
ENGINE = "engine estimate (vLLM byte counters)"
MODELLED = "modelled (steps/s × bytes per step)"
MBU_SOURCES = (ENGINE, MODELLED)
# Where a DRAM bandwidth utilisation came from: the GPU's own reading of every byte it moved.
DRAM_GPM = "NVML GPM"
DRAM_DCGM = "DCGM DRAM active"
DRAM_SOURCES = (DRAM_GPM, DRAM_DCGM)
# What the bytes moved beyond the model's are, in one sentence (tiles, status, the digest, docs).
OVERHEAD_CAUSES = (
    "bytes the GPU moved beyond what the model must read: KV-cache copies (a cache concatenated or "
    "written back each step), KV heads expanded for grouped-query attention, activations of unfused "
    "kernels, padding a static cache reads whole, and prefill"
)

# A measured step rate this much above the bound is past what the readings' noise explains (a step
# rate is a counter's rate over the window; its error is well under 5 %).
STEP_BOUND_TOLERANCE = 1.05


@dataclass(frozen=True, slots=True)
class StepModel:
    """A target's decode-step inputs. ``peak_gbps``: peak memory bandwidth per GPU; ``kv_bytes_per_token``:
    the KV cache one token of context holds over all layers and all GPUs (None: unknown, the model then
    counts the weights only and says so)."""

    weight_gb: float
    tensor_parallel: int
    peak_gbps: float
    kv_bytes_per_token: float | None = None

    @property
    def weight_bytes_per_gpu(self) -> float:
        return self.weight_gb * GB / max(self.tensor_parallel, 1)

    @property
    def step_bound_per_s(self) -> float:
        """Decode steps per second at most: one read of each GPU's weight share per step."""
        return self.peak_gbps * GB / self.weight_bytes_per_gpu

    def bytes_per_step(self, running: float, mean_context: float | None) -> float:
        """Bytes one decode step reads per GPU with ``running`` requests of ``mean_context`` tokens."""
        kv = 0.0
        if self.kv_bytes_per_token is not None and mean_context is not None:
            kv = max(running, 0.0) * max(mean_context, 0.0) * self.kv_bytes_per_token / max(self.tensor_parallel, 1)
        return self.weight_bytes_per_gpu + kv

    def mbu(self, steps_per_s: float, running: float, mean_context: float | None) -> float:
        """Modelled MBU (0–1) of ``steps_per_s`` decode steps with ``running`` requests."""
        return self.bytes_per_step(running, mean_context) * steps_per_s / (self.peak_gbps * GB)

    def bytes_per_step_tokens(self, kv_tokens: float | None) -> float:
        """Bytes one decode step reads per GPU when the KV cache it reads holds ``kv_tokens`` tokens
        (None: unknown, the weights only)."""
        if kv_tokens is None:
            return self.bytes_per_step(0.0, None)
        return self.bytes_per_step(1.0, kv_tokens)

    def roofline_tokens_per_s(self, concurrency: float, mean_context: float | None) -> float:
        """The most aggregate decode tok/s at ``concurrency`` running requests, if every step ran at
        peak bandwidth: c × peak ÷ bytes per step(c). Compute bounds it too at large batch (not here)."""
        return concurrency * self.peak_gbps * GB / self.bytes_per_step(concurrency, mean_context)

    def single_request_tokens_per_s(self, mean_context: float | None) -> float:
        """The most tok/s one request can decode (the roofline at concurrency 1)."""
        return self.roofline_tokens_per_s(1.0, mean_context)


@dataclass(frozen=True, slots=True)
class Mbu:
    """An MBU figure (0–1) and where it came from (one of :data:`MBU_SOURCES`)."""

    value: float
    source: str


@dataclass(frozen=True, slots=True)
class DramBw:
    """A GPU's DRAM bandwidth utilisation (0–1) and where it came from (one of :data:`DRAM_SOURCES`)."""

    value: float
    source: str


def dram_bw_util(dram_bw_util_pct: float | None, source: str = DRAM_GPM) -> DramBw | None:
    """DRAM bandwidth utilisation (0–1) from a GPU's own reading (GPM ``DRAM_BW_UTIL`` or DCGM
    ``DRAM_ACTIVE``, 0–100). It counts every byte the GPU moved, wasted or not: not MBU."""
    if dram_bw_util_pct is None or not math.isfinite(dram_bw_util_pct):
        return None
    return DramBw(dram_bw_util_pct / 100.0, source)


@dataclass(frozen=True, slots=True)
class Overhead:
    """The bytes the GPU moved beyond the model's: GB/s per GPU, and DRAM ÷ MBU (× the model's bytes)."""

    gbps: float
    ratio: float


def overhead_traffic(dram: float | None, mbu: float | None, peak_gbps: float | None) -> Overhead | None:
    """Overhead traffic per GPU: (DRAM utilisation − MBU) × peak, and DRAM ÷ MBU; None unless both
    figures and the peak are known and MBU is above zero. May be negative where the reading lags."""
    if dram is None or mbu is None or not peak_gbps or mbu <= 0:
        return None
    return Overhead((dram - mbu) * peak_gbps, dram / mbu)


def engine_mbu(engine_bytes_per_s_per_gpu: float | None, peak_gbps: float | None) -> Mbu | None:
    """MBU from vLLM's own byte estimate per GPU (read + write, a rate). vLLM exposes the counters at
    0 unless started with --enable-mfu-metrics: a zero rate is "not exposed", never 0 %."""
    if engine_bytes_per_s_per_gpu is None or not peak_gbps or not math.isfinite(engine_bytes_per_s_per_gpu):
        return None
    if engine_bytes_per_s_per_gpu <= 0:
        return None
    return Mbu(engine_bytes_per_s_per_gpu / (peak_gbps * GB), ENGINE)


def modelled_mbu(model: StepModel | None, steps_per_s: float | None, running: float | None,
                 mean_context: float | None, kv_tokens: float | None = None, engines: float | None = 1) -> Mbu | None:  # fmt: skip
    """MBU from the step model: needs the target's inputs and a step rate. ``kv_tokens``: the KV
    cache's resident tokens (kv_cache_usage_perc × kv_cache_size_tokens, every engine together),
    else ``running`` × ``mean_context`` (the request-length estimate). ``engines``: data-parallel
    engines, each its own step stream over its own GPUs (:func:`per_engine`)."""
    if model is None or steps_per_s is None or not math.isfinite(steps_per_s):
        return None
    steps, tokens = per_engine(steps_per_s, kv_tokens_read(running, mean_context, kv_tokens), engines)
    return Mbu(model.bytes_per_step_tokens(tokens) * steps / (model.peak_gbps * GB), MODELLED)


def kv_tokens_read(running: float | None, mean_context: float | None, kv_tokens: float | None) -> float | None:
    """The KV tokens a step reads (all engines): the cache's resident tokens, else running × mean
    context, else None (the step model then counts the weights only)."""
    if kv_tokens is not None and math.isfinite(kv_tokens):
        return max(kv_tokens, 0.0)
    if mean_context is None or not math.isfinite(mean_context):
        return None
    return max(running or 0.0, 0.0) * max(mean_context, 0.0)


def per_engine(steps_per_s: float, kv_tokens: float | None, engines: float | None) -> tuple[float, float | None]:
    """One engine's steps/s and KV tokens out of a target's totals over ``engines`` data-parallel
    engines. Each engine steps on its own GPUs, so a target's MBU is the mean over its engines
    (weighted by their GPUs, equal within a target): the weights term of the mean is exact from the
    totals; the KV term is exact when the engines hold alike caches (the scheduler balances them)."""
    n = max(engines or 1.0, 1.0)
    return steps_per_s / n, None if kv_tokens is None else kv_tokens / n


def best_mbu(*candidates: Mbu | None) -> Mbu | None:
    """The first figure present, in the order given (callers pass engine, modelled)."""
    return next((c for c in candidates if c is not None), None)


def kv_bytes_per_token(kv_cache_memory_bytes: float | None, num_gpu_blocks: float | None,
                       block_size: float | None, tensor_parallel: int) -> float | None:  # fmt: skip
    """KV bytes per token of context (all GPUs) from vLLM's ``cache_config_info``: the KV memory of one
    GPU ÷ the tokens its blocks hold, × TP (each GPU holds its share of every token's heads)."""
    if not kv_cache_memory_bytes or not num_gpu_blocks or not block_size:
        return None
    return kv_cache_memory_bytes / (num_gpu_blocks * block_size) * max(tensor_parallel, 1)


@dataclass(frozen=True, slots=True)
class StepBoundBreach:
    """The engine made more decode steps per second than the inputs allow: at least one is wrong."""

    steps_per_s: float
    bound_per_s: float
    weight_gb: float
    tensor_parallel: int
    peak_gbps: float
    max_weight_gb: float  # the largest weight size these steps allow with this TP and bandwidth
    min_peak_gbps: float  # the least bandwidth these steps need with these weights and TP

    def message(self) -> str:
        return (
            f"the engine made {self.steps_per_s:.0f} decode steps/s, more than the {self.bound_per_s:.0f} "
            f"steps/s that {self.peak_gbps:.0f} GB/s per GPU allows for {self.weight_gb:g} GB of weights over "
            f"TP {self.tensor_parallel}: the ceiling's inputs are wrong. Either the weights are at most "
            f"{self.max_weight_gb:.1f} GB (targets[].ceiling.weight_gb), the tensor-parallel size is larger "
            f"(targets[].ceiling.tensor_parallel), or the bandwidth is at least {self.min_peak_gbps:.0f} GB/s "
            "(targets[].ceiling.bandwidth_gbps)"
        )


def check_step_bound(model: StepModel | None, steps_per_s: float | None,
                     engines: float | None = 1) -> StepBoundBreach | None:  # fmt: skip
    """A breach when one engine's step rate (the target's ÷ its ``engines``: data-parallel engines
    step on their own GPUs) exceeds the model's bound (beyond the tolerance)."""
    if model is None or steps_per_s is None or not math.isfinite(steps_per_s):
        return None
    steps_per_s = steps_per_s / max(engines or 1.0, 1.0)
    bound = model.step_bound_per_s
    if steps_per_s <= bound * STEP_BOUND_TOLERANCE:
        return None
    tp = max(model.tensor_parallel, 1)
    return StepBoundBreach(
        steps_per_s=steps_per_s,
        bound_per_s=bound,
        weight_gb=model.weight_gb,
        tensor_parallel=model.tensor_parallel,
        peak_gbps=model.peak_gbps,
        max_weight_gb=model.peak_gbps / steps_per_s * tp,
        min_peak_gbps=steps_per_s * model.weight_bytes_per_gpu / GB,
    )
