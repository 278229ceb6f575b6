"""Parse vLLM pages: the collector's whole parse and Sweetspot's selective parser vs prometheus_client's, same run.

Two payloads: the 58 KB synthetic V1 fixture (two engines) and a 54 KB page captured from a real
vLLM 0.32 (one engine, tests/test_real_engine.py's tiny model after a bench run).

Goal (issue 31): the collector's whole parse (``collectors.vllm.parse_vllm``: the selective parser
and the aggregation into a ``VllmScrape``) of the real vLLM 0.32 page in ≤ 0.25 ms and ≥ 30× faster
than prometheus_client's parser in the same run.

What a scrape costs is measured as a collector meets it: the same series page after page with new
values. Each timed call parses one of ``VARIANTS`` copies of the page whose every finite value was
changed (so nothing keyed by the page's text or values can answer), after one warm-up parse of the
page (a target's first scrape). A *first* page (the plan and label caches emptied before each call:
a target's first scrape, or a page whose series changed) is measured too.

Run: ``.venv/bin/python bench/bench_parse.py``. Prints ms per parse: best and median wall time of the
timed rounds, and best CPU time of this process (the machine is shared: waiting for a core counts in
wall time, not in CPU time), the ratios, and whether the goal is met (CPU best; exit status 1 if not).
"""

from __future__ import annotations

import math
import re
import statistics
import sys
import time
from collections.abc import Callable
from itertools import cycle
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from collectors import expfmt, vllm  # noqa: E402
from collectors.catalogue import wanted_sample_names  # noqa: E402
from collectors.expfmt import SelectiveParser  # noqa: E402
from collectors.vllm import parse_vllm  # noqa: E402

PAYLOADS = (ROOT / "tests" / "data" / "vllm_v1.txt", ROOT / "tests" / "data" / "vllm_real_0_32.txt")
GOAL_PAYLOAD = "vllm_real_0_32.txt"
GOAL_MS, GOAL_RATIO = 0.25, 30.0
VARIANTS = 16
_VALUE = re.compile(r"^([^#\s][^\n]* )(\S+)$", re.MULTILINE)


def per_call_ms(fn: Callable[[], object], rounds: int, calls: int) -> tuple[float, float, float]:
    """(best wall, median wall, best CPU) milliseconds per call over ``rounds`` rounds of ``calls`` calls."""
    fn()  # warm up (compiled patterns, a target's first page)
    wall, cpu = [], []
    for _ in range(rounds):
        start, start_cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            fn()
        wall.append((time.perf_counter() - start) / calls * 1000)
        cpu.append((time.process_time() - start_cpu) / calls * 1000)
    return min(wall), statistics.median(wall), min(cpu)


def variants(text: str, n: int) -> list[str]:
    """``n`` copies of the page, the k-th with every finite value raised by k (the same series, new values)."""
    def bump(k: int) -> Callable[[re.Match[str]], str]:
        def sub(m: re.Match[str]) -> str:
            value = float(m.group(2))
            return m.group(0) if not math.isfinite(value) else f"{m.group(1)}{value + k!r}"
        return sub
    return [_VALUE.sub(bump(k), text) for k in range(1, n + 1)]


def first_page(text: str) -> object:
    """parse_vllm of a page never read before: the caches of plans and label sets emptied."""
    vllm._PLANS.clear()
    expfmt._LABEL_CACHE.clear()
    expfmt._LABEL_CACHE[""] = expfmt._EMPTY
    return parse_vllm(text)


def main() -> int:
    parser = SelectiveParser(wanted_sample_names())
    met = True
    for payload in PAYLOADS:
        met &= measure(parser, payload)
    return 0 if met else 1


def measure(parser: SelectiveParser, payload: Path) -> bool:
    text = payload.read_text(encoding="utf-8")
    pages = variants(text, VARIANTS)
    assert parse_vllm(pages[0]) != parse_vllm(text), "the variants must carry other values"
    next_page = cycle(pages).__next__
    ours = per_call_ms(lambda: parser.parse(next_page()), rounds=30, calls=48)
    collector = per_call_ms(lambda: parse_vllm(next_page()), rounds=30, calls=48)
    cold = per_call_ms(lambda: first_page(next_page()), rounds=10, calls=16)
    reference = per_call_ms(lambda: list(text_string_to_metric_families(next_page())), rounds=10, calls=5)
    parse_vllm(text)  # leave the caches warm for the next payload's run, as a collector's are
    print(f"payload: {payload.relative_to(ROOT)} ({len(text.encode()) / 1000:.1f} KB, "
          f"{len(parser.parse(text))} samples read, {VARIANTS} variants of its values)")
    print(f"{'ms per parse':40} {'wall best':>10} {'wall median':>12} {'CPU best':>10}")
    for label, (best, median, cpu) in (
        ("sweetspot expfmt (selective parser)", ours),
        (f"sweetspot parse_vllm (goal <= {GOAL_MS} ms)", collector),
        ("sweetspot parse_vllm, a first page", cold),
        ("prometheus_client parser", reference),
    ):
        print(f"{label:40} {best:10.3f} {median:12.3f} {cpu:10.3f}")
    for name, timing in (("parse_vllm", collector), ("parse_vllm, a first page", cold), ("expfmt", ours)):
        ratios = ", ".join(f"{reference[i] / timing[i]:.1f}x ({what})"
                           for i, what in enumerate(("wall best", "wall median", "CPU best")))
        print(f"ratio prometheus_client / {name}: {ratios}")
    if payload.name != GOAL_PAYLOAD:
        return True
    ratio = reference[2] / collector[2]
    met = collector[2] <= GOAL_MS and ratio >= GOAL_RATIO
    print(f"goal (CPU best): parse_vllm {collector[2]:.3f} ms <= {GOAL_MS} and {ratio:.1f}x >= {GOAL_RATIO:.0f}x: "
          f"{'met' if met else 'NOT met'}")
    return met


if __name__ == "__main__":
    sys.exit(main())
