"""A target's own throughput curve and its sweet spot, learned from its traffic (pure: no I/O, no clock).

The input is one sample per stored step (a minute in production; a finer grain when the learner
settings ask for it, each sample then weighing its share of a minute): the running requests
(average), the output tok/s, and the clients' TTFT of that step (app/sweet_spot.py reads the
engine's histogram with the gateway's wait added). Samples are grouped by running concurrency rounded
to a whole request (idle ones, under :data:`IDLE_RUNNING`, left out), and the groups are handed to
the one knee rule (core/knee.py ``sweet_spot_of``), as a sweep's levels are: the same levels give
the same knee whichever source measured them.

No judgement from inside a bucket: a level's TTFT is judged against the SLO from the shares of its
requests at the histogram's bounds either side of the SLO, summed over the level's minutes
(core/histogram_slo.py ``judge_shares``): "within" only where the bounds prove it, "outside" only
where they prove that, else "cannot tell" with the bucket, which never makes a level the sweet spot.
Where a step has no such shares (a test's synthetic samples, an engine without TTFT buckets) its
median TTFT P95 is compared as it is.

The learner refuses to guess, and says what it lacks, when the minutes are too few (it speaks from
a quarter of the ``[learner]`` minimum, saying its confidence is low until the whole minimum), the
concurrency levels too few, or the curve has not reached its knee within the concurrencies seen
(traffic that never went past the knee cannot show it): :attr:`Learned.knee` is then None and
:attr:`Learned.reason` says how much more traffic, at which load, it needs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from core.histogram_slo import QuantileJudgement, judge_shares
from core.knee import MeasuredLevel, SweetSpot, crossing_clause, monotone_fit, sweet_spot_of

IDLE_RUNNING = 0.5  # a minute under half a running request decoded (almost) nothing
MIN_MINUTES = 120  # busy minutes the learner needs before it says anything
MIN_LEVELS = 4  # distinct concurrency levels, each of MIN_LEVEL_MINUTES at least
MIN_LEVEL_MINUTES = 3
TRIM = 0.05  # share of the busy minutes, at the highest concurrencies, left out of the fit
# The learner speaks from this share of its minimum busy minutes, its confidence said low until the whole.
START_SHARE = 0.25


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
    slo: StepSlo | None = None  # the step's requests against the SLO, from the histogram's bounds


@dataclass(frozen=True)
class StepSlo:
    """One step's TTFT requests against the SLO from the histogram: ``requests`` counted, the shares
    (0-1) at or under the bound below the SLO and the bound above it (equal where exact), and the
    bucket ``(lower, upper)`` in seconds between them."""

    requests: float
    share_lower: float
    share_upper: float
    bucket: tuple[float, float]


@dataclass(frozen=True)
class Level:
    """The minutes at one concurrency: their mean tok/s, the fitted (monotone) tok/s, the median TTFT P95."""

    concurrency: int
    tokens_per_s: float
    fitted: float
    minutes: float
    ttft_p95_s: float | None
    judgement: QuantileJudgement | None = None  # its requests' TTFT against the SLO, from the buckets


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
    found: SweetSpot | None = None  # what the one knee rule found over its levels
    learned_at: float | None = None  # unix seconds it was learned (set where it is stored or read)

    @property
    def curve(self) -> tuple[tuple[float, float], ...]:
        """(concurrency, fitted tok/s) of every level: the own curve the under-delivery rule reads."""
        return tuple((float(lv.concurrency), lv.fitted) for lv in self.levels)

    @property
    def rests_on(self) -> str:
        """``1,440 minutes at 12 concurrency levels``."""
        return f"{_count(self.minutes)} minutes at {len(self.levels)} concurrency levels"


def levels_of(samples: Iterable[Sample], slo_s: float | None = None) -> list[Level]:
    """Busy minutes grouped by whole running requests, with the monotone fit of their tok/s and (with
    ``slo_s``) their requests' TTFT judged against it from the buckets."""
    groups: dict[int, list[Sample]] = {}
    for s in samples:
        if s.running >= IDLE_RUNNING and math.isfinite(s.running) and math.isfinite(s.tokens_per_s) and s.minutes > 0:
            groups.setdefault(round(s.running), []).append(s)
    keys = sorted(groups)
    weights = [sum(s.minutes for s in groups[c]) for c in keys]
    means = [sum(s.tokens_per_s * s.minutes for s in groups[c]) / w for c, w in zip(keys, weights, strict=True)]
    fitted = monotone_fit(means, weights)
    return [Level(c, m, f, w, _median([s.ttft_p95_s for s in groups[c]]), _judged(groups[c], slo_s))
            for c, m, f, w in zip(keys, means, fitted, weights, strict=True)]  # fmt: skip


def _judged(samples: Sequence[Sample], slo_s: float | None) -> QuantileJudgement | None:
    """The level's requests against the SLO: each step's counts at its bounds, summed. A step's bounds
    may differ (the clients' threshold is the SLO less that step's gateway wait), and the sums still
    bound the share within the SLO from below and above; the bucket named is the busiest step's."""
    steps = [s.slo for s in samples if s.slo is not None and s.slo.requests > 0]
    if slo_s is None or not steps:
        return None
    total = sum(st.requests for st in steps)
    lower = sum(st.share_lower * st.requests for st in steps) / total
    upper = sum(st.share_upper * st.requests for st in steps) / total
    return judge_shares(lower, upper, max(steps, key=lambda st: st.requests).bucket, slo_s, total)


def learn(samples: Iterable[Sample], slo_s: float | None, limits: Limits = PRODUCTION) -> Learned:
    """The sweet spot of the curve the samples draw by the one knee rule, or a refusal saying what
    more traffic is needed (module docstring)."""
    all_levels = levels_of(samples, slo_s)
    minutes = sum(lv.minutes for lv in all_levels)
    levels = tuple(lv for lv in _trimmed(all_levels) if lv.minutes >= limits.min_level_minutes)
    start = limits.min_minutes * START_SHARE
    if minutes < start:
        more = (limits.min_minutes - minutes) / 60
        return Learned(None, levels, minutes, None, f"{_count(minutes)} busy minutes, it needs {_count(start)} to "
                       f"start and {_count(limits.min_minutes)} to be confident: {_hours(more)} more hours of traffic",
                       more)  # fmt: skip
    if len(levels) < limits.min_levels:
        more = (limits.min_levels - len(levels)) * limits.min_level_minutes / 60
        return Learned(None, levels, minutes, None, f"{len(levels)} concurrency levels, it needs {limits.min_levels}: "
                       f"{_hours(more)} more hours at other loads", more)  # fmt: skip
    levels = _refit(levels)
    found = sweet_spot_of([_measured(lv) for lv in levels], slo_s)
    plateau = levels[-1].fitted
    if found.knee is None:
        top = levels[-1].concurrency
        more = limits.min_minutes / 60
        return Learned(None, levels, minutes, plateau, f"the curve has not reached its knee up to concurrency {top} "
                       f"(doubling still buys at least +25 % tok/s up to {found.knee_at_least}): {_hours(more)} more "
                       f"hours at concurrency above {top}", more, found)  # fmt: skip
    if found.sweet_spot is None:
        return Learned(None, levels, minutes, plateau, f"no concurrency seen passes the {slo_s:g} s SLO at or under "
                       f"the knee {found.knee}: {_slo_clause(found)}", None, found)  # fmt: skip
    reason = f"the knee of its own curve at {found.knee} ({_knee_clause(found)})"
    if found.sweet_spot < found.knee:
        reason += f", capped at {found.sweet_spot}: {_slo_clause(found)}"
    if minutes < limits.min_minutes:
        reason += (f"; low confidence: {_count(minutes)} of the {_count(limits.min_minutes)} busy minutes it wants "
                   "(the number may move as traffic comes)")  # fmt: skip
    return Learned(found.sweet_spot, levels, minutes, plateau, reason, None, found)


def _measured(level: Level) -> MeasuredLevel:
    """A level as the one rule reads it: its requests counted where the buckets counted them."""
    requests = level.judgement.requests if level.judgement is not None else None
    return MeasuredLevel(level.concurrency, level.tokens_per_s, level.ttft_p95_s, level.judgement, requests,
                         weight=level.minutes)  # fmt: skip


def _knee_clause(found: SweetSpot) -> str:
    """``doubling stops buying +25 % tok/s at 11.8 (11→22 +28 % …, 12→24 +24 % …), its doubling's middle 16.7``."""
    return f"{crossing_clause(found)}, its doubling's middle {found.knee_at or 0.0:.3g}"


def _slo_clause(found: SweetSpot) -> str:
    """The first level above the sweet spot that fails the SLO test, with its figures."""
    above = found.sweet_spot or 0
    failing = next((t for t in found.slo if t.concurrency > above and not t.passes), None)
    return "no level passes" if failing is None else f"{failing.detail} at {failing.concurrency}"


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
    """tok/s the curve gives at ``concurrency``: between two points linear in log(concurrency),
    through the origin below the first, flat past the last (its plateau). None for an empty curve.

    Log, not linear: a serving curve is concave (throughput saturates toward the knee), and a
    straight chord between two measured levels lies under it. Between the report's 8 and 16 the
    chord gave 105.5 tok/s at 12 where the engine delivers ~114, so a GPU 25 % slower read as 81 %
    of its curve and the under-delivering rule (then < 80 %) never fired; the log chord gives 109
    (docs/scenarios.md, `gpus_slow_near`)."""
    points = sorted(curve)
    if not points or concurrency < 0:
        return None
    c0, t0 = points[0]
    if concurrency <= c0:
        return t0 * concurrency / c0 if c0 > 0 else t0
    for (a, ta), (b, tb) in zip(points, points[1:], strict=False):
        if concurrency <= b:
            share = math.log(concurrency / a) / math.log(b / a) if a > 0 else (concurrency - a) / (b - a)
            return ta + (tb - ta) * share
    return points[-1][1]


def _median(values: Sequence[float | None]) -> float | None:
    seen = sorted(v for v in values if v is not None and math.isfinite(v))
    return seen[len(seen) // 2] if seen else None


def _count(minutes: float) -> str:
    """``1,440`` / ``2.5``: whole minutes as integers, fractions (a finer grain) to one decimal."""
    return f"{minutes:,.1f}".removesuffix(".0")


def _hours(hours: float) -> str:
    return f"{max(hours, 0.1):.1f}".removesuffix(".0")
