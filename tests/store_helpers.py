"""Small builders of scrape rounds for the storage tests."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from collectors.records import INF, Histogram, ModelFigures, ScrapeRound, SourceResult, VllmScrape

BOUNDS = (0.1, 0.5, 1.0, INF)


def vllm_round(
    ts: float,
    gen: float | None = None,
    *,
    target: str = "t",
    model: str = "m",
    hist: tuple[float, ...] | None = None,
    bounds: tuple[float, ...] = BOUNDS,
    created: Mapping[str, float] | None = None,
    process_start: float | None = None,
    running: float | None = 4.0,
    preemptions: float | None = None,
) -> ScrapeRound:
    counters = {} if gen is None else {"generation_tokens": gen}
    if preemptions is not None:
        counters["preemptions"] = preemptions
    histograms = {} if hist is None else {"ttft": Histogram(bounds, hist, hist[-1], None)}
    figures = ModelFigures(
        counters=counters,
        gauges={} if running is None else {"requests_running": running},
        histograms=histograms,
        created=dict(created or {}),
    )
    scrape = VllmScrape({model: figures}, process_start_time_s=process_start)
    return ScrapeRound(target, ts, scrape, SourceResult(True, None, 0.01))


def one_round(first: ScrapeRound, *others: ScrapeRound) -> ScrapeRound:
    """``first`` with the models of ``others`` too (rounds of the same target and time, one model each)."""
    assert first.vllm is not None
    models = dict(first.vllm.models)
    for other in others:
        assert other.vllm is not None
        models.update(other.vllm.models)
    return dataclasses.replace(first, vllm=dataclasses.replace(first.vllm, models=models))


def failed_round(ts: float, error: str = "connection refused", target: str = "t") -> ScrapeRound:
    return ScrapeRound(target, ts, None, SourceResult(False, error, 3.0))
