"""Hand-made scrape rounds shaped like the reference deployment (DOMAIN.md §2), for UI tests and bench.

Load follows a daily wave of concurrency (4 → 40); throughput and TTFT follow the report's curve
(8 → 85, 16 → 126, 32 → 145 tok/s; TTFT P95 1.5 s at 8, 4.8 s at 32); above 30 running the KV cache
fills and preemptions start. Counters and histogram buckets are cumulative integers, as vLLM
exposes them, so the writer's increase logic runs for real. Replace with the simulator's
``generate_history`` + ``parse_vllm`` once both land.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from app.settings import CeilingSettings, GatewaySettings, GpuSettings, TargetSettings
from collectors.records import (
    GatewayReading,
    GpuReading,
    Histogram,
    ModelFigures,
    ScrapeRound,
    SourceResult,
    VllmScrape,
)

MODEL = "llama-70b-awq"
TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80,
               160, 640, 2560, math.inf)  # fmt: skip
NAMES = {
    "generation_tokens": "vllm:generation_tokens_total",
    "prompt_tokens": "vllm:prompt_tokens_total",
    "preemptions": "vllm:num_preemptions_total",
    "request_success": "vllm:request_success_total",
    "requests_running": "vllm:num_requests_running",
    "requests_waiting": "vllm:num_requests_waiting",
    "kv_cache_usage": "vllm:kv_cache_usage_perc",
    "ttft": "vllm:time_to_first_token_seconds",
}
GPUS = 8


def interpolate(points: tuple[tuple[float, float], ...], x: float) -> float:
    """Piecewise-linear through ``points``, flat beyond the last one."""
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]


TOKENS = ((0, 0.0), (8, 85.0), (16, 126.0), (32, 145.0))
TTFT_P95 = ((0, 0.4), (8, 1.5), (16, 2.6), (32, 4.8), (48, 9.0))


def target_settings(name: str = "demo") -> TargetSettings:
    gateway = GatewaySettings(
        preset="sweetspot-sim",
        kind="prometheus",
        url="http://127.0.0.1:9000/metrics",
        metric="sweetspot_gateway_queue_depth",
    )
    return TargetSettings(
        name=name, vllm_url="http://127.0.0.1:8000/metrics", gateway=gateway, gpu=GpuSettings(source="nvml"),
        ceiling=CeilingSettings(),
    )  # fmt: skip


@dataclass
class Deployment:
    """Cumulative state of one simulated vLLM; :meth:`rounds` advances it."""

    target: str = "demo"
    seed: int = 1
    counters: dict[str, float] = field(default_factory=lambda: dict.fromkeys(NAMES, 0.0))
    buckets: list[int] = field(default_factory=lambda: [0] * len(TTFT_BOUNDS))
    ttft_sum: float = 0.0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def demand(self, ts: float) -> float:
        """Requests in flight: a daily wave peaking mid-afternoon (UTC), with noise."""
        day = 0.5 - 0.5 * math.cos(2 * math.pi * ((ts / 86400) % 1 - 0.125))
        return max(0.0, 4 + 36 * day**2 + self.rng.gauss(0, 1.5))

    def rounds(self, start: float, end: float, step_s: float, down_after: float | None = None) -> Iterator[ScrapeRound]:
        ts = start
        while ts < end:
            if down_after is not None and ts >= down_after:
                yield self.failed(ts)
            else:
                yield self.round(ts, step_s)
            ts += step_s

    def failed(self, ts: float) -> ScrapeRound:
        error = "cannot reach http://127.0.0.1:8000/metrics (connection refused)"
        return ScrapeRound(
            self.target, ts, None, SourceResult(False, error), None, None, (), SourceResult(False, error)
        )

    def round(self, ts: float, step_s: float) -> ScrapeRound:
        demand = self.demand(ts)
        running = min(demand, 32.0)
        figures = self._advance(running, step_s)
        gateway = GatewayReading(max(0.0, round(demand - 30)), "sweetspot-sim")
        gpus = tuple(self._gpu(i, running) for i in range(GPUS))
        scrape = VllmScrape({MODEL: figures}, metric_names_used=NAMES, missing=("queue_time",))
        return ScrapeRound(self.target, ts, scrape, SourceResult(True, duration_s=0.01), gateway, SourceResult(True), gpus, SourceResult(True))  # fmt: skip

    def _advance(self, running: float, step_s: float) -> ModelFigures:
        tokens = interpolate(TOKENS, running) * step_s * self.rng.uniform(0.9, 1.1)
        requests = self.rng.gauss(tokens / 300, 0.3 * math.sqrt(max(tokens / 300, 0.01)))
        finished = max(0, round(requests))
        c = self.counters
        c["generation_tokens"] += round(tokens)
        c["prompt_tokens"] += round(tokens * 3.1)
        c["request_success"] += finished
        c["preemptions"] += self.rng.randint(1, 4) if running > 30 else 0
        self._observe_ttft(finished, interpolate(TTFT_P95, running))
        gauges = {
            "requests_running": round(running),
            "requests_waiting": float(max(0, round(running) - 30)),
            "kv_cache_usage": min(1.0, 0.25 + 0.023 * running),
        }
        hist = Histogram(TTFT_BOUNDS, tuple(float(b) for b in self.buckets), float(self.buckets[-1]), self.ttft_sum)
        counters = {
            k: v for k, v in c.items() if k in ("generation_tokens", "prompt_tokens", "preemptions", "request_success")
        }
        return ModelFigures(counters=counters, gauges=gauges, histograms={"ttft": hist})

    def _observe_ttft(self, n: int, p95: float) -> None:
        # Exponential TTFTs: P95 = 3 × mean, so the stored histogram reproduces the wanted P95.
        mean = p95 / 3.0
        for i, bound in enumerate(TTFT_BOUNDS):
            self.buckets[i] += n if math.isinf(bound) else round(n * (1 - math.exp(-bound / mean)))
        self.ttft_sum += n * mean

    def _gpu(self, i: int, running: float) -> GpuReading:
        return GpuReading(
            uuid=f"GPU-{i:04d}-demo", index=i, name="Tesla V100-SXM2-32GB", memory_used_bytes=29.6e9 + i * 1e7,
            memory_total_bytes=34.36e9, memory_busy_pct=min(100.0, 35 + 1.6 * running + i), peak_bw_gbps=898.0,
            peak_bw_source="nvml-formula", power_w=120 + 5.5 * running, temperature_c=42 + 0.8 * running, host="node1",
        )  # fmt: skip
