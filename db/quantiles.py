"""Prometheus ``histogram_quantile`` over bucket increases (classic histograms).

Semantics, as in Prometheus' ``promql/quantile.go`` (``bucketQuantile``):

- rank = q × Δcount, where Δcount is the increase of the +Inf bucket (all observations);
- the answer lies in the first bucket whose cumulative increase is ≥ rank, linearly interpolated
  between its lower bound (the previous bucket's upper bound; 0 for the first bucket) and its upper
  bound;
- rank in the +Inf bucket → the largest finite bound, flagged (``in_inf_bucket``);
- Δcount = 0 (no requests in the window) → None (Prometheus: NaN, drawn as a gap);
- fewer than two buckets, or a last bound that is not +Inf → None (Prometheus: NaN).

The share of observations within a threshold (SLO attainment, :func:`attainment_matrix`) reads the
same increases the other way round: the cumulative count at the threshold ÷ Δcount, exact at a
bucket bound, interpolated between two bounds as above.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

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


def quantile_matrix(q: float, bounds: Sequence[float], counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`histogram_quantile` for every row of ``counts`` (rows × buckets) at once.

    Returns ``(values, in_inf_bucket)``; values are NaN where Δcount = 0 (no value).
    """
    if counts.size == 0 or len(bounds) < 2 or bounds[-1] != INF:
        return np.full(counts.shape[0], np.nan), np.zeros(counts.shape[0], dtype=bool)
    cum = np.cumsum(np.maximum(counts, 0), axis=1).astype(np.float64)
    total = cum[:, -1]
    rank = q * total
    hit = cum[:, :-1] >= rank[:, None]
    last = len(bounds) - 1
    b = np.where(hit.any(axis=1), hit.argmax(axis=1), last)
    in_inf = b == last
    upper_b = np.asarray([*bounds[:-1], bounds[-2]], dtype=np.float64)
    lower_b = np.concatenate(([0.0], np.asarray(bounds[:-1], dtype=np.float64)))
    rows = np.arange(len(b))
    below = np.where(b > 0, cum[rows, np.maximum(b - 1, 0)], 0.0)
    count = cum[rows, b] - below
    lower, upper = lower_b[b], upper_b[b]
    with np.errstate(invalid="ignore", divide="ignore"):
        value = np.where(count > 0, lower + (upper - lower) * (rank - below) / np.where(count > 0, count, 1), lower)
    value = np.where(in_inf, bounds[-2], value)
    return np.where(total > 0, value, np.nan), in_inf & (total > 0)


def holding_buckets(values: np.ndarray, in_inf: np.ndarray, bounds: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """The bucket ``(lower, upper]`` that holds each quantile of :func:`quantile_matrix`: the finest
    statement the histogram supports (the value inside it is an interpolation). A value clamped to
    the largest finite bound (``in_inf``) lies in ``(largest finite bound, +Inf]``; NaN stays NaN."""
    if len(bounds) < 2 or bounds[-1] != INF:
        return np.full(len(values), np.nan), np.full(len(values), np.nan)
    finite = np.asarray(bounds[:-1], dtype=np.float64)
    at = np.searchsorted(finite, np.nan_to_num(values, nan=0.0), side="left")  # first bound >= value
    lower = np.concatenate(([0.0], finite))[at]
    upper = np.concatenate((finite, [INF]))[at]
    lower, upper = np.where(in_inf, finite[-1], lower), np.where(in_inf, INF, upper)
    missing = np.isnan(values)
    return np.where(missing, np.nan, lower), np.where(missing, np.nan, upper)


class Attainment(NamedTuple):
    """:func:`attainment_matrix`'s arrays, one value per row (NaN: no value).

    ``share``: the share of observations at or below the threshold (0–1). Where the threshold is a
    bucket bound it is exact and the four bounds fields are NaN. Otherwise the histogram knows only
    the shares at the bounds either side, ``(lower_le, lower_share)`` and ``(upper_le,
    upper_share)``, and ``share`` interpolates linearly between them, as ``histogram_quantile``
    interpolates inside a bucket (the first bucket's lower bound is 0, with share 0). A threshold
    above the largest finite bound has ``upper_le`` +Inf and ``upper_share`` 1: nothing can be
    interpolated there, so ``share`` is the share at the largest finite bound, a floor (every
    observation of the +Inf bucket counted as over the threshold).
    """

    share: np.ndarray
    lower_le: np.ndarray
    lower_share: np.ndarray
    upper_le: np.ndarray
    upper_share: np.ndarray


def attainment_matrix(threshold: np.ndarray, bounds: Sequence[float], counts: np.ndarray) -> Attainment:
    """The share of each row's observations at or below its ``threshold`` (rows × buckets of
    per-bucket increases, ``bounds`` ascending and ending in +Inf): SLO attainment as vLLM's Grafana
    Overview computes it (``rate(_bucket{le=SLO}) ÷ rate(_count)``), with the interpolation for a
    threshold between two bounds. Δcount = 0, a NaN threshold or a malformed layout → NaN."""
    rows = counts.shape[0]
    if counts.size == 0 or len(bounds) < 2 or bounds[-1] != INF:
        return Attainment(*(np.full(rows, np.nan) for _ in range(5)))
    cum = np.cumsum(np.maximum(counts, 0), axis=1).astype(np.float64)
    total = cum[:, -1]
    finite = np.asarray(bounds[:-1], dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        at_bound = cum[:, :-1] / np.where(total > 0, total, 1.0)[:, None]  # share at each finite bound
    slo = np.asarray(threshold, dtype=np.float64)
    r = np.arange(rows)
    n = len(finite)
    # a threshold equal to a bound (as the settings parse "2.5s" and the page says le="2.5") is exact
    same = np.isclose(finite[None, :], slo[:, None], rtol=1e-9, atol=0.0)
    exact = same.any(axis=1)
    at = np.searchsorted(finite, np.nan_to_num(slo, nan=0.0), side="left")  # first bound ≥ threshold
    below, inside = at > 0, at < n
    lower_le = np.where(below, finite[np.maximum(at - 1, 0)], 0.0)
    lower_share = np.where(below, at_bound[r, np.maximum(at - 1, 0)], 0.0)
    upper_le = np.where(inside, finite[np.minimum(at, n - 1)], INF)
    upper_share = np.where(inside, at_bound[r, np.minimum(at, n - 1)], 1.0)
    # between two bounds: linear; above the last finite one (or a first bound ≤ 0): the lower share
    interpolates = inside & (upper_le > lower_le)
    with np.errstate(invalid="ignore", divide="ignore"):
        width = np.where(interpolates, upper_le - lower_le, 1.0)
        between = lower_share + (upper_share - lower_share) * np.clip((slo - lower_le) / width, 0.0, 1.0)
    share = np.where(exact, at_bound[r, same.argmax(axis=1)], np.where(interpolates, between, lower_share))
    missing = (total <= 0) | np.isnan(slo)
    share = np.where(missing, np.nan, share)
    hide = missing | exact
    return Attainment(share, *(np.where(hide, np.nan, a) for a in (lower_le, lower_share, upper_le, upper_share)))
