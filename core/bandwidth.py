"""Which bandwidth figure to show for a GPU, in the order GPU.md sets, as one rule for a reading
(collectors/bandwidth.py) and for a window's averages (the GPUs page's table).

1. GPM ``DRAM_BW_UTIL`` (NVML, Hopper and newer) → GB/s = % × peak.
2. dcgm-exporter ``DCGM_FI_PROF_DRAM_ACTIVE`` → GB/s = % × peak.
3. NVML memory-busy %: the share of TIME the memory was read or written. It is shown as a time
   figure and never converted to GB/s (an H200 copying at 88.5 % of peak reads 100 % busy).
"""

from __future__ import annotations

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
