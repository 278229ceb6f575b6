"""Plain result records returned by the query facade and stored by the sweep tool.

Units are in the field names; ``None`` means "no data" (drawn as a gap, printed as null).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SweepLevel:
    """One concurrency level of a load sweep (key names shared with ``sim --calibrate``)."""

    concurrency: int
    duration_s: float
    requests: int
    errors: int
    tokens_per_s: float | None
    qps: float | None
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    ttft_p99_s: float | None
    itl_p95_s: float | None
    e2e_mean_s: float | None
    e2e_p95_s: float | None
    error_rate: float | None


@dataclass(frozen=True)
class SweepRun:
    """A whole load sweep: its inputs, levels and verdict."""

    started_at: float
    url: str
    model: str
    mix: str
    ttft_slo_s: float
    levels: tuple[SweepLevel, ...]
    recommendation: dict[str, Any] = field(default_factory=dict)
    id: int | None = None
