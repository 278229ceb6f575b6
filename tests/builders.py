"""Hand-built query-facade records for tests: healthy reference figures, overridden per test."""

from __future__ import annotations

import dataclasses
from typing import Any

from core.mbu import DRAM_DCGM, MODELLED
from db.results import CeilingInfo, SeriesPoint, WindowFigures

END = 1_800_000_000.0
CEILING = CeilingInfo(180.0, 40.0, 8, 900.0, "config", 327680.0, "config")


def window(**changes: Any) -> WindowFigures:
    """A target sitting at the sweet spot (concurrency 16, 126 tok/s, TTFT P95 2.1 s) over 5 minutes."""
    base = WindowFigures(
        target="demo", model=None, window_s=300.0, start=END - 300, end=END,
        ttft_p50_s=0.9, ttft_p95_s=2.1, ttft_p99_s=2.7, ttft_p95_in_inf_bucket=False,
        itl_p95_s=0.09, e2e_p95_s=40.0, tokens_per_s=126.0, prompt_tokens_per_s=400.0,
        preemptions=0.0, requests_per_s=0.4, running_avg=15.5, running_max=16.0, waiting_max=0.0,
        queue_depth_max=2.0, kv_cache_usage_max=0.6, ceiling_steps_per_s=180.0, ceiling_share=0.7,
        ceiling=CEILING, gpus=(), last_scrape_at=END - 2, up=True, last_error=None,
        scrapes=60, failed_scrapes=0, mbu=0.55, mbu_source=MODELLED, dram_bw_util=0.55, dram_bw_source=DRAM_DCGM,
    )  # fmt: skip
    return dataclasses.replace(base, **_as_clients_see_it(changes))


def _as_clients_see_it(changes: dict[str, Any]) -> dict[str, Any]:
    """No gateway wait unless a test gives one: clients see the engine's TTFT P95 (as the pipeline says)."""
    return {"client_ttft_p95_s": changes.get("ttft_p95_s", 2.1), **changes}


def point(ts: float, **changes: Any) -> SeriesPoint:
    """One healthy series step at ``ts``."""
    base = SeriesPoint(
        ts=ts, ttft_p50_s=0.9, ttft_p95_s=2.1, ttft_p99_s=2.7, itl_p95_s=0.09, e2e_p95_s=40.0,
        tokens_per_s=126.0, prompt_tokens_per_s=400.0, preemptions=0.0, requests_per_s=0.4,
        running_avg=15.5, running_max=16.0, waiting_max=0.0, queue_depth_max=2.0,
        kv_cache_usage_max=0.6, up_ratio=1.0, preemptions_per_s=0.0,
    )  # fmt: skip
    return dataclasses.replace(base, **_as_clients_see_it(changes))


def queue_ramp(depths: list[float | None], step_s: float = 60.0, end: float = END) -> list[SeriesPoint]:
    """Steps ending at ``end`` whose gateway queue depths are ``depths`` (oldest first)."""
    start = end - step_s * (len(depths) - 1)
    return [point(start + i * step_s, queue_depth_max=q) for i, q in enumerate(depths)]
