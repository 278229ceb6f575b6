"""The collector against a real vLLM under load: its CPU per round beside the engine's own figures.

Run: ``.venv/bin/python bench/bench_real_engine.py [--prompts 48] [--concurrency 8] [--interval 1]``.
Starts vLLM's CPU build (tests/vllm_engine.py: installed on first use, a tiny Llama with dummy
weights) on 127.0.0.1, puts ``vllm bench serve`` load on it (``--prompts`` random prompts of 256
tokens and 64 output tokens, ``--concurrency`` at once) and, from the first running request to the
load's end, runs one collector round every ``--interval`` seconds, as ``collect`` does
(``RoundCollector.collect`` then ``Writer.write_round`` into a fresh SQLite file). Each round prints this process's CPU for it (GET, parse, write) beside what
the engine said in that page: running and waiting requests, KV-cache usage, output tok/s since
the previous page, and the API server's own CPU seconds per second (``process_cpu_seconds_total``:
the process that serves /metrics and detokenises; the engine core and its worker are other
processes). The summary gives the rounds' CPU median and P95 and the bench's own figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from app.jobs import RoundCollector  # noqa: E402
from core.settings import Settings, TargetSettings  # noqa: E402
from db.engine import open_engine  # noqa: E402
from db.writer import Writer  # noqa: E402
from tests.vllm_engine import EngineUnavailable, VllmServer  # noqa: E402

ENGINE_FIGURES = {"vllm:num_requests_running": "running", "vllm:num_requests_waiting": "waiting",
                  "vllm:kv_cache_usage_perc": "kv", "vllm:generation_tokens": "tokens",
                  "process_cpu_seconds": "api_cpu_s"}  # fmt: skip


def engine_figures(page: str) -> dict[str, float]:
    out = dict.fromkeys(ENGINE_FIGURES.values(), 0.0)
    for family in text_string_to_metric_families(page):
        if key := ENGINE_FIGURES.get(family.name):
            out[key] += sum(s.value for s in family.samples if not s.name.endswith("_created"))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=48, help="requests the bench sends (the rounds last as long)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between rounds (the collector's interval_s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        started = time.monotonic()
        try:
            server = VllmServer(work)  # installs the engine first if need be (minutes, once)
        except EngineUnavailable as exc:
            print(f"ERROR: {exc}", file=sys.stderr)
            return 2
        print(f"vLLM 0.32 (CPU) up in {time.monotonic() - started:.0f} s on {server.base_url}")
        try:
            return measure(server, work, args)
        finally:
            server.stop()


def measure(server: VllmServer, work: Path, args: argparse.Namespace) -> int:
    target = TargetSettings(name="real", vllm_url=server.metrics_url)
    rounds = RoundCollector(Settings(targets=(target,)))
    writer = Writer(open_engine(f"sqlite:///{work}/bench.db"))
    writer.register_target(target)
    bench: dict[str, Any] = {}
    load = threading.Thread(target=lambda: bench.update(server.bench(
        work / "load", num_prompts=args.prompts, random_input_len=256, random_output_len=64,
        max_concurrency=args.concurrency)), daemon=True)  # fmt: skip
    load.start()
    while load.is_alive() and not engine_figures(server.page())["running"]:
        time.sleep(0.2)  # the bench reads its tokenizer and draws its prompts first: rounds start with the load
    previous, previous_at = engine_figures(server.page()), time.monotonic()
    print(f"{'round':>5} {'collector CPU ms':>17} {'page KB':>8} {'running':>8} {'waiting':>8} {'KV %':>6} "
          f"{'engine tok/s':>13} {'API server CPU s/s':>19}")  # fmt: skip
    cpu: list[float] = []
    while load.is_alive():
        start = time.process_time()
        writer.write_round(rounds.collect(target))
        cpu.append((time.process_time() - start) * 1000)
        page, at = server.page(), time.monotonic()  # outside the measured CPU: the engine's own figures
        now, span = engine_figures(page), at - previous_at
        print(f"{len(cpu):5d} {cpu[-1]:17.2f} {len(page) / 1024:8.1f} {now['running']:8.0f} {now['waiting']:8.0f} "
              f"{now['kv'] * 100:6.1f} {(now['tokens'] - previous['tokens']) / span:13.1f} "
              f"{(now['api_cpu_s'] - previous['api_cpu_s']) / span:19.3f}")  # fmt: skip
        previous, previous_at = now, at
        time.sleep(max(0.0, args.interval - (time.monotonic() - at)))
    load.join()
    writer.close()
    rounds.close()
    p95 = statistics.quantiles(cpu, n=20)[-1] if len(cpu) >= 2 else cpu[0]
    print(f"collector CPU per round: median {statistics.median(cpu):.2f} ms, P95 {p95:.2f} ms over {len(cpu)} rounds")
    print(f"vllm bench serve: {bench['completed']} requests, {bench['output_throughput']:.1f} output tok/s, "
          f"TTFT P95 {bench['p95_ttft_ms']:.0f} ms, concurrency {args.concurrency}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
