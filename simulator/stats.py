"""Cumulative engine statistics as vLLM keeps them: counters and fixed-bucket histograms.

Plain Python on purpose (no prometheus_client objects): the engine observes thousands of values per
simulated second, and a restart replaces the whole object, which is how vLLM's counters reset.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

# Bucket upper bounds (seconds) as vLLM declares them; +Inf is implicit.
TTFT_BUCKETS_V1 = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                   20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
TTFT_BUCKETS_V0 = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
ITL_BUCKETS_V1 = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                  20.0, 40.0, 80.0)
ITL_BUCKETS_V0 = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
REQUEST_BUCKETS_V1 = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                      120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
REQUEST_BUCKETS_V0 = (1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)
# Tokens per engine step (vLLM's vllm:iteration_tokens_total: a histogram despite its name).
ITERATION_BUCKETS = (1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0)
# Request lengths in tokens (vllm:request_prompt_tokens, vllm:request_generation_tokens): vLLM's
# build_1_2_5_buckets(max_model_len), 8,192 here.
LENGTH_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0)
# The engine records into the finest bounds; V0 exposition re-bins (every V0 bound is a V1 bound).
HISTOGRAM_BOUNDS = {
    "ttft": TTFT_BUCKETS_V1,
    "itl": ITL_BUCKETS_V1,
    "e2e": REQUEST_BUCKETS_V1,
    "queue": REQUEST_BUCKETS_V1,
    "prefill": REQUEST_BUCKETS_V1,
    "decode": REQUEST_BUCKETS_V1,
    "iteration": ITERATION_BUCKETS,
    "tpot": ITL_BUCKETS_V1,  # each finished request's mean time per output token (vLLM >= 0.11)
    "prompt_len": LENGTH_BUCKETS,
    "generation_len": LENGTH_BUCKETS,
}


@dataclass
class Hist:
    """Counts per bucket (not cumulative; last slot is +Inf) and the sum of observed values."""

    bounds: tuple[float, ...]
    counts: list[float] = field(default_factory=list)
    total: float = 0.0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0.0] * (len(self.bounds) + 1)

    def observe(self, value: float, weight: float = 1.0) -> None:
        """Add ``weight`` observations of ``value`` (``le`` semantics: value == bound lands in it)."""
        self.counts[bisect.bisect_left(self.bounds, value)] += weight
        self.total += value * weight

    def count(self) -> float:
        return sum(self.counts)

    def cumulative(self, bounds: tuple[float, ...] | None = None) -> list[tuple[float, float]]:
        """``(le, cumulative count)`` pairs for ``bounds`` (default: own), ending with +Inf."""
        wanted = set(bounds if bounds is not None else self.bounds)
        out: list[tuple[float, float]] = []
        running = 0.0
        for bound, n in zip(self.bounds, self.counts, strict=False):
            running += n
            if bound in wanted:
                out.append((bound, running))
        out.append((float("inf"), running + self.counts[-1]))
        return out


@dataclass
class EngineStats:
    """Everything vLLM counts since its process started (reset by a restart)."""

    started_at: float  # unix seconds: process_start_time_seconds and every *_created
    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    preemptions: float = 0.0
    success: dict[str, float] = field(default_factory=lambda: {"stop": 0.0, "length": 0.0, "abort": 0.0})
    hists: dict[str, Hist] = field(default_factory=dict)
    # vLLM 0.33 --enable-mfu-metrics: the engine's estimate of memory traffic, bytes per GPU
    read_bytes: float = 0.0
    write_bytes: float = 0.0

    def __post_init__(self) -> None:
        if not self.hists:
            self.hists = {name: Hist(bounds) for name, bounds in HISTOGRAM_BOUNDS.items()}
