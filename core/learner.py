"""A target's own throughput curve and its knee, learned from its traffic (pure: no I/O, no clock).

The input is one sample per stored step (a minute in production; a finer grain when the learner
settings ask for it, each sample then weighing its share of a minute): the running requests
(average), the output tok/s and the TTFT P95 of that step (the clients': app/sweet_spot.py reads
``client_ttft_p95_s``, the engine's plus a gateway's wait). Samples are grouped by running
concurrency rounded to a whole request (idle ones, under :data:`IDLE_RUNNING`, left out); a monotone
(non-decreasing) least-squares fit of tok/s over the groups, weighted by their minutes
(pool-adjacent violators), is the curve, and its
highest value the plateau. The knee is the smallest concurrency where the curve reaches
``share`` (90 %) of the plateau, interpolated between levels and rounded to a whole request, then
stepped back below the first level from which the median TTFT P95 stays above the SLO.

The learner refuses to guess, and says what it lacks, when the minutes are too few, the
concurrency levels too few (both :class:`Limits`, the ``[learner]`` settings), or the curve has not flattened within the concurrencies seen (traffic
that never went past the knee cannot show it): :attr:`Learned.knee` is then None and
:attr:`Learned.reason` says how much more traffic, at which load, it needs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from core.knee import monotone_fit

IDLE_RUNNING = 0.5  # a minute under half a running request decoded (almost) nothing
MIN_MINUTES = 120  # busy minutes the learner needs before it says anything
MIN_LEVELS = 4  # distinct concurrency levels, each of MIN_LEVEL_MINUTES at least
MIN_LEVEL_MINUTES = 3
TRIM = 0.05  # share of the busy minutes, at the highest concurrencies, left out of the fit
SHARE = 0.9  # the knee: the smallest concurrency reaching this share of the plateau
# The curve has flattened when its slope past the knee is under this share of its slope at the
# lowest level (tok/s per added request): a curve still rising as steeply has no plateau yet.
FLAT_SLOPE = 0.25


@dataclass(frozen=True)
class Limits:
    """What the learner needs before it says anything: busy minutes in all, concurrency levels, and
    minutes at each level. The defaults are production's; the ``[learner]`` settings change them."""

    min_minutes: float = MIN_MINUTES
    min_levels: int = MIN_LEVELS
    min_level_minutes: float = MIN_LEVEL_MINUTES


PRODUCTION = Limits()


@dataclass(frozen=True)
class Sample:
    """One step: running requests (average), output tok/s, TTFT P95 in seconds (None: not known), and
    the minutes it covers (1: a minute rollup; 5 s of per-scrape rows weigh 1/12)."""

    running: float
    tokens_per_s: float
    ttft_p95_s: float | None = None
    minutes: float = 1.0


@dataclass(frozen=True)
class Level:
    """The minutes at one concurrency: their mean tok/s, the fitted (monotone) tok/s, the median TTFT P95."""

    concurrency: int
    tokens_per_s: float
    fitted: float
    minutes: float
    ttft_p95_s: float | None


@dataclass(frozen=True)
class Learned:
    """What the learner found: ``knee`` (None when it refuses), the levels it rests on, and why.

    ``reason`` is one sentence: how the knee was found, or what is missing (for a refusal it ends
    with the traffic that would let it learn: "N more hours at concurrency above C").
    """

    knee: int | None
    levels: tuple[Level, ...]
    minutes: float
    plateau: float | None
    reason: str
    more_hours: float | None = None  # refused: about how many more hours of traffic it needs

    @property
    def curve(self) -> tuple[tuple[float, float], ...]:
        """(concurrency, fitted tok/s) of every level: the own curve the under-delivery rule reads."""
        return tuple((float(lv.concurrency), lv.fitted) for lv in self.levels)

    @property
    def rests_on(self) -> str:
        """``1,440 minutes at 12 concurrency levels``."""
        return f"{_count(self.minutes)} minutes at {len(self.levels)} concurrency levels"


def levels_of(samples: Iterable[Sample]) -> list[Level]:
    """Busy minutes grouped by whole running requests, with the monotone fit of their tok/s."""
    groups: dict[int, list[Sample]] = {}
    for s in samples:
        if s.running >= IDLE_RUNNING and math.isfinite(s.running) and math.isfinite(s.tokens_per_s) and s.minutes > 0:
            groups.setdefault(round(s.running), []).append(s)
    keys = sorted(groups)
    weights = [sum(s.minutes for s in groups[c]) for c in keys]
    means = [sum(s.tokens_per_s * s.minutes for s in groups[c]) / w for c, w in zip(keys, weights, strict=True)]
    fitted = monotone_fit(means, weights)
    return [Level(c, m, f, w, _median([s.ttft_p95_s for s in groups[c]]))
            for c, m, f, w in zip(keys, means, fitted, weights, strict=True)]  # fmt: skip


def learn(samples: Iterable[Sample], slo_s: float | None, share: float = SHARE, limits: Limits = PRODUCTION) -> Learned:
    """The knee of the curve the samples draw, or a refusal saying what more traffic is needed."""
    all_levels = levels_of(samples)
    minutes = sum(lv.minutes for lv in all_levels)
    levels = tuple(lv for lv in _trimmed(all_levels) if lv.minutes >= limits.min_level_minutes)
    if minutes < limits.min_minutes:
        more = (limits.min_minutes - minutes) / 60
        return Learned(None, levels, minutes, None, f"{_count(minutes)} busy minutes, it needs {_count(limits.min_minutes)}: "
                       f"{_hours(more)} more hours of traffic", more)  # fmt: skip
    if len(levels) < limits.min_levels:
        more = (limits.min_levels - len(levels)) * limits.min_level_minutes / 60
        return Learned(None, levels, minutes, None, f"{len(levels)} concurrency levels, it needs {limits.min_levels}: "
                       f"{_hours(more)} more hours at other loads", more)  # fmt: skip
    levels = _refit(levels)
    top, first = levels[-1].concurrency, levels[0]
    plateau = levels[-1].fitted
    at = _reach(levels, share * plateau)
    initial = first.fitted / first.concurrency
    tail = (plateau - _fitted_at(levels, top / 2)) / (top / 2)  # the slope over the upper half seen
    if at >= top or tail >= FLAT_SLOPE * initial:
        more = limits.min_minutes / 60
        return Learned(None, levels, minutes, plateau, f"the curve has not flattened up to concurrency {top} "
                       f"({tail:.3g} tok/s per added request over its upper half against {initial:.3g} at "
                       f"{first.concurrency}): {_hours(more)} more hours at concurrency above {top}", more)  # fmt: skip
    knee = max(1, round(at))
    reason = f"{share:.0%} of its plateau ({plateau:,.0f} tok/s) at {knee}"
    breach = _breach(levels, slo_s)
    if breach is not None and breach.concurrency <= knee:
        below = [lv.concurrency for lv in levels if lv.concurrency < breach.concurrency]
        if not below:
            return Learned(None, levels, minutes, plateau, f"TTFT P95 passes the {slo_s:g} s SLO at every "
                           f"concurrency seen (from {breach.concurrency})")  # fmt: skip
        knee = below[-1]
        reason += f", capped at {knee}: TTFT P95 {breach.ttft_p95_s:.3g} s at {breach.concurrency} > {slo_s:g} s SLO"
    return Learned(knee, levels, minutes, plateau, reason)


def _breach(levels: Sequence[Level], slo_s: float | None) -> Level | None:
    """The lowest level from which the median TTFT P95 stays above the SLO at every level above it
    (levels without a TTFT aside). A breach at a low level that higher levels do not share is not the
    price of concurrency (a night of long prompts at two running, say) and does not cap the knee."""
    if slo_s is None:
        return None
    found = None
    for lv in reversed([lv for lv in levels if lv.ttft_p95_s is not None]):
        if lv.ttft_p95_s is None or lv.ttft_p95_s <= slo_s:
            break
        found = lv
    return found


def _trimmed(levels: Sequence[Level]) -> list[Level]:
    """``levels`` without the busiest :data:`TRIM` of their minutes: the highest concurrencies seen are
    a few minutes of transitions and gauge noise, and the plateau must not rest on them."""
    keep = sum(lv.minutes for lv in levels) * (1 - TRIM)
    out: list[Level] = []
    seen = 0.0
    for lv in levels:
        if seen >= keep:
            break
        out.append(lv)
        seen += lv.minutes
    return out


def _refit(levels: Sequence[Level]) -> tuple[Level, ...]:
    fitted = monotone_fit([lv.tokens_per_s for lv in levels], [float(lv.minutes) for lv in levels])
    return tuple(dataclasses.replace(lv, fitted=f) for lv, f in zip(levels, fitted, strict=True))


def expected_at(curve: Sequence[tuple[float, float]], concurrency: float) -> float | None:
    """tok/s the curve gives at ``concurrency``: linear between its points, through the origin below
    the first, flat past the last (its plateau). None for an empty curve."""
    points = sorted(curve)
    if not points or concurrency < 0:
        return None
    c0, t0 = points[0]
    if concurrency <= c0:
        return t0 * concurrency / c0 if c0 > 0 else t0
    for (a, ta), (b, tb) in zip(points, points[1:], strict=False):
        if concurrency <= b:
            return ta + (tb - ta) * (concurrency - a) / (b - a)
    return points[-1][1]


def _reach(levels: Sequence[Level], value: float) -> float:
    """The concurrency where the fitted curve first reaches ``value`` (linear between levels)."""
    prev_c, prev_t = 0.0, 0.0
    for lv in levels:
        if lv.fitted >= value:
            if lv.fitted == prev_t:
                return float(lv.concurrency)
            return prev_c + (lv.concurrency - prev_c) * (value - prev_t) / (lv.fitted - prev_t)
        prev_c, prev_t = float(lv.concurrency), lv.fitted
    return float(levels[-1].concurrency)


def _fitted_at(levels: Sequence[Level], concurrency: float) -> float:
    value = expected_at([(float(lv.concurrency), lv.fitted) for lv in levels], concurrency)
    return 0.0 if value is None else value


def _median(values: Sequence[float | None]) -> float | None:
    seen = sorted(v for v in values if v is not None and math.isfinite(v))
    return seen[len(seen) // 2] if seen else None


def _count(minutes: float) -> str:
    """``1,440`` / ``2.5``: whole minutes as integers, fractions (a finer grain) to one decimal."""
    return f"{minutes:,.1f}".removesuffix(".0")


def _hours(hours: float) -> str:
    return f"{max(hours, 0.1):.1f}".removesuffix(".0")
