"""Collector CPU per target per round, against the simulator in another process (goal ≤ 1 ms).

Run: ``.venv/bin/python bench/bench_collector.py [--rounds 200]``. The simulator runs as its own
process (``python -m app sim --load 16``), so this process's CPU time is the collector's alone: HTTP
GETs of the three endpoints (vLLM /metrics, gateway, 8 dcgm GPUs), parsing, and the writer's
transaction on a SQLite file. Prints the whole round and each step, best and median CPU ms, for the
demo target (vLLM + gateway + 8 GPUs) and for a vLLM-only target (no gateway, no GPUs), the plainest
configuration and the one the 1 ms goal is about.
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
from app.jobs import RoundCollector  # noqa: E402
from app.settings import Settings, TargetSettings  # noqa: E402
from collectors.dcgm import parse_dcgm  # noqa: E402
from collectors.gateway import queue_from_prometheus  # noqa: E402
from collectors.http import fetch_text  # noqa: E402
from collectors.vllm import parse_vllm  # noqa: E402
from db.engine import open_engine  # noqa: E402
from db.writer import Writer  # noqa: E402

GOAL_MS = 1.0


def cpu_ms(fn: Callable[[], object], rounds: int) -> tuple[float, float]:
    """(best, median) CPU milliseconds of this process per call."""
    times = []
    for _ in range(rounds):
        start = time.process_time()
        fn()
        times.append((time.process_time() - start) * 1000)
    return min(times), statistics.median(times)


def start_simulator() -> tuple[subprocess.Popen[str], dict[str, str]]:
    proc = subprocess.Popen([sys.executable, "-m", "app", "sim", "--port", "0", "--load", "16", "--speed", "5"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    sim, urls = start_simulator()
    try:
        time.sleep(3)  # let the load fill the engine so the payloads have their full shape
        target = demo_target(urls)
        vllm_only = TargetSettings(name="vllm-only", vllm_url=urls["vllm_metrics"])
        settings = Settings(targets=(target, vllm_only))
        rounds = RoundCollector(settings)
        with tempfile.TemporaryDirectory() as folder:
            writer = Writer(open_engine(f"sqlite:///{folder}/bench.db"))
            writer.register_target(target)
            writer.register_target(vllm_only)
            report(rounds, writer, target, vllm_only, urls, args.rounds)
            writer.close()
        rounds.close()
    finally:
        sim.terminate()
        sim.wait()


def report(
    rounds: RoundCollector, writer: Writer, target: TargetSettings, vllm_only: TargetSettings,
    urls: dict[str, str], n: int,
) -> None:
    texts = {k: fetch_text(urls[k], 3.0, rounds.client) for k in ("vllm_metrics", "gateway_metrics", "dcgm_metrics")}
    sizes = ", ".join(f"{k} {len(v) / 1024:.1f} KB" for k, v in texts.items())
    print(f"payloads: {sizes}; {n} rounds each")
    clock = [time.time()]

    # CPU of the parts of each vLLM-only round, measured inside the real rounds: after the process
    # waited for the page, caches are cold and the same code costs more than in the tight loops below.
    inside: dict[str, list[float]] = {"collect": [], "write": []}

    def whole_round(which: TargetSettings) -> Callable[[], None]:
        def run() -> None:
            clock[0] += 5.0  # one round per simulated 5 s, so every write is a new row
            start = time.process_time()
            round_ = rounds.collect(which)
            middle = time.process_time()
            writer.write_round(dataclasses.replace(round_, ts=clock[0]))
            if which is vllm_only:
                inside["collect"].append((middle - start) * 1000)
                inside["write"].append((time.process_time() - middle) * 1000)
        return run

    def write_only(which: TargetSettings) -> Callable[[], None]:
        sample = rounds.collect(which)

        def run() -> None:
            clock[0] += 5.0
            writer.write_round(dataclasses.replace(sample, ts=clock[0]))
        return run

    steps = {
        "whole round, vLLM only (GET + parse + write)": whole_round(vllm_only),
        "whole round (3 GETs + parse + write)": whole_round(target),
        "  GET vLLM /metrics": lambda: fetch_text(urls["vllm_metrics"], 3.0, rounds.client),
        "  parse vLLM": lambda: parse_vllm(texts["vllm_metrics"]),
        "  parse gateway": lambda: queue_from_prometheus(texts["gateway_metrics"], target.gateway.metric),
        "  parse dcgm (8 GPUs)": lambda: parse_dcgm(texts["dcgm_metrics"]),
        "  write the round (1 model, 8 GPUs)": write_only(target),
        "  write a vLLM-only round (1 model)": write_only(vllm_only),
    }
    for name, fn in steps.items():
        best, median = cpu_ms(fn, n)
        flag = f"  (goal ≤ {GOAL_MS} ms: {'met' if best <= GOAL_MS else 'MISSED'})" if name.startswith("whole") else ""
        print(f"{name:46} best {best:6.3f} ms CPU   median {median:6.3f} ms CPU{flag}")
        if name.startswith("whole round, vLLM only"):
            for part, label in (("collect", "GET + parse"), ("write", "write")):
                times = inside[part]
                print(f"{'  inside those rounds: ' + label:46} best {min(times):6.3f} ms CPU   "
                      f"median {statistics.median(times):6.3f} ms CPU")


if __name__ == "__main__":
    main()
