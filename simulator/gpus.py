"""The eight simulated V100s as dcgm-exporter would report them, derived from the engine's load.

Memory: vLLM reserves its whole budget at start (weights + non-KV reserve + the KV pool), so
``FB_USED`` is constant while the engine is up and does not follow KV usage. Bandwidth: the bytes the
engine's steps move (the step model, simulator/params.py: weights ÷ TP once per step plus the KV the
step reads and writes) over the reading's interval ÷ peak bandwidth, so ``DRAM_ACTIVE`` is the same
figure as the engine's byte counters ÷ peak, and as steps/s × bytes per step ÷ peak (docs/simulator.md).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from functools import lru_cache

from simulator.expo import GpuView
from simulator.params import EngineParams

MIB = 1024 * 1024
CUDA_CONTEXT_MIB = 310.0  # driver context on each GPU, outside vLLM's budget
IDLE_POWER_W = 60.0
MAX_POWER_W = 300.0


@dataclass(frozen=True)
class Load:
    """What the engine did over an interval of simulated time, as rates."""

    bytes_per_s: float  # bytes read and written per GPU by the engine's steps
    busy: float  # fraction 0–1 of the interval the engine was running a step


@lru_cache(maxsize=256)
def gpu_uuid(index: int, seed: int) -> str:
    """A stable GPU UUID for the simulated host (same seed → same UUIDs across restarts)."""
    return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_OID, f"sweetspot-sim-{seed}-{index}"))


def gpu_views(params: EngineParams, load: Load, up: bool = True, seed: int = 0, count: int = 8) -> list[GpuView]:
    """GPU figures for an engine under ``load``."""
    total_mib = params.gpu_memory_bytes / MIB
    reserved = params.weight_bytes_per_gpu + params.non_kv_reserved_bytes + params.kv_pool_bytes()
    used_mib = reserved / MIB + CUDA_CONTEXT_MIB if up else 0.0
    dram = min(0.99, load.bytes_per_s / params.bandwidth_bytes_s) if up else 0.0
    busy = min(1.0, max(0.0, load.busy)) if up else 0.0
    views = []
    for index in range(count):
        skew = 1.0 + 0.01 * ((index * 37 + seed) % 5 - 2)  # GPUs of one TP group differ by a few percent
        power = min(MAX_POWER_W, IDLE_POWER_W + (MAX_POWER_W - IDLE_POWER_W) * (0.55 * dram + 0.35 * busy) * skew)
        views.append(GpuView(
            index=index,
            uuid=gpu_uuid(index, seed),
            fb_used_mib=round(used_mib),
            fb_free_mib=round(total_mib - used_mib),
            # Tensor parallelism gives every GPU the same share of each step's bytes: no skew here.
            dram_active=round(dram, 5),
            # Time-based "memory busy" saturates well before the bandwidth does (GPU.md).
            mem_copy_util=round(min(100.0, 100.0 * (1.25 * dram + 0.1 * busy) * skew)),
            gpu_util=round(min(100.0, 100.0 * busy * skew)),
            power_w=round(power, 3),
            temp_c=round(34.0 + 0.16 * (power - IDLE_POWER_W) + index % 3),
        ))
    return views
