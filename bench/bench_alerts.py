"""Alert benchmark: one evaluation of the default rules for 100 targets, and a 7-day backtest.

Prints figures (not a unit test). Run from the repo root:

    .venv/bin/python bench/bench_alerts.py [--targets 100] [--db sqlite:///path] [--interval 30]

Goals (issue 11): one evaluation of the default rules for 100 targets with a day of history each
costs ≤ 1.5 s of CPU (≤ 10 % of a core at the 15 s default); ``alerts backtest`` over 7 days of
one target ≤ 5 s. Each target gets a day of rounds every ``--interval`` seconds and the last 15
minutes every 5 s (what the rules' 5-minute windows read), rolled up as the collector would; the
backtest target gets 7 days every 15 s. A database given with ``--db`` that already holds the
targets is reused (building 100 days of history takes minutes).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.alerts.backtest import backtest  # noqa: E402
from app.alerts.evaluator import Evaluator  # noqa: E402
from app.alerts.rules import by_name, rule_set  # noqa: E402
from bench.synth import rounds  # noqa: E402
from core.settings import Settings, TargetSettings  # noqa: E402
from db.engine import open_engine  # noqa: E402
from db.queries import Reader  # noqa: E402
from db.rollup import rollup  # noqa: E402
from db.writer import Writer  # noqa: E402

DAY = 86400
RECENT_S = 900


def build(db_url: str, names: list[str], now: int, interval: float) -> None:
    engine = open_engine(db_url)
    writer = Writer(engine)
    have = {t.name for t in Reader(engine=engine).targets() if t.last_scrape_at}
    t0 = time.perf_counter()
    for i, name in enumerate(names):
        writer.register_target(TargetSettings(name=name))
        if name in have:
            continue
        writer.write_rounds(rounds(name, now - DAY, now - RECENT_S, interval, seed=i + 1))
        writer.write_rounds(rounds(name, now - RECENT_S, now, 5.0, seed=i + 1))
    if "backtest" not in have:
        writer.register_target(TargetSettings(name="backtest"))
        writer.write_rounds(rounds("backtest", now - 7 * DAY, now, 15.0, seed=999))
    rollup(engine, now)
    print(f"history ready in {time.perf_counter() - t0:.0f} s ({len(names)} targets + backtest)", flush=True)
    writer.close()
    engine.dispose()


def cpu_and_wall(fn, repeat: int) -> tuple[list[float], list[float]]:
    cpu, wall = [], []
    for _ in range(repeat):
        c, w = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return cpu, wall


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f} s (min {min(values):.3f}, max {max(values):.3f}, n={len(values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=100)
    parser.add_argument("--db", help="database URL (default: a new SQLite file)")
    parser.add_argument("--interval", type=float, default=30.0, help="seconds between the day's older rounds")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    db_url = args.db or f"sqlite:///{tempfile.mkdtemp(prefix='sweetspot-bench-')}/alerts.db"
    now = int(time.time()) // 60 * 60
    names = [f"t{i:03d}" for i in range(args.targets)]
    build(db_url, names, now, args.interval)

    engine = open_engine(db_url)
    settings = Settings(db_url=db_url, targets=tuple(TargetSettings(name=n) for n in names))
    evaluator = Evaluator(engine, settings, clock=lambda: now)
    evaluator.evaluate_once(now)  # first run inserts the states; later ones update them
    cpu, wall = cpu_and_wall(lambda: evaluator.evaluate_once(now), args.repeat)
    rules = len(rule_set(settings, names[0]))
    print(f"evaluate_once: {len(names)} targets × {rules} default rules: CPU {spread(cpu)}; wall {spread(wall)} "
          f"(goal ≤ 1.5 s CPU)")  # fmt: skip

    reader = Reader(db_url)
    one = Settings(db_url=db_url, targets=(TargetSettings(name="backtest"),))
    for name in ("ttft_p95", "preemptions"):
        rule = by_name(rule_set(one, "backtest"), name)
        assert rule is not None
        result: list = []
        replay = functools.partial(backtest, reader, one, "backtest", rule, now - 7 * DAY, now)
        cpu, wall = cpu_and_wall(lambda r=replay, out=result: out.append(r()), 3)
        print(f"backtest {name} over 7 d at {rule.window_s:g} s steps ({result[-1].evaluations} evaluations, "
              f"{result[-1].fired} firings): wall {spread(wall)}; CPU {spread(cpu)} (goal ≤ 5 s)")  # fmt: skip


if __name__ == "__main__":
    main()
