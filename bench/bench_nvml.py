"""CPU of one NVML reading of every local GPU (the reference case's GPU source), per round.

Run on a machine with NVIDIA GPUs: ``python bench/bench_nvml.py [--rounds 200] [--pause-ms 100]``.
Prints the GPUs found, then best and median CPU ms of ``NvmlCollector.collect()`` (every GPU:
memory, memory-busy %, GPM DRAM bandwidth where supported, power, temperature), per round and per
GPU, back to back and with ``--pause-ms`` between rounds (a live collector waits seconds: colder).
The GPU's share of the collector's 1 ms per target per round (bench/bench_collector.py) is this
figure; the wall time per round is printed too (NVML calls wait on the driver).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.errors import ScrapeError  # noqa: E402
from collectors.nvml import NvmlCollector  # noqa: E402


def measure(collector: NvmlCollector, rounds: int, pause_s: float) -> tuple[list[float], list[float]]:
    cpu, wall = [], []
    for _ in range(rounds):
        c, w = time.process_time(), time.perf_counter()
        collector.collect()
        cpu.append((time.process_time() - c) * 1000)
        wall.append((time.perf_counter() - w) * 1000)
        if pause_s:
            time.sleep(pause_s)
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--pause-ms", type=float, default=100.0, help="sleep between rounds in the second series")
    args = parser.parse_args()
    collector = NvmlCollector()
    try:
        readings = collector.collect()  # starts NVML and finds the GPUs (not timed)
    except ScrapeError as exc:
        sys.exit(f"{exc}: run this on a machine with NVIDIA GPUs")
    for gpu in readings:
        print(f"GPU {gpu.index} {gpu.name} {gpu.uuid}: peak {gpu.peak_bw_gbps} GB/s ({gpu.peak_bw_source}), "
              f"DRAM bandwidth from {gpu.dram_bw_source or 'nothing'}, memory used {gpu.memory_used_bytes}")
    count = len(readings)
    for label, pause_s in (("back to back", 0.0), (f"{args.pause_ms:g} ms apart", args.pause_ms / 1000)):
        cpu, wall = measure(collector, args.rounds, pause_s)
        print(f"{args.rounds} rounds {label}: CPU best {min(cpu):.3f} ms, median {statistics.median(cpu):.3f} ms "
              f"({statistics.median(cpu) / count:.3f} ms per GPU); wall median {statistics.median(wall):.3f} ms")
    collector.close()


if __name__ == "__main__":
    main()
