"""The simulated dcgm-exporter: it reads the GPUs once per collect interval and serves that page until
the next reading, as the real exporter does.

DCGM aggregates its profiling fields (``DCGM_FI_PROF_*``) over the watch's update interval, which
dcgm-exporter sets to its collect interval: a reading's ``DRAM_ACTIVE`` is the mean since the previous
reading, so two readings and two /metrics scrapes at the same instants see the same steps. Below
RATE_WINDOW_S (``--dcgm-interval 0``: a reading at every GET) the last RATE_WINDOW_S are averaged
instead: a reading only a few steps long would jitter.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.expo import dcgm_text
from simulator.gpus import gpu_views
from simulator.live import RATE_WINDOW_S, LiveEngine
from simulator.params import EngineParams


@dataclass(frozen=True)
class DcgmReading:
    at: float  # simulated unix seconds
    page: bytes  # dcgm-exporter's text


def dcgm_reading(live: LiveEngine, params: EngineParams, previous: DcgmReading | None, interval_s: float,
                 seed: int, hostname: str) -> DcgmReading:  # fmt: skip
    """The reading in force now: ``previous`` until ``interval_s`` simulated seconds have passed."""
    now = live.clock.now()
    if previous is not None and now - previous.at < interval_s:
        return previous
    since = previous.at if previous is not None and now - previous.at >= RATE_WINDOW_S else None
    return DcgmReading(now, dcgm_text(gpu_views(params, live.load(since), seed=seed), hostname).encode())
