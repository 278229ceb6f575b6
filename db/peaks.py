"""Each day's peak-hour demand, from a target's stored series (the headroom forecast's input, app/headroom.py).

Demand is what compares to the sweet-spot concurrency: the requests in the system, running in the
engine + waiting in vLLM + queued at the gateway (each a step's average; a missing waiting or queue
figure counts 0, a step without running requests is no data). Output tok/s cannot say it: past the knee
it stays on its plateau while the queue grows.

A day (UTC) is read as 5-minute steps; an hour's demand is the median of its steps (an hour counts
with data in at least half of them), so a burst shorter than half an hour does not move it; the day's
peak-hour demand is its *second*-busiest hour, so one incident (a storm, a burst, a load test) that
lifts a whole hour does not either. A day counts with at least ``MIN_HOURS`` such hours, else it is
missing (None): an outage, a day before the target's first scrape.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

DAY_S = 86400.0
STEP_S = 300.0
STEPS_PER_HOUR = 12
MIN_STEPS = STEPS_PER_HOUR // 2  # an hour counts with data in at least half its steps
MIN_HOURS = 18  # a day counts with at least this many hours
FIELDS = ("running_avg", "waiting_avg", "queue_depth_avg")


@dataclass(frozen=True)
class DailyPeak:
    """One UTC day: its start (unix s) and its peak-hour demand in requests (None: too little data)."""

    day: float
    demand: float | None


def daily_peaks(columns: dict[str, list[Any]], first_day: float, days: int) -> list[DailyPeak]:
    """The ``days`` days from ``first_day`` (a UTC midnight) of ``columns`` (the facade's 5-minute
    series of ``FIELDS`` with ``ts``)."""
    hours: dict[int, list[float]] = {}
    for ts, running, waiting, queue in zip(columns["ts"], *(columns[f] for f in FIELDS), strict=True):
        if running is None or not math.isfinite(running):
            continue
        demand = running + _or_zero(waiting) + _or_zero(queue)
        hours.setdefault(int((ts - first_day) // 3600), []).append(demand)
    return [DailyPeak(first_day + d * DAY_S, _peak([hours.get(d * 24 + h, []) for h in range(24)])) for d in range(days)]


def _peak(hours: Sequence[list[float]]) -> float | None:
    medians = sorted(statistics.median(steps) for steps in hours if len(steps) >= MIN_STEPS)
    return medians[-2] if len(medians) >= MIN_HOURS else None


def _or_zero(value: float | None) -> float:
    return value if value is not None and math.isfinite(value) else 0.0
