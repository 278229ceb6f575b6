"""Which bandwidth figure to show for a GPU, in the order GPU.md sets, as one rule for a reading
(collectors/bandwidth.py) and for a window's averages (the GPUs page's table); and the one rule for
a GPU's PEAK bandwidth (:func:`peak_bandwidth`: configured, else the GPU's reading, else the datasheet),
which the ceiling and every MBU route call.

1. GPM ``DRAM_BW_UTIL`` (NVML, Hopper and newer) → GB/s = % × peak.
2. dcgm-exporter ``DCGM_FI_PROF_DRAM_ACTIVE`` → GB/s = % × peak.
3. NVML memory-busy %: the share of TIME the memory was read or written. It is shown as a time
   figure and never converted to GB/s (an H200 copying at 88.5 % of peak reads 100 % busy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BandwidthFigure:
    """``pct``: 0–100. ``gbps``: None unless ``pct`` is a true bandwidth share and the peak is known."""

    pct: float
    gbps: float | None
    source: str  # "gpm", "dcgm" or "memory-busy"
    time_based: bool  # True for memory-busy: % of time, not % of bandwidth


def choose_bandwidth(
    dram_bw_util_pct: float | None, memory_busy_pct: float | None, peak_bw_gbps: float | None, source: str
) -> BandwidthFigure | None:
    """The best of a DRAM bandwidth share (``source``: "gpm" or "dcgm") and the memory-busy time share,
    both 0–100; GB/s only from the first, with the peak. None when both are None."""
    if dram_bw_util_pct is not None:
        gbps = None if peak_bw_gbps is None else dram_bw_util_pct / 100.0 * peak_bw_gbps
        return BandwidthFigure(dram_bw_util_pct, gbps, source, False)
    if memory_busy_pct is not None:
        return BandwidthFigure(memory_busy_pct, None, "memory-busy", True)
    return None


# --- Peak bandwidth: one rule -----------------------------------------------------------------------

CONFIG, READING, DATASHEET = "config", "nvml-formula", "datasheet"


@dataclass(frozen=True, slots=True)
class PeakBandwidth:
    """Peak memory bandwidth per GPU in GB/s (10⁹ B/s) and where it came from: ``config``,
    ``nvml-formula`` (the GPU's own reading: bus width × max memory clock × 2 ÷ 8) or
    ``datasheet: H200`` (core/gpu_specs.json by the GPU's name)."""

    gbps: float
    source: str


def peak_bandwidth(configured: float | None, readings: Sequence[float | None] = (),
                   gpu_names: Sequence[str | None] = ()) -> PeakBandwidth | None:  # fmt: skip
    """THE precedence every MBU route and the ceiling use (DOMAIN.md §1, GPU.md): the configured value
    (targets[].ceiling.bandwidth_gbps: NVML's formula is wrong for some memory types), else the GPUs'
    own readings, else the datasheet's figure for the GPUs' names; the slowest GPU where several differ
    (a tensor-parallel step waits for it); None where none is known (an unknown name: no guess)."""
    if configured is not None and math.isfinite(configured) and configured > 0:
        return PeakBandwidth(configured, CONFIG)
    read = [r for r in readings if r is not None and math.isfinite(r) and r > 0]
    if read:
        return PeakBandwidth(min(read), READING)
    from core.roofline import match_gpu

    specs = [match_gpu(n) for n in gpu_names]
    if not specs or any(s is None or not s.memory_gbps for s in specs):
        return None
    slowest = min((s for s in specs if s is not None), key=lambda s: s.memory_gbps or math.inf)
    return PeakBandwidth(float(slowest.memory_gbps or 0.0), f"{DATASHEET}: {slowest.name}")
