"""Storage benchmark: 30 days of 5 s history for one target through the real writer, then queries.

Prints figures (not a unit test). Run from the repo root:

    .venv/bin/python bench/bench_store.py [--days 30] [--db sqlite:///path] [--prometheus]

Goals (issue 2): ingest ≥ 2000 rounds/s; writer CPU part of ≤ 1 ms/round; tok/s per minute over
24 h ≤ 3 ms; TTFT P95 per 5 min over 7 d ≤ 25 ms; per hour over 30 d ≤ 50 ms; disk ≤ 33 MB.
Rollup and retention run after every simulated day, as the scheduler would, so the file size is
the steady state (SQLite reuses freed pages; no VACUUM).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.synth import rounds  # noqa: E402
from core.settings import Settings, TargetSettings  # noqa: E402
from db.engine import open_engine  # noqa: E402
from db.queries import Reader  # noqa: E402
from db.rollup import apply_retention, rollup  # noqa: E402
from db.writer import Writer  # noqa: E402

DAY = 86400
SETTINGS = Settings(raw_retention_s=2 * DAY, rollup_retention_s=30 * DAY, hourly_retention_s=400 * DAY)


def timed(fn: Callable[[], Any], repeat: int = 40) -> tuple[float, float, Any]:
    """Fastest and median wall time in ms of ``repeat`` runs after one warm-up, and the last result.

    On a shared machine the fastest run is what the code costs; the median shows the load.
    """
    result = fn()
    wall = []
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        wall.append((time.perf_counter() - t) * 1000)
    return min(wall), statistics.median(wall), result


def ingest(db_url: str, start: int, days: int) -> dict[str, float]:
    engine = open_engine(db_url)
    writer = Writer(engine)
    writer.register_target(TargetSettings(name="bench"))
    wall = cpu = upkeep = 0.0
    count = 0
    for day in range(days):
        batch = list(
            rounds(
                "bench",
                start + day * DAY,
                start + (day + 1) * DAY,
                seed=day + 1,
                restart_at=start + day * DAY + 7 * 3600 if day % 10 == 3 else None,
            )
        )
        t, c = time.perf_counter(), time.process_time()
        count += writer.write_rounds(batch)
        wall += time.perf_counter() - t
        cpu += time.process_time() - c
        t = time.perf_counter()
        rollup(engine, start + (day + 1) * DAY)
        apply_retention(engine, start + (day + 1) * DAY, SETTINGS)
        upkeep += time.perf_counter() - t
        print(f"  day {day + 1:2d}/{days}: {count} rounds", file=sys.stderr, end="\r")
    print(file=sys.stderr)
    live, live_cpu = _live_rounds(writer, start + days * DAY)
    wal = disk_mb(db_url) - Path(db_url.removeprefix("sqlite:///")).stat().st_size / 1e6 if "sqlite" in db_url else 0
    writer.close()
    engine.dispose()  # the last connection closing checkpoints and removes the WAL
    return {
        "wal_mb_while_running": wal,
        "live_ms_per_round": live,
        "live_cpu_ms_per_round": live_cpu,
        "rounds": count,
        "rounds_per_s": count / wall,
        "cpu_us_per_round": cpu / count * 1e6,
        "upkeep_s_per_day": upkeep / days,
    }


def _live_rounds(writer: Writer, start: int, n: int = 300) -> tuple[float, float]:
    """ms per round through write_round (one transaction each: the live collector's path)."""
    batch = list(rounds("bench", start, start + n * 5, seed=99))
    t, c = time.perf_counter(), time.process_time()
    for r in batch:
        writer.write_round(r)
    return (time.perf_counter() - t) / n * 1000, (time.process_time() - c) / n * 1000


def disk_mb(db_url: str) -> float:
    path = Path(db_url.removeprefix("sqlite:///"))
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*")) / 1e6


def queries(db_url: str, end: int) -> dict[str, tuple[float, float, int]]:
    reader = Reader(db_url)
    cases = {
        "tok/s per minute over 24 h (series_columns)": lambda: reader.series_columns(
            "bench", end - DAY, end, 60, fields=["tokens_per_s"]
        )["tokens_per_s"],
        "tok/s per minute over 24 h (series, SeriesPoint objects)": lambda: reader.series(
            "bench", end - DAY, end, 60, fields=["tokens_per_s"]
        ),
        "TTFT P95 per 5 min over 7 d": lambda: reader.series_columns(
            "bench", end - 7 * DAY, end, 300, fields=["ttft_p95_s"]
        )["ttft_p95_s"],
        "TTFT P95 per hour over 30 d": lambda: reader.series_columns(
            "bench", end - 30 * DAY, end, 3600, fields=["ttft_p95_s"]
        )["ttft_p95_s"],
        "every figure per minute over 24 h (series)": lambda: reader.series("bench", end - DAY, end, 60),
        "status window 5 m (all figures, GPUs, ceiling)": lambda: [reader.window("bench", end, 300)],
    }
    out = {}
    for name, fn in cases.items():
        best, median, result = timed(fn)
        out[name] = (best, median, sum(1 for v in result if v is not None))
    return out


def print_queries(db_url: str, end: int) -> None:
    for name, (best, median, points) in queries(db_url, end).items():
        print(f"{name:58} {best:7.2f} ms fastest {median:7.2f} ms median  ({points} points with data)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--db", help="database URL (default: a fresh SQLite file in a temp folder)")
    parser.add_argument("--prometheus", action="store_true", help="also run the same queries on Prometheus")
    parser.add_argument("--queries-only", action="store_true", help="reuse --db from an earlier run: time queries only")
    args = parser.parse_args()
    db_url = args.db or f"sqlite:///{tempfile.mkdtemp(prefix='sweetspot-bench-')}/bench.db"
    start = 1_750_000_000 - 1_750_000_000 % DAY
    end = start + args.days * DAY
    print(f"storage benchmark: {args.days} days of 5 s history, one target, {db_url}")
    if args.queries_only and args.db:
        print_queries(db_url, end)
        return
    figures = ingest(db_url, start, args.days)
    print(
        f"ingest: {figures['rounds']:.0f} rounds at {figures['rounds_per_s']:.0f} rounds/s (write_rounds), "
        f"writer CPU {figures['cpu_us_per_round']:.0f} µs/round; live write_round "
        f"{figures['live_ms_per_round']:.2f} ms/round wall, {figures['live_cpu_ms_per_round']:.2f} ms CPU "
        f"(own transaction); rollup + retention {figures['upkeep_s_per_day']:.2f} s per day"
    )
    if db_url.startswith("sqlite"):
        print(
            f"disk after retention (raw 48 h, minutes 30 d, hours beyond): {disk_mb(db_url):.1f} MB at rest "
            f"(+ WAL {figures['wal_mb_while_running']:.1f} MB while the writer runs)"
        )
    print_queries(db_url, end)
    if args.prometheus:
        from bench.prom_compare import compare

        compare()


if __name__ == "__main__":
    main()
