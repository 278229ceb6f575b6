"""The headroom forecast (app/headroom.py) against a known growth, over many simulated histories.

Run: ``.venv/bin/python bench/bench_headroom.py [--seeds 8]``. For each seed, history length (14, 21,
30 days), growth (0, 1, 3, 5 % a day) and how far ahead the true crossing lies (about 10 or 25 days),
the daily peak-hour demand db/peaks.py reads is computed from the simulator's daily pattern (its
incidents included, 5 % log-normal noise per minute, the 5-minute steps' hourly median, the second
busiest hour; no storage: tests/test_headroom.py runs the same through a real SQLite file) and
forecast against a sweet spot of 16. The truth: the first day the pattern's demand without incidents
or noise reaches 16. Prints, per growth, how often the forecast said what is true (flat: no trend;
growth: a crossing whose range holds the true day), the median range relative to the true day, and
the seconds per fit.

Then the recent turn (issue 37): on ``--turn-seeds`` (20) seeds, a month flat at 8 that began growing
5 %/day ten days ago must give a crossing whose range holds the true day, while a month flat (no
weekend), the simulator's flat week (weekends at 60 %) and a step change (8, then 11 from day 15) must
keep "no trend". Prints the counts (the goal: at least 15 of 20 and 18 of 20).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/…` as `make bench` runs it

from app.headroom import CROSSING, NO_TREND, forecast
from simulator.pattern import DAY_S, DailyPattern

CAPACITY = 16.0
STEP_S = 300


def peak(values: list[list[float]]) -> float:
    return sorted(statistics.median(hour) for hour in values)[-2]


def observed(pattern: DailyPattern, first_day: float, days: int, rng: random.Random) -> list[float | None]:
    out: list[float | None] = []
    for d in range(days):
        day = first_day + d * DAY_S
        hours = [[pattern.state(day + h * 3600 + s).clients * rng.lognormvariate(0.0, 0.05) for s in range(0, 3600, STEP_S)]
                 for h in range(24)]  # fmt: skip
        out.append(peak(hours))
    return out


def truth(pattern: DailyPattern, today: float) -> int:
    for d in range(400):
        day = today + d * DAY_S
        if peak([[pattern.baseline(day + h * 3600 + s) for s in range(0, 3600, STEP_S)] for h in range(24)]) >= CAPACITY:
            return d + 1
    return 400


def turn_counts(seeds: int = 20, days: int = 30) -> dict[str, int]:
    """Per history kind, on ``seeds`` seeds: "turn" how often the crossing's range holds the true day;
    the others how often the forecast says no trend (see the module docstring)."""
    counts = {"turn": 0, "flat": 0, "weekly": 0, "step": 0}
    for seed in range(seeds):
        today = (20000 + 7 * seed) * DAY_S
        first = today - days * DAY_S
        rng = random.Random(seed)
        turn = DailyPattern(seed, 8.0, 0.05, today - 10 * DAY_S)
        room = forecast(observed(turn, first, days, rng), CAPACITY)
        true_day = truth(turn, today)
        counts["turn"] += room.state == CROSSING and (room.earliest or 0) <= true_day <= (room.latest or 10**9)
        flat = [10.0 * rng.lognormvariate(0.0, 0.05) for _ in range(days)]
        weekly = observed(DailyPattern(seed, 10.0), first, days, rng)
        step = observed(DailyPattern(seed, 8.0), first, 15, rng) + observed(DailyPattern(seed, 11.0), first + 15 * DAY_S,
                                                                         days - 15, rng)  # fmt: skip
        for name, peaks in (("flat", flat), ("weekly", weekly), ("step", step)):
            counts[name] += forecast(peaks, CAPACITY).state == NO_TREND
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--turn-seeds", type=int, default=20)
    args = parser.parse_args()
    counts = turn_counts(args.turn_seeds)
    print(f"recent turn (flat 8, +5 %/day from 10 days ago, against {CAPACITY:g}): crossing with the true day in "
          f"range {counts['turn']}/{args.turn_seeds}; no trend kept: flat {counts['flat']}/{args.turn_seeds}, weekly "
          f"{counts['weekly']}/{args.turn_seeds}, step {counts['step']}/{args.turn_seeds}")  # fmt: skip
    forecast([5.0 + d for d in range(14)], CAPACITY)  # statsmodels imported and warm
    rows: dict[float, list[tuple[bool, float | None, float]]] = {}
    states: dict[float, dict[str, int]] = {}
    for seed in range(args.seeds):
        for days in (14, 21, 30):
            for growth in (0.0, 0.01, 0.03, 0.05):
                for ahead in (10, 25) if growth else (0,):
                    today = (20000 + 3 * seed + days) * DAY_S
                    base = CAPACITY / (1 + growth) ** (days + ahead) if growth else 12.0
                    pattern = DailyPattern(seed, base, growth, today - days * DAY_S)
                    peaks = observed(pattern, today - days * DAY_S, days, random.Random(seed))
                    started = time.perf_counter()
                    room = forecast(peaks, CAPACITY)
                    took = time.perf_counter() - started
                    states.setdefault(growth, {}).setdefault(room.state, 0)
                    states[growth][room.state] += 1
                    if not growth:
                        rows.setdefault(growth, []).append((room.state == NO_TREND, None, took))
                        continue
                    true_day = truth(pattern, today)
                    latest = room.latest or 10**9
                    hit = room.state == CROSSING and (room.earliest or 0) <= true_day <= latest
                    width = (min(latest, 90) - (room.earliest or 0)) / true_day if room.state == CROSSING else None
                    rows.setdefault(growth, []).append((hit, width, took))
    for growth, results in sorted(rows.items()):
        hits = sum(r[0] for r in results)
        widths = [r[1] for r in results if r[1] is not None]
        times = sorted(r[2] for r in results)
        what = "no trend" if not growth else "crossing, true day in range"
        print(f"growth {growth * 100:.0f} %/day: {what} {hits}/{len(results)}; median range width "
              f"{statistics.median(widths) if widths else float('nan'):.2f} × the true days; fit median "
              f"{statistics.median(times) * 1000:.0f} ms, max {times[-1] * 1000:.0f} ms; said: {states[growth]}")  # fmt: skip


if __name__ == "__main__":
    main()
