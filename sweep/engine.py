"""The engine's own figures over a level, beside the client's: what vLLM's ``/metrics`` counted.

The sweep reads the server's ``/metrics`` (the base URL without its ``/v1``) when a level's span
starts and once its last request has ended. Output tok/s = the increase of
``vllm:generation_tokens_total`` ÷ the time between the two readings; TTFT P95 = Prometheus'
``histogram_quantile`` over the increase of ``vllm:time_to_first_token_seconds``'s buckets, with the
bucket ``(lower, upper]`` that holds it (the finest statement the histogram supports). They count
every request the server ran meanwhile, the sweep's or not, and no client's own path: the client's
TTFT adds the API server's HTTP, tokenising and streaming time, and whatever wait for a CPU the
client had (docs/metrics.md). A server without vLLM's metrics there (another engine, a gateway), a
failed reading, or an engine restarted in between gives none, and the sweep goes on without them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx
import numpy as np

from collectors.fetch import MAX_BODY_BYTES, BodyError, read_bounded
from collectors.records import Histogram
from collectors.vllm import parse_vllm, total_figures
from core.errors import ScrapeError
from db.quantiles import histogram_quantile, holding_buckets


@dataclass(frozen=True)
class EngineReading:
    """One reading of the engine's counters; ``at_s`` is its ``time.perf_counter()`` time."""

    at_s: float
    tokens: float | None
    ttft: Histogram | None


@dataclass(frozen=True)
class EngineLevel:
    """The engine's figures over one level's span. ``ttft_p95_bucket``'s upper bound is +Inf when
    the P95 lies past the largest finite bound; None figures: nothing to compute them from."""

    concurrency: int
    tokens_per_s: float | None
    ttft_p95_s: float | None
    ttft_p95_bucket: tuple[float, float] | None


def metrics_url(base_url: str) -> str:
    """vLLM's ``/metrics`` on the server of an OpenAI base URL (``http://h:8000/v1`` → ``http://h:8000/metrics``)."""
    root = base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url
    return root + "/metrics"


async def read_engine(client: httpx.AsyncClient, url: str) -> EngineReading | None:
    """The engine's output-token counter and TTFT histogram now; None when ``url`` gives no vLLM page."""
    try:
        async with client.stream("GET", url) as response:
            if response.status_code != 200:
                return None
            page = await read_bounded(response, MAX_BODY_BYTES, url)  # as the collector reads a page: 32 MiB at most
        at = time.perf_counter()
        figures = total_figures(parse_vllm(page.decode("utf-8", errors="replace"), source=url))
    except (httpx.HTTPError, ScrapeError, BodyError):
        return None
    return EngineReading(at, figures.counters.get("generation_tokens"), figures.histograms.get("ttft"))


def engine_level(
    concurrency: int, before: EngineReading | None, after: EngineReading | None, speed: float = 1.0
) -> EngineLevel | None:
    """The engine's figures between two readings (tok/s ÷ ``speed``, the server's clock rate, as the
    client's); None without both readings or when a counter went down (the engine restarted)."""
    if before is None or after is None or after.at_s <= before.at_s:
        return None
    tokens = None
    if before.tokens is not None and after.tokens is not None:
        if after.tokens < before.tokens:
            return None
        tokens = (after.tokens - before.tokens) / (after.at_s - before.at_s) / speed
    p95, bucket = _p95(before.ttft, after.ttft)
    return EngineLevel(concurrency, tokens, p95, bucket)


def _p95(before: Histogram | None, after: Histogram | None) -> tuple[float | None, tuple[float, float] | None]:
    if before is None or after is None or before.bounds != after.bounds:
        return None, None
    cumulative = [a - b for a, b in zip(after.cumulative, before.cumulative, strict=True)]
    increases = [c - p for c, p in zip(cumulative, [0.0, *cumulative[:-1]], strict=True)]
    if any(inc < 0 for inc in increases):
        return None, None  # a bucket went down: the engine restarted between the readings
    quantile = histogram_quantile(0.95, after.bounds, increases)
    if quantile is None:
        return None, None
    lower, upper = holding_buckets(np.array([quantile.value]), np.array([quantile.in_inf_bucket]), after.bounds)
    return quantile.value, (float(lower[0]), float(upper[0]))
