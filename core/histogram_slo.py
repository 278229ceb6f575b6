"""Is a histogram's quantile within an SLO? Judged from the bucket bounds alone (pure: no I/O, no clock).

A Prometheus histogram keeps counts at bucket bounds (``le``), not the requests' times: a quantile read
from it (``histogram_quantile``) is an interpolation inside one bucket. vLLM's TTFT buckets jump from
2.5 s to 5 s around a 3 s SLO, so an interpolated P95 of 3.37 s says nothing about whether 95 % of the
requests were served within 3 s (DOMAIN.md §3). This module says "within" or "outside" only where the
bounds prove it, and otherwise "cannot tell", naming the bucket the SLO falls in.

The rule, for quantile q and SLO s, over the requests the counts cover:

- **within** when the share of requests at or under the largest bound ≤ s is ≥ q (those requests
  took at most that bound, hence at most s: the q-quantile is ≤ s whatever happened inside buckets);
- **outside** when the share at or under the smallest bound ≥ s is < q (even if every request of the
  bucket the SLO falls in took at most s, fewer than q of them did: the q-quantile is > s);
- **cannot tell** otherwise: the bucket (largest bound ≤ s, smallest bound ≥ s] holds the answer.

A bound exactly at the SLO makes the judgement exact (both bounds are the SLO). Above the largest
finite bound only "within" can be proven (the ``+Inf`` bucket has no upper time).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

WITHIN: Final = "within"
OUTSIDE: Final = "outside"
CANNOT_TELL: Final = "cannot tell"
State = Literal["within", "outside", "cannot tell"]


@dataclass(frozen=True)
class QuantileJudgement:
    """The judgement of a histogram quantile against an SLO, with the figures that prove it.

    ``state`` is :data:`WITHIN`, :data:`OUTSIDE` or :data:`CANNOT_TELL`. ``bucket`` is the bucket the
    SLO falls in, ``(lower, upper)`` in seconds meaning (lower, upper] (lower 0 below the first bound,
    upper ``inf`` past the last); ``share_lower`` and ``share_upper`` are the shares (0-1) of the
    requests at or under those bounds, between which the share at or under the SLO lies.
    """

    state: State
    quantile: float
    slo_s: float
    bucket: tuple[float, float]
    share_lower: float
    share_upper: float
    requests: float

    @property
    def bucket_text(self) -> str:
        """``(2.5, 5] s``; ``(10, +Inf) s`` past the last finite bound."""
        lower, upper = self.bucket
        return f"({lower:g}, +Inf) s" if math.isinf(upper) else f"({lower:g}, {upper:g}] s"

    @property
    def text(self) -> str:
        """One clause for a reason or a surface:

        ``within 3 s (96.2 % of 1,200 requests at or under 2.5 s)``,
        ``outside 3 s (only 91.0 % at or under 5 s)``,
        ``cannot tell against 3 s: P95 in (2.5, 5] s (93.0 % at or under 2.5 s, 98.0 % at or under 5 s)``.
        """
        lower, upper = self.bucket
        if self.state == WITHIN:
            return (f"within {self.slo_s:g} s ({100 * self.share_lower:.1f} % of {self.requests:,.0f} requests "
                    f"at or under {lower:g} s)")  # fmt: skip
        if self.state == OUTSIDE:
            return f"outside {self.slo_s:g} s (only {100 * self.share_upper:.1f} % at or under {upper:g} s)"
        return (f"cannot tell against {self.slo_s:g} s: P{100 * self.quantile:g} in {self.bucket_text} "
                f"({100 * self.share_lower:.1f} % at or under {lower:g} s, {100 * self.share_upper:.1f} % at or "
                f"under {'+Inf' if math.isinf(upper) else f'{upper:g} s'})")  # fmt: skip


def judge_histogram_quantile(
    buckets: Iterable[tuple[float, float]], slo_s: float, quantile: float = 0.95
) -> QuantileJudgement | None:
    """Judge the ``quantile`` (0-1) of a histogram against ``slo_s`` (seconds) from its bucket bounds.

    ``buckets`` are ``(le, cumulative count)`` pairs in any order, counted over one window (the
    increase of each ``_bucket`` counter), and must include the ``+Inf`` bucket, whose count is every
    request. Counts that fall with a higher bound (a counter reset inside the window) are raised to
    the count below. Returns None when the window counted no request, or has no ``+Inf`` bucket
    (without it the requests past the last bound are unknown). See the module docstring for the rule.
    """
    ordered = sorted((float(le), max(float(count), 0.0)) for le, count in buckets if not math.isnan(le))
    if not ordered or not math.isinf(ordered[-1][0]):
        return None
    cumulative: list[tuple[float, float]] = []
    running = 0.0
    for le, count in ordered:
        running = max(running, count)
        cumulative.append((le, running))
    total = cumulative[-1][1]
    if total <= 0:
        return None
    lower, at_lower = max(((le, c) for le, c in cumulative if le <= slo_s), default=(0.0, 0.0))
    upper, at_upper = min((le, c) for le, c in cumulative if le >= slo_s)
    return judge_shares(at_lower / total, at_upper / total, (lower, upper), slo_s, total, quantile)


def judge_shares(
    share_lower: float, share_upper: float, bucket: tuple[float, float], slo_s: float, requests: float,
    quantile: float = 0.95,
) -> QuantileJudgement:
    """The judgement from the shares (0-1) of ``requests`` at or under the bounds either side of
    ``slo_s`` (``bucket`` = those bounds in seconds; equal shares where a bound is the SLO): the rule
    of the module docstring, for callers that already hold the shares (summed over many steps, say)."""
    state: State
    if share_lower >= quantile:
        state = WITHIN
    elif share_upper < quantile:
        state = OUTSIDE
    else:
        state = CANNOT_TELL
    return QuantileJudgement(state, quantile, slo_s, bucket, share_lower, share_upper, requests)
