"""Which bandwidth figure to chart for one GPU reading, in the order GPU.md sets.

1. GPM ``DRAM_BW_UTIL`` (NVML, Hopper and newer) → GB/s = % × peak.
2. dcgm-exporter ``DCGM_FI_PROF_DRAM_ACTIVE`` → GB/s = % × peak.
3. NVML memory-busy %: the share of TIME the memory was read or written. It is shown as a time
   figure and never converted to GB/s (an H200 copying at 88.5 % of peak reads 100 % busy).
"""

from __future__ import annotations

from dataclasses import dataclass

from collectors.records import GpuReading


@dataclass(frozen=True, slots=True)
class BandwidthFigure:
    """``pct``: 0–100. ``gbps``: None unless ``pct`` is a true bandwidth share and the peak is known."""

    pct: float
    gbps: float | None
    source: str  # "gpm", "dcgm" or "memory-busy"
    time_based: bool  # True for memory-busy: % of time, not % of bandwidth


def bandwidth_figure(reading: GpuReading) -> BandwidthFigure | None:
    """The best bandwidth figure of ``reading``; None when it has none at all."""
    if reading.dram_bw_util_pct is not None:
        peak = reading.peak_bw_gbps
        gbps = None if peak is None else reading.dram_bw_util_pct / 100.0 * peak
        return BandwidthFigure(reading.dram_bw_util_pct, gbps, reading.dram_bw_source or "gpm", False)
    if reading.memory_busy_pct is not None:
        return BandwidthFigure(reading.memory_busy_pct, None, "memory-busy", True)
    return None
