"""Parse vLLM pages: Sweetspot's selective parser vs prometheus_client's, same run.

Two payloads: the 58 KB synthetic V1 fixture (two engines) and a 54 KB page captured from a real
vLLM 0.32 (one engine, tests/test_real_engine.py's tiny model after a bench run).

Run: ``.venv/bin/python bench/bench_parse.py``. Prints ms per parse: best and median wall time of the
timed rounds, and best CPU time of this process (the machine is shared: waiting for a core counts in
wall time, not in CPU time), and the ratios.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from collectors.catalogue import wanted_sample_names  # noqa: E402
from collectors.expfmt import SelectiveParser  # noqa: E402
from collectors.vllm import parse_vllm  # noqa: E402

PAYLOADS = (ROOT / "tests" / "data" / "vllm_v1.txt", ROOT / "tests" / "data" / "vllm_real_0_32.txt")
GOAL_MS = 0.5


def per_call_ms(fn: Callable[[], object], rounds: int, calls: int) -> tuple[float, float, float]:
    """(best wall, median wall, best CPU) milliseconds per call over ``rounds`` rounds of ``calls`` calls."""
    fn()  # warm caches (compiled patterns, label sets)
    wall, cpu = [], []
    for _ in range(rounds):
        start, start_cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            fn()
        wall.append((time.perf_counter() - start) / calls * 1000)
        cpu.append((time.process_time() - start_cpu) / calls * 1000)
    return min(wall), statistics.median(wall), min(cpu)


def main() -> int:
    parser = SelectiveParser(wanted_sample_names())
    for payload in PAYLOADS:
        measure(parser, payload)
    return 0


def measure(parser: SelectiveParser, payload: Path) -> None:
    text = payload.read_text(encoding="utf-8")
    ours = per_call_ms(lambda: parser.parse(text), rounds=30, calls=50)
    collector = per_call_ms(lambda: parse_vllm(text), rounds=30, calls=50)
    reference = per_call_ms(lambda: list(text_string_to_metric_families(text)), rounds=10, calls=5)
    print(f"payload: {payload.relative_to(ROOT)} ({len(text.encode()) / 1000:.1f} KB, "
          f"{len(parser.parse(text))} samples read)")
    print(f"{'ms per parse':34} {'wall best':>10} {'wall median':>12} {'CPU best':>10}")
    for label, (best, median, cpu) in (
        (f"sweetspot expfmt (goal <= {GOAL_MS} ms)", ours),
        ("sweetspot parse_vllm (+aggregate)", collector),
        ("prometheus_client parser", reference),
    ):
        print(f"{label:34} {best:10.3f} {median:12.3f} {cpu:10.3f}")
    ratios = ", ".join(f"{reference[i] / ours[i]:.1f}x ({what})" for i, what in enumerate(("wall best", "wall median", "CPU best")))
    print(f"ratio prometheus_client / expfmt: {ratios}")


if __name__ == "__main__":
    sys.exit(main())
