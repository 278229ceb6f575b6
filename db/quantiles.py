"""Prometheus ``histogram_quantile`` over bucket increases (classic histograms).

Semantics, as in Prometheus' ``promql/quantile.go`` (``bucketQuantile``):

- rank = q × Δcount, where Δcount is the increase of the +Inf bucket (all observations);
- the answer lies in the first bucket whose cumulative increase is ≥ rank, linearly interpolated
  between its lower bound (the previous bucket's upper bound; 0 for the first bucket) and its upper
  bound;
- rank in the +Inf bucket → the largest finite bound, flagged (``in_inf_bucket``);
- Δcount = 0 (no requests in the window) → None (Prometheus: NaN, drawn as a gap);
- fewer than two buckets, or a last bound that is not +Inf → None (Prometheus: NaN).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

INF = float("inf")


@dataclass(frozen=True)
class Quantile:
    """One quantile in seconds (or the histogram's unit); ``in_inf_bucket`` when clamped."""

    value: float
    in_inf_bucket: bool = False


def histogram_quantile(q: float, bounds: Sequence[float], increases: Sequence[float]) -> Quantile | None:
    """``q`` in [0, 1]; ``bounds`` ascending upper bounds ending in +Inf; ``increases`` per bucket.

    ``increases`` are per-bucket (non-cumulative) increases over the window. None = no value.
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be within [0, 1], got {q}")
    if len(bounds) < 2 or bounds[-1] != INF or len(bounds) != len(increases):
        return None
    cumulative: list[float] = []
    running = 0.0
    for inc in increases:
        running += max(inc, 0.0)  # a negative increase cannot happen; treat as none (monotonic fix)
        cumulative.append(running)
    total = cumulative[-1]
    if total <= 0:
        return None
    rank = q * total
    b = next((i for i, c in enumerate(cumulative[:-1]) if c >= rank), len(bounds) - 1)
    if b == len(bounds) - 1:
        return Quantile(bounds[-2], in_inf_bucket=True)
    if b == 0 and bounds[0] <= 0:
        return Quantile(bounds[0])
    start = bounds[b - 1] if b > 0 else 0.0
    below = cumulative[b - 1] if b > 0 else 0.0
    count = cumulative[b] - below
    if count <= 0:
        return Quantile(start)
    return Quantile(start + (bounds[b] - start) * ((rank - below) / count))


def quantile_value(q: float, bounds: Sequence[float], increases: Sequence[float]) -> float | None:
    """The bare value of :func:`histogram_quantile` (None = no value)."""
    result = histogram_quantile(q, bounds, increases)
    return None if result is None else result.value
