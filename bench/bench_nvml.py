"""CPU of one NVML reading of every local GPU (the reference case's GPU source), per round.

Run on a machine with NVIDIA GPUs: ``python bench/bench_nvml.py [--rounds 200] [--pause-ms 100]``.
Prints the GPUs found, then best and median CPU ms of ``NvmlCollector.collect()`` (every GPU:
memory, memory-busy %, GPM DRAM bandwidth where supported, power, temperature), per round and per
GPU, back to back and with ``--pause-ms`` between rounds (a live collector waits seconds: colder).
The GPU's share of the collector's 1 ms per target per round (bench/bench_collector.py) is this
figure; the wall time per round is printed too (NVML calls wait on the driver). Then, inside the
rounds ``--pause-ms`` apart, the CPU of each NVML call the collector makes, per GPU per round: where
the time goes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from collectors.nvml import NvmlCollector  # noqa: E402
from core.errors import ScrapeError  # noqa: E402


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
        # Not a failure: `make bench` runs every benchmark, and most machines have no GPU to measure.
        print(f"skipped: {exc} (run this on a machine with NVIDIA GPUs)")
        return
    for gpu in readings:
        print(f"GPU {gpu.index} {gpu.name} {gpu.uuid}: peak {gpu.peak_bw_gbps} GB/s ({gpu.peak_bw_source}), "
              f"DRAM bandwidth from {gpu.dram_bw_source or 'nothing'}, memory used {gpu.memory_used_bytes}")
    count = len(readings)
    for label, pause_s in (("back to back", 0.0), (f"{args.pause_ms:g} ms apart", args.pause_ms / 1000)):
        cpu, wall = measure(collector, args.rounds, pause_s)
        print(f"{args.rounds} rounds {label}: CPU best {min(cpu):.3f} ms, median {statistics.median(cpu):.3f} ms "
              f"({statistics.median(cpu) / count:.3f} ms per GPU); wall median {statistics.median(wall):.3f} ms")
    per_call(collector, args.rounds, args.pause_ms / 1000, count)
    collector.close()


def per_call(collector: NvmlCollector, rounds: int, pause_s: float, count: int) -> None:
    """CPU µs of each NVML call the collector makes, per GPU per round, inside real rounds; then of
    each GPU's whole reading, in the order a round reads them."""
    call, read_gpu = collector._call, collector._read  # the collector's one way to NVML, and one GPU's reading
    spent: dict[str, list[int]] = defaultdict(list)
    by_index: dict[int, list[int]] = defaultdict(list)

    def timed_call(owner: str, what: str, fn_name: str, *args: Any, **kwargs: Any) -> Any:
        start = time.process_time_ns()
        try:
            return call(owner, what, fn_name, *args, **kwargs)
        finally:
            spent[fn_name].append(time.process_time_ns() - start)

    def timed_read(gpu: Any) -> Any:
        start = time.process_time_ns()
        try:
            return read_gpu(gpu)
        finally:
            by_index[gpu.index].append(time.process_time_ns() - start)

    collector._call, collector._read = timed_call, timed_read  # type: ignore[method-assign]
    try:
        measure(collector, rounds, pause_s)
    finally:
        del collector._call, collector._read  # back to the class's methods
    print(f"each NVML call inside those rounds ({pause_s * 1000:g} ms apart), CPU per GPU per round:")
    for name, times in sorted(spent.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {name:34} {len(times) / rounds / count:4.1f} calls, median {statistics.median(times) / 1000:7.1f} µs")
    # The first GPU of a round may pay for the driver's cold path alone, the others following warm.
    print("each GPU's whole reading, in the order a round reads them: " + ", ".join(
        f"GPU {index} {statistics.median(times) / 1000:.1f} µs" for index, times in sorted(by_index.items())))

if __name__ == "__main__":
    main()
