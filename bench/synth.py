"""A realistic synthetic vLLM history (reference deployment of DOMAIN.md): ~0.4 requests/s,
V1 TTFT buckets, ~300 output tokens per request, 2 GPUs, a gateway queue, rare failed scrapes and
one vLLM restart. Deterministic for a seed. Used by bench/bench_store.py and the storage tests.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Iterator

from collectors.records import (
    INF,
    GatewayReading,
    GpuReading,
    Histogram,
    ModelFigures,
    ScrapeRound,
    SourceResult,
    VllmScrape,
)
from simulator.stats import ITL_BUCKETS_V1, REQUEST_BUCKETS_V1, TTFT_BUCKETS_V1

# vLLM V1's own bucket bounds, as the simulator declares them, with the +Inf bucket.
TTFT_BOUNDS = (*TTFT_BUCKETS_V1, INF)
ITL_BOUNDS = (*ITL_BUCKETS_V1, INF)
E2E_BOUNDS = (*REQUEST_BUCKETS_V1, INF)
MODEL = "llama-70b-awq"


def _bucket(bounds: tuple[float, ...], value: float) -> int:
    """Index of the first bound ≥ value (the last bound is +Inf)."""
    return min(bisect.bisect_left(bounds, value), len(bounds) - 1)


class Synth:
    """Cumulative vLLM state advanced one scrape at a time."""

    def __init__(self, seed: int = 1, rate: float = 0.4) -> None:
        self.rng = random.Random(seed)
        self.rate = rate
        self._restart(0.0)

    def _restart(self, ts: float) -> None:
        self.process_start = ts
        self.counters = dict.fromkeys(("generation_tokens", "prompt_tokens", "preemptions", "request_success"), 0.0)
        self.hist = {k: [0] * len(b) for k, b in (("ttft", TTFT_BOUNDS), ("itl", ITL_BOUNDS), ("e2e", E2E_BOUNDS))}
        self.sums = dict.fromkeys(self.hist, 0.0)

    def _observe(self, key: str, bounds: tuple[float, ...], value: float, n: int = 1) -> None:
        self.hist[key][_bucket(bounds, value)] += n
        self.sums[key] += value * n

    def step(self, ts: float, dt: float) -> ModelFigures:
        rng = self.rng
        busy = 1.0 + 0.5 * ((ts // 3600) % 24 in range(9, 18))
        for _ in range(_poisson(rng, self.rate * busy * dt)):
            tokens = int(rng.uniform(100, 600))
            ttft = rng.lognormvariate(-0.4, 0.8)
            self._observe("ttft", TTFT_BOUNDS, ttft)
            self._observe("itl", ITL_BOUNDS, rng.uniform(0.04, 0.12), tokens)
            self._observe("e2e", E2E_BOUNDS, ttft + tokens * 0.08)
            self.counters["generation_tokens"] += tokens
            self.counters["prompt_tokens"] += int(rng.uniform(100, 3000))
            self.counters["request_success"] += 1
        if rng.random() < 0.002:
            self.counters["preemptions"] += 1
        running = max(0.0, rng.gauss(10 * busy, 3))
        return ModelFigures(
            counters=dict(self.counters),
            gauges={
                "requests_running": float(int(running)),
                "requests_waiting": float(max(0, int(rng.gauss(1, 2)))),
                "kv_cache_usage": min(1.0, running / 20),
            },
            histograms={
                k: Histogram(b, tuple(_cumsum(self.hist[k])), float(sum(self.hist[k])), self.sums[k])
                for k, b in (("ttft", TTFT_BOUNDS), ("itl", ITL_BOUNDS), ("e2e", E2E_BOUNDS))
            },
            created=dict.fromkeys(("generation_tokens", "ttft"), self.process_start),
        )


def _cumsum(values: list[int]) -> list[float]:
    out, total = [], 0
    for v in values:
        total += v
        out.append(float(total))
    return out


def _poisson(rng: random.Random, lam: float) -> int:
    n, p, limit = 0, 1.0, pow(2.718281828459045, -lam)
    while True:
        p *= rng.random()
        if p < limit:
            return n
        n += 1


def gpus(rng: random.Random, ts: float) -> tuple[GpuReading, ...]:
    return tuple(
        GpuReading(
            uuid=f"GPU-{i:08d}",
            index=i,
            name="Tesla V100-SXM2-32GB",
            memory_used_bytes=float(30_000_000_000 + rng.randrange(100_000_000)),
            memory_total_bytes=32e9,
            memory_busy_pct=float(rng.randint(40, 70)),
            peak_bw_gbps=898.0,
            peak_bw_source="nvml-formula",
            power_w=rng.randint(150_000, 250_000) / 1000,
            temperature_c=float(rng.randint(50, 70)),
        )
        for i in range(2)
    )


def rounds(
    target: str,
    start: float,
    end: float,
    interval: float = 5.0,
    seed: int = 1,
    restart_at: float | None = None,
    fail_every: int = 997,
) -> Iterator[ScrapeRound]:
    """Rounds every ``interval`` s in [start, end); every ``fail_every``-th scrape fails."""
    synth = Synth(seed)
    ts, i = start, 0
    while ts < end:
        if restart_at is not None and ts >= restart_at > ts - interval:
            synth._restart(ts)
        figures = synth.step(ts, interval)
        i += 1
        if i % fail_every == 0:
            yield ScrapeRound(target, ts, None, SourceResult(False, "connection refused", 0.003))
        else:
            yield ScrapeRound(
                target,
                ts,
                VllmScrape({MODEL: figures}, process_start_time_s=synth.process_start),
                SourceResult(True, None, 0.004),
                gateway=GatewayReading(float(synth.rng.randint(0, 4)), "sim"),
                gateway_status=SourceResult(True),
                gpus=gpus(synth.rng, ts),
                gpu_status=SourceResult(True),
            )
        ts += interval
