"""Collector CPU per target per round, against the simulator in another process (goal ≤ 1 ms).

Run: ``.venv/bin/python bench/bench_collector.py [--rounds 200] [--pause-ms 0] [--db URL]
[--dcgm-interval 30s] [--runs 1 --apart 20]``. The simulator runs as its own process (``python -m app sim --load 16``), so
this process's CPU time is the collector's alone: HTTP GETs of the three endpoints (vLLM /metrics,
gateway, 8 dcgm GPUs), sent at once and read as they arrive (``RoundReader.collect_all``),
parsing, and the writer's transaction. Prints the whole round and each step,
best and median CPU ms, for the demo target (vLLM + gateway + 8 GPUs) and for a vLLM-only target (no
gateway, no GPUs), the plainest configuration. Whole rounds run back to back unless ``--pause-ms``
sleeps between them (a live collector sleeps seconds between rounds: its caches are colder than
back-to-back rounds').

The rounds go to a fresh SQLite file, or with ``--db`` into an existing database, such as the one
``bench/bench_store.py --db sqlite:///PATH`` fills with 30 days of 5 s history (the issue's setting:
the writer then appends to tables of that size). The simulated dcgm-exporter reads its GPUs every
``--dcgm-interval`` of simulated time (30 s, the real exporter's default ``--collect-interval``, is
6 s of wall time at the simulator's ``--speed 5``); between readings it serves the same page, as the
real one does. ``--dcgm-interval 0`` gives a new page at every GET, the costliest case.

One run's median moves by ±30 % from one minute to the next on a shared machine: ``--runs N``
measures the whole rounds N times, ``--apart`` seconds apart, and gives the verdict on the median of
the runs' medians, with how many runs met the goal.

Each measurement of the whole rounds is paired with a control: a fixed piece of pure Python work (no
I/O, no syscall: dict and string operations, ~0.4 ms here), timed after the same pause as the rounds. It says what this machine does to the same instructions at that cadence (on
this virtual machine they cost about twice as much after a pause of 50 ms or more as back to back),
so a round's figure at a live cadence can be read against it: ``round ÷ control``. The control runs
in its own block right after each block of rounds (interleaving it would make back-to-back rounds
no longer back to back).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.commands.run import demo_target  # noqa: E402
from app.jobs import RoundReader  # noqa: E402
from bench import prom_scrape  # noqa: E402
from collectors.dcgm import parse_dcgm  # noqa: E402
from collectors.fetch import fetch_text  # noqa: E402
from collectors.gateway import queue_from_prometheus  # noqa: E402
from collectors.vllm import parse_vllm  # noqa: E402
from core.settings import Settings, TargetSettings  # noqa: E402
from db.engine import open_engine  # noqa: E402
from db.writer import Writer  # noqa: E402

GOAL_MS = 1.0
WHOLE_NAMES = ("whole round, vLLM only (GET + parse + write)", "whole round (3 GETs + parse + write)")


def cpu_ms(fn: Callable[[], object], rounds: int, pause_s: float = 0.0) -> tuple[float, float]:
    """(best, median) CPU milliseconds of this process per call; ``pause_s`` sleeps between calls."""
    times = []
    for _ in range(rounds):
        start = time.process_time()
        fn()
        times.append((time.process_time() - start) * 1000)
        if pause_s:
            time.sleep(pause_s)
    return min(times), statistics.median(times)


def reference_work() -> str:
    """The control: fixed pure-Python work, no I/O (dict updates, float arithmetic, string joins)."""
    totals: dict[int, float] = {}
    for i in range(3000):
        totals[i % 97] = totals.get(i % 97, 0.0) + i * 1.5
    return "".join(str(v) for v in totals.values())


def control_ms(rounds: int, pause_s: float = 0.0) -> float:
    """Median CPU ms of the control, timed as the rounds just before it were (same count, same pause)."""
    return cpu_ms(reference_work, rounds, pause_s)[1]


def simulated_clock() -> Callable[[], float]:
    """A clock 5 s further on at each call: one round per simulated 5 s, so every write is a new row."""
    now = [time.time()]

    def clock() -> float:
        now[0] += 5.0
        return now[0]
    return clock


def start_simulator(dcgm_interval: str = "30s") -> tuple[subprocess.Popen[str], dict[str, str]]:
    proc = subprocess.Popen([sys.executable, "-m", "app", "sim", "--port", "0", "--load", "16", "--speed", "5",
                             "--dcgm-interval", dcgm_interval],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--pause-ms", type=float, default=0.0, help="sleep between whole rounds (not measured)")
    parser.add_argument("--db", help="write into this database (default: a fresh SQLite file in a temp folder)")
    parser.add_argument("--dcgm-interval", default="30s",
                        help="the simulated dcgm-exporter's collect interval, in simulated time (0: every GET)")
    parser.add_argument("--prometheus", action="store_true",
                        help="then compare with Prometheus scraping the same pages once a second (bench/prom_scrape.py)")
    parser.add_argument("--prometheus-seconds", type=float, default=60.0, help="length of each side of that comparison")
    parser.add_argument("--runs", type=int, default=1,
                        help="measure the whole rounds this many times, --apart seconds apart, and sum up the runs")
    parser.add_argument("--apart", type=float, default=20.0, help="seconds between two runs (with --runs)")
    args = parser.parse_args()
    sim, urls = start_simulator(args.dcgm_interval)
    try:
        time.sleep(3)  # let the load fill the engine so the payloads have their full shape
        target = demo_target(urls)
        vllm_only = TargetSettings(name="vllm-only", vllm_url=urls["vllm_metrics"])
        settings = Settings(targets=(target, vllm_only))
        rounds = RoundReader(settings, clock=simulated_clock())
        with tempfile.TemporaryDirectory() as folder:
            writer = Writer(open_engine(args.db or f"sqlite:///{folder}/bench.db"))
            writer.register_target(target)
            writer.register_target(vllm_only)
            medians = report(rounds, writer, target, vllm_only, urls, args.rounds, args.pause_ms / 1000, args.dcgm_interval)
            if args.runs > 1:
                runs(rounds, writer, (vllm_only, target), args.rounds, args.pause_ms / 1000, args.runs, args.apart, medians)
            if args.prometheus:
                prom_scrape.report(lambda: writer.write_round(rounds.collect(target)), urls, args.prometheus_seconds)
            writer.close()
        rounds.close()
    finally:
        sim.terminate()
        sim.wait()


def report(
    rounds: RoundReader, writer: Writer, target: TargetSettings, vllm_only: TargetSettings,
    urls: dict[str, str], n: int, pause_s: float, dcgm_interval: str,
) -> list[float]:
    """Print the whole rounds, their parts and each step; returns the whole rounds' medians (vLLM only, 3 sources)."""
    texts = {k: fetch_text(urls[k], 3.0, rounds.fetcher) for k in ("vllm_metrics", "gateway_metrics", "dcgm_metrics")}
    sizes = ", ".join(f"{k} {len(v) / 1024:.1f} KB" for k, v in texts.items())
    pause = f", {pause_s * 1000:g} ms apart" if pause_s else ", back to back"
    print(f"payloads: {sizes}; {n} rounds each{pause}; into {writer.engine.url.render_as_string()}; "
          f"dcgm-exporter collects every {dcgm_interval} of simulated time")
    # CPU of the parts of each whole round, measured inside the real rounds: after the process
    # waited for the pages, caches are cold and the same code costs more than in the tight loops below.
    inside: dict[str, dict[str, list[float]]] = {}

    def whole_round(which: TargetSettings) -> Callable[[], None]:
        parts = inside[which.name] = {"GET + parse": [], "write": []}

        def run() -> None:
            start = time.process_time()
            round_ = rounds.collect(which)
            middle = time.process_time()
            writer.write_round(round_)
            parts["GET + parse"].append((middle - start) * 1000)
            parts["write"].append((time.process_time() - middle) * 1000)
        return run

    def write_only(which: TargetSettings) -> Callable[[], None]:
        sample = rounds.collect(which)
        # built before the timing: each write stores a new row, and only the write is measured
        pending = [dataclasses.replace(sample, ts=rounds.clock()) for _ in range(n)]
        return lambda: writer.write_round(pending.pop(0))

    wholes = {
        WHOLE_NAMES[0]: (whole_round(vllm_only), vllm_only),
        WHOLE_NAMES[1]: (whole_round(target), target),
    }
    medians = []
    for name, (fn, which) in wholes.items():
        best, median = cpu_ms(fn, n, pause_s)
        medians.append(median)
        control = control_ms(n, pause_s)
        print(f"{name:46} best {best:6.3f} ms CPU   median {median:6.3f} ms CPU"
              f"  (goal ≤ {GOAL_MS} ms at the median: {'met' if median <= GOAL_MS else 'MISSED'})")
        print(f"{'  the control, timed the same way':46} {'':21} median {control:6.3f} ms CPU"
              f"  (round ÷ control {median / control:.2f})")
        for part, times in inside[which.name].items():
            print(f"{'  inside those rounds: ' + part:46} best {min(times):6.3f} ms CPU   "
                  f"median {statistics.median(times):6.3f} ms CPU")
    # Both targets in one round, as collect_once runs them: all 4 requests sent first, each target's
    # round written as soon as its answers are parsed.
    best, median = cpu_ms(lambda: [writer.write_round(r) for r in rounds.collect_all((target, vllm_only))], n, pause_s)
    print(f"{'2 targets at once (4 GETs + parse + 2 writes)':46} best {best:6.3f} ms CPU   median {median:6.3f} ms CPU"
          f"  ({median / 2:.3f} ms per target)")
    steps = {
        "  GET vLLM /metrics": lambda: fetch_text(urls["vllm_metrics"], 3.0, rounds.fetcher),
        "  GET gateway": lambda: fetch_text(urls["gateway_metrics"], 3.0, rounds.fetcher),
        "  GET dcgm": lambda: fetch_text(urls["dcgm_metrics"], 3.0, rounds.fetcher),
        "  parse vLLM": lambda: parse_vllm(texts["vllm_metrics"]),
        "  parse gateway": lambda: queue_from_prometheus(texts["gateway_metrics"], target.gateway.metric),
        "  parse dcgm (8 GPUs)": lambda: parse_dcgm(texts["dcgm_metrics"]),
        "  write the round (1 model, 8 GPUs)": write_only(target),
        "  write a vLLM-only round (1 model)": write_only(vllm_only),
    }
    print("each step alone, in a tight loop:")
    for name, fn in steps.items():
        best, median = cpu_ms(fn, n)
        print(f"{name:46} best {best:6.3f} ms CPU   median {median:6.3f} ms CPU")
    return medians


def runs(
    rounds: RoundReader, writer: Writer, targets: tuple[TargetSettings, TargetSettings], n: int, pause_s: float,
    count: int, apart_s: float, first: list[float],
) -> None:
    """The whole rounds measured ``count`` times in all (``first``: the medians of the run above),
    ``apart_s`` apart: on a shared machine one run's median moves by ±30 % from minute to minute,
    so the verdict is given on the median of the runs' medians, with how many runs met the goal."""
    medians = [[m] for m in first]
    for run in range(2, count + 1):
        time.sleep(apart_s)
        line = []
        for which, kept in zip(targets, medians, strict=True):
            kept.append(cpu_ms(lambda which=which: writer.write_round(rounds.collect(which)), n, pause_s)[1])
            line.append(f"{kept[-1]:.3f}")
        control = control_ms(n, pause_s)
        print(f"run {run} of {count} ({time.strftime('%H:%M:%S')}): whole round median {' / '.join(line)} ms CPU "
              f"(vLLM only / 3 sources); control {control:.3f} ms")
    for name, kept in zip(WHOLE_NAMES, medians, strict=True):
        met = sum(m <= GOAL_MS for m in kept)
        print(f"{name:46} median of {count} run medians {statistics.median(kept):6.3f} ms CPU "
              f"(runs {min(kept):.3f}-{max(kept):.3f}; goal ≤ {GOAL_MS} ms met in {met} of {count} runs)")


if __name__ == "__main__":
    main()
