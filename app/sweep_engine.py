"""The engine's own TTFT P95 over each level of a load sweep, beside the client's (docs/sweep.md).

The sweep times requests at the client; the engine times them from their arrival at the engine to
the first token made, and keeps only bucket counts. Reading the engine's ``/metrics`` as each
level's window opens and closes (the runner's probe) gives that window's increase of its TTFT
buckets, and from it Prometheus's ``histogram_quantile``: the value Sweetspot's alerts and
``status`` would show for that window, with the bucket that holds it (docs/metrics.md explains why
the two figures differ).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import numpy as np

from collectors.records import Histogram
from collectors.vllm import scrape_vllm, total_figures
from core.errors import ScrapeError
from core.redact import masked
from core.settings import HttpSettings
from db.quantiles import histogram_quantile, holding_buckets

log = logging.getLogger(__name__)

TIMEOUT_S = 5.0


@dataclass(frozen=True)
class EngineQuantile:
    """A quantile of the engine's histogram over one window, in seconds, and the bucket
    ``(lower, upper]`` that holds it (upper +Inf: beyond the largest finite bound)."""

    value_s: float
    bucket: tuple[float, float]


def window_quantile(q: float, before: Histogram | None, after: Histogram | None) -> EngineQuantile | None:
    """``histogram_quantile(q)`` over the increase from ``before`` to ``after``; None when either is
    missing, their bounds differ, a bucket went down (the engine restarted) or nothing was observed."""
    if before is None or after is None or before.bounds != after.bounds:
        return None
    grown = np.asarray(after.cumulative) - np.asarray(before.cumulative)
    if (grown < 0).any():
        return None
    found = histogram_quantile(q, after.bounds, list(np.diff(grown, prepend=0.0)))
    if found is None:
        return None
    lower, upper = holding_buckets(np.array([found.value]), np.array([found.in_inf_bucket]), after.bounds)
    return EngineQuantile(float(found.value), (float(lower[0]), float(upper[0])))


class EngineWindows:
    """The runner's probe: the engine's TTFT histogram (all models summed) at each level's window
    start and end, read from ``metrics_url`` with ``http`` (a target's settings: token, headers, CA).
    A page that cannot be read costs that level's engine figure only, said once on stderr."""

    def __init__(self, metrics_url: str, http: HttpSettings | None = None) -> None:
        self.metrics_url, self.http = metrics_url, http or HttpSettings()
        self.read: dict[tuple[int, str], Histogram | None] = {}
        self._warned = False

    async def __call__(self, concurrency: int, edge: str) -> None:
        # in a thread: the clients keep streaming on the event loop meanwhile
        self.read[(concurrency, edge)] = await asyncio.to_thread(self._ttft)

    def _ttft(self) -> Histogram | None:
        try:
            return total_figures(scrape_vllm(self.metrics_url, TIMEOUT_S, http=self.http)).histograms.get("ttft")
        except ScrapeError as exc:
            if not self._warned:
                log.warning("sweep: cannot read the engine's TTFT histogram at %s (%s); its TTFT P95 is left out",
                            masked(self.metrics_url), exc.one_line())  # fmt: skip
                self._warned = True
            return None

    def ttft_p95(self, concurrency: int) -> EngineQuantile | None:
        """The engine's TTFT P95 over the window of the level ``concurrency`` (None: not known)."""
        return window_quantile(0.95, self.read.get((concurrency, "start")), self.read.get((concurrency, "end")))
