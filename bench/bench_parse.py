"""Parse the 58 KB vLLM V1 fixture: Sweetspot's selective parser vs prometheus_client's, same run.

Run: ``.venv/bin/python bench/bench_parse.py``. Prints ms per parse (best and median of the timed
rounds: the machine is shared, the best is the least disturbed figure) and the ratio.
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

FIXTURE = ROOT / "tests" / "data" / "vllm_v1.txt"
GOAL_MS = 0.5


def per_call_ms(fn: Callable[[], object], rounds: int, calls: int) -> tuple[float, float]:
    """(best, median) milliseconds per call over ``rounds`` rounds of ``calls`` calls."""
    fn()  # warm caches (compiled patterns, label sets)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1000)
    return min(times), statistics.median(times)


def main() -> int:
    text = FIXTURE.read_text(encoding="utf-8")
    parser = SelectiveParser(wanted_sample_names())
    ours = per_call_ms(lambda: parser.parse(text), rounds=30, calls=50)
    collector = per_call_ms(lambda: parse_vllm(text), rounds=30, calls=50)
    reference = per_call_ms(lambda: list(text_string_to_metric_families(text)), rounds=10, calls=5)
    print(f"payload: {FIXTURE.relative_to(ROOT)} ({len(text.encode()) / 1000:.1f} KB)")
    print(f"sweetspot expfmt (selective)      best {ours[0]:.3f} ms  median {ours[1]:.3f} ms  (goal <= {GOAL_MS} ms)")
    print(f"sweetspot parse_vllm (+aggregate) best {collector[0]:.3f} ms  median {collector[1]:.3f} ms")
    print(f"prometheus_client parser          best {reference[0]:.3f} ms  median {reference[1]:.3f} ms")
    print(f"ratio prometheus_client / expfmt: {reference[0] / ours[0]:.1f}x (best), {reference[1] / ours[1]:.1f}x (median)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
