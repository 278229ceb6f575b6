"""One rule picks the bandwidth figure (GPU.md): the GPUs page's table says what the collectors'
bandwidth_figure picks for the same numbers."""

from __future__ import annotations

import dataclasses

import pytest

from app.ui.widgets import bandwidth_text
from collectors.bandwidth import bandwidth_figure
from collectors.records import GpuReading
from tests.fake_reader import gpu


@pytest.mark.parametrize(
    ("util", "busy", "peak", "source", "shown"),
    [
        (50.0, 71.0, 4800.0, "gpm", "2,400 GB/s (gpm)"),  # a true share with the peak: GB/s, busy ignored
        (50.0, 71.0, None, "dcgm", "50 % of peak (dcgm)"),  # no peak: the share only
        (None, 71.0, 898.0, None, "71 % busy (time-based, not bandwidth)"),  # never GB/s from busy time
        (None, None, 898.0, None, "—"),
    ],
)
def test_the_table_and_the_collectors_pick_the_same_figure(util, busy, peak, source, shown):
    figures = dataclasses.replace(
        gpu(0), dram_bw_util_pct_avg=util, memory_busy_pct_avg=busy, peak_bw_gbps=peak, dram_bw_source=source,
        dram_bw_gbps_avg=None if util is None or peak is None else util / 100 * peak,
    )  # fmt: skip
    assert bandwidth_text(figures) == shown
    reading = GpuReading(
        uuid="GPU-0", dram_bw_util_pct=util, memory_busy_pct=busy, peak_bw_gbps=peak, dram_bw_source=source
    )
    figure = bandwidth_figure(reading)
    assert (figure is None) == (shown == "—")
    if figure is not None:
        assert figure.time_based == ("busy" in shown) and (figure.gbps is not None) == ("GB/s" in shown)
