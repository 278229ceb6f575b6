"""The bandwidth figure of one GPU reading, by the one rule in core/bandwidth.py."""

from __future__ import annotations

from collectors.records import GpuReading
from core.bandwidth import BandwidthFigure, choose_bandwidth

__all__ = ["BandwidthFigure", "bandwidth_figure", "choose_bandwidth"]


def bandwidth_figure(reading: GpuReading) -> BandwidthFigure | None:
    """The best bandwidth figure of ``reading``; None when it has none at all."""
    source = reading.dram_bw_source or "gpm"
    return choose_bandwidth(reading.dram_bw_util_pct, reading.memory_busy_pct, reading.peak_bw_gbps, source)
