"""The sweep against ``vllm bench serve``: how close the two clients' output tok/s come at the engine's pace.

Run: ``.venv/bin/python bench/bench_sweep_agreement.py [--rounds 3]``. Starts vLLM's CPU build
(tests/vllm_engine.py: installed on first use, a tiny Llama with dummy weights) on 127.0.0.1 and runs
``--rounds`` times the real-engine tier's sweep · bench · sweep (tests/test_real_engine.py:
``sweep_bench_sweep``: a 22-s sweep at concurrency 4, the bench with its request count and lengths,
the sweep again; each client's tokens held exactly to the engine's counters). Prints, per round,
each client's tok/s, the engine's mean inter-token latency over its run and their product, the
requests decoded at once on average (the engine's speed taken out), and the bench's against the mean
of the two sweeps around it; then the median of those. Goal (docs/sweep.md): within 10 %. Run it
with nothing else on the machine: under load the clients themselves starve for a core.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_real_engine import sweep_bench_sweep  # noqa: E402
from tests.vllm_engine import EngineUnavailable, VllmServer  # noqa: E402

GOAL = 0.10


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sweetspot-agreement-"))
    print(f"starting vLLM (CPU build) under {work} ...", flush=True)
    try:
        server = VllmServer(work)
    except EngineUnavailable as exc:
        print(f"no engine: {exc}", file=sys.stderr)
        return 2
    apart = []
    try:
        for i in range(args.rounds):
            found = sweep_bench_sweep(server, work / f"round{i}")
            sweeps = (found.at_once("sweep 1") + found.at_once("sweep 2")) / 2
            apart.append(found.at_once("bench") / sweeps - 1)
            print(f"round {i + 1}/{args.rounds}: " + "; ".join(found.lines), flush=True)
            print(f"  bench {found.at_once('bench'):.2f} against the sweeps' mean {sweeps:.2f} decoding at once: "
                  f"{100 * apart[-1]:+.1f} %", flush=True)  # fmt: skip
    finally:
        server.stop()
    median = statistics.median(apart)
    print(f"median {100 * median:+.1f} % over {args.rounds} rounds (each {', '.join(f'{100 * a:+.1f}' for a in apart)} %); "
          f"goal within {100 * GOAL:.0f} %: {'met' if abs(median) <= GOAL else 'NOT met'}")
    print(f"machine load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
