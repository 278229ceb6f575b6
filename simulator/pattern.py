"""The "daily" load pattern: demand rising and falling through the day, with occasional incidents.

Demand is the number of closed-loop clients (users with a request in the system). Peaks reach
``peak_clients`` (default 28, above the sweet spot of 16, so the gateway queue grows at peaks).
Incidents are drawn per day from the seed, so the live load and the history generator agree:
- ``burst``: demand × 2.2 for 20 minutes (the gateway queue jumps);
- ``storm``: someone bypasses the gateway (limit 64) and runs vLLM with max-num-seqs 64 for 15
  minutes while 64 clients push: the KV cache runs out and sequences are preempted;
- ``restart``: vLLM restarts (always at the end of a storm, and on some nights a deploy at 03:xx).
Times are unix seconds (UTC).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import lru_cache

DAY_S = 86400.0
STORM_CLIENTS = 64
STORM_LIMIT = 64


@dataclass(frozen=True)
class Incident:
    kind: str  # "burst", "storm" or "restart"
    start: float
    end: float


@dataclass(frozen=True)
class PatternState:
    """What the pattern asks for at one instant."""

    clients: float
    storm: bool
    burst: bool


def day_shape(hour: float) -> float:
    """Relative demand (0–1) by hour of day: a night floor, a morning and an afternoon peak."""
    def bump(center: float, width: float) -> float:
        return math.exp(-0.5 * ((hour - center) / width) ** 2)

    return min(1.0, 0.08 + 0.92 * max(bump(10.5, 1.8), 0.95 * bump(15.0, 2.0), 0.35 * bump(20.5, 1.5)))


@lru_cache(maxsize=64)
def incidents(seed: int, day: int) -> tuple[Incident, ...]:
    """The incidents of day number ``day`` (days since the unix epoch)."""
    rng = random.Random(f"sweetspot-daily:{seed}:{day}")
    base = day * DAY_S
    out = []
    if rng.random() < 0.5:
        start = base + rng.uniform(9.5, 16.5) * 3600
        out.append(Incident("burst", start, start + 20 * 60))
    if rng.random() < 0.35:
        start = base + rng.uniform(11.0, 17.0) * 3600
        out.append(Incident("storm", start, start + 15 * 60))
        out.append(Incident("restart", start + 15 * 60, start + 15 * 60))
    if rng.random() < 0.3:
        start = base + rng.uniform(3.0, 4.0) * 3600
        out.append(Incident("restart", start, start))
    return tuple(sorted(out, key=lambda i: i.start))


class DailyPattern:
    """Demand and incidents of the daily pattern for one seed."""

    def __init__(self, seed: int = 0, peak_clients: float = 28.0, growth_per_day: float = 0.0, growth_from: float = 0.0) -> None:
        self.seed = seed
        self.peak_clients = peak_clients
        self.growth_per_day = growth_per_day  # demand × (1 + this) a day since growth_from (unix s)
        self.growth_from = growth_from

    def growth(self, ts: float) -> float:
        """The growth knob's factor at ``ts``: 1 without growth or before ``growth_from``."""
        days = max(0.0, ts - self.growth_from) / DAY_S
        return (1.0 + self.growth_per_day) ** days if self.growth_per_day else 1.0

    def baseline(self, ts: float) -> float:
        """The demand (clients) at ``ts`` without the day's incidents: the day's shape, the weekend, growth."""
        day = int(ts // DAY_S)
        hour = (ts - day * DAY_S) / 3600.0
        weekend = (day + 4) % 7 in (5, 6)  # 1970-01-01 was a Thursday
        return self.peak_clients * day_shape(hour) * (0.6 if weekend else 1.0) * self.growth(ts)

    def state(self, ts: float) -> PatternState:
        day = int(ts // DAY_S)
        clients = self.baseline(ts)
        storm = burst = False
        for incident in incidents(self.seed, day):
            if incident.start <= ts < incident.end:
                burst |= incident.kind == "burst"
                storm |= incident.kind == "storm"
        if burst:
            clients *= 2.2
        if storm:
            clients = STORM_CLIENTS
        return PatternState(clients, storm, burst)

    def restarts_between(self, start: float, end: float) -> list[float]:
        """Restart times in [start, end)."""
        out = []
        for day in range(int(start // DAY_S), int(end // DAY_S) + 1):
            out += [i.start for i in incidents(self.seed, day) if i.kind == "restart" and start <= i.start < end]
        return out
