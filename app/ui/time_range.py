"""The time range of a view: ranges and verdict windows, the span a render draws, its step.

Pure (unit-tested in tests/test_ui_charts.py and tests/test_ui_truth.py): no Streamlit here.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.ui import charts
from core.durations import format_duration

RANGES: dict[str, float] = {
    "15m": 900,
    "1h": 3600,
    "6h": 6 * 3600,
    "24h": 86400,
    "7d": 7 * 86400,
    "30d": 30 * 86400,
}
DEFAULT_RANGE = "1h"
WINDOWS: dict[str, float] = {"1m": 60, "5m": 300, "15m": 900, "1h": 3600}
DEFAULT_WINDOW = "5m"
# Points per series at most. 500 still puts a point every 2-3 pixels of a full-width chart, and the
# browser's work grows with the points: 1,000 cost the Overview ~0.3 s more (docs/benchmarks.md).
MAX_POINTS = 500
# The Overview's eight panels are one Vega view: its first paint grows with all their points, and at
# 500 a series it took 2.6× a one-chart page here. 150 still puts a point every ~9 px of a full-width
# panel (docs/benchmarks.md, "The Overview's first paint").
OVERVIEW_POINTS = 150
# Steps a series may use: round numbers people read on an axis, and multiples of the 1-minute and
# hourly rollups once a step reaches them (so the facade can serve it from rollups).
STEPS = (5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def data_step(points: Sequence[Any], step_s: float, fields: Sequence[str] = ()) -> float:
    """The step a series should be drawn at: ``step_s``, or coarser when the rounds are further apart.

    History scraped every 30 s has one round in every third 10 s step; drawn at 10 s it is mostly
    holes. The median spacing of the points (steps with data) is the rounds' own spacing; the step
    becomes the smallest of :data:`STEPS` that holds a round each. ``fields``: a point has data when
    one of them has a value (the facade returns every step, with None figures where it has none).
    """
    points = charts.with_data(points, fields)
    gaps = sorted(b.ts - a.ts for a, b in zip(points, points[1:], strict=False))
    if not gaps or gaps[len(gaps) // 2] <= 1.5 * step_s:
        return step_s
    spacing = gaps[len(gaps) // 2]
    return float(next((s for s in STEPS if s >= spacing), STEPS[-1]))


def level_of(step_s: float) -> int:
    """The stored level a series of ``step_s`` reads (db/queries.py): 3600, 60 or 0 (raw rows)."""
    return 3600 if step_s % 3600 == 0 else 60 if step_s % 60 == 0 else 0


def over_text(span: Span, window_s: float) -> str:
    """What the verdict and tiles cover: ``over the last 5m`` live; ``over 16:00–17:00`` for a past range."""
    if span.live:
        return f"over the last {format_duration(window_s)}"
    same_day = time.localtime(span.start)[:3] == time.localtime(span.end)[:3]
    start = time.strftime("%Y-%m-%d %H:%M", time.localtime(span.start))
    end = time.strftime("%H:%M" if same_day else "%Y-%m-%d %H:%M", time.localtime(span.end))
    return f"over {start}–{end}"


def nice_step(span_s: float, max_points: int = MAX_POINTS, minimum: float = 5) -> float:
    """The smallest step of :data:`STEPS` (≥ ``minimum``) that keeps ``span_s`` under ``max_points`` points."""
    for step in STEPS:
        if step >= minimum and span_s / step <= max_points:
            return float(step)
    return float(math.ceil(span_s / max_points / 86400) * 86400)


@dataclass(frozen=True)
class Span:
    """The resolved time range of one render: unix seconds, and the series step."""

    start: float
    end: float
    step_s: float
    live: bool  # a relative range ending now (refreshes); a custom range is a fixed picture
    at: float  # the instant the verdict is judged: now, or the end of a custom range


def resolve(
    range_key: str, now: float, custom: tuple[float, float] | None = None, retention: tuple[float, float] | None = None
) -> Span:
    """The span for ``range_key`` ending at the last complete step before ``now``.

    Complete steps only, so that every point stands for a whole step (its quantiles over all of the
    step's requests, the step aligned with the rollups). Charts therefore lag by up to one step;
    tiles and verdict stay live (``at`` = now). (A step in progress no longer reads low tok/s: the
    facade divides increases by the time their scrapes cover, not by the step.)

    ``retention`` (raw, minute rollups; seconds): a custom range starting before the raw rows'
    retention steps by whole minutes (the minute rollups), before the minute rollups' by hours.
    """
    if range_key == "custom" and custom and custom[1] > custom[0]:
        start, end = custom
        raw_s, minute_s = retention or (math.inf, math.inf)
        minimum = 3600 if start < now - minute_s else 60 if start < now - raw_s else 5
        return Span(start, end, nice_step(end - start, minimum=minimum), live=False, at=end)
    length = RANGES.get(range_key, RANGES[DEFAULT_RANGE])
    step = nice_step(length)
    end = math.floor(now / step) * step
    return Span(end - length, end, step, live=True, at=now)


@dataclass(frozen=True)
class View:
    """What the user is looking at; every field comes from the URL."""

    target: str | None
    model: str | None  # None = all models of the target
    range_key: str
    custom: tuple[float, float] | None
    window_s: float

    retention: tuple[float, float] | None = None  # raw, minute rollups (s): see :func:`resolve`

    def span(self, now: float) -> Span:
        """Resolved at each render, so a live fragment moves with the clock."""
        return resolve(self.range_key, now, self.custom, self.retention)

    @property
    def live(self) -> bool:
        return self.range_key != "custom"


def now() -> float:
    """The clock of a render (one place, so a page never reads the time two ways)."""
    return time.time()
