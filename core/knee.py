"""The one knee rule (DOMAIN.md §3): a throughput curve's knee, its SLO limit and the sweet spot.

Every place that finds a sweet spot calls :func:`sweet_spot_of` with its measured levels: a load sweep
(sweep/verdict.py), imported benchmark runs, the learner over a target's own traffic
(core/learner.py), the planner's modelled curve and the Operating point page. Pure: no I/O, no clock.

- **Curve**: output tok/s against running requests, the non-decreasing least-squares fit of the
  measured levels (pool-adjacent violators, each level weighing its ``weight``: requests, minutes).
- **Knee**: the field report's reasoning. 8 → 16 running bought +48 % tok/s, 16 → 32 only +15 %, so
  16: the knee is where the next doubling of concurrency stops buying ``min_gain`` (+25 %) tok/s (by
  Little's law latency then grows more than 1.6× for what it buys). Each measured level ``c`` whose
  double is within the measured range (no extrapolation) is judged: the gain of doubling from it,
  the doubled concurrency read on the fitted curve, linear between the two measured levels around it.
  *Between measured levels*: ``crossing`` is where that gain falls under ``min_gain``, linear in the
  gain between the last judged level above it and the first under it (the first judged level itself
  when it is already under). The report's two sentences place the knee within one doubling: the
  doubling into it paid and the doubling out of it does not, so it lies in [crossing, 2 × crossing).
  ``knee_at`` is the middle of that doubling on the log scale, √2 × crossing, and the **knee** is the
  highest measured level in [crossing, knee_at] (where none lies there, levels a doubling apart, the
  first measured level past the crossing: never one below it, from which doubling still pays). The report's points: the gain is +48 % at 8 and +15 % at 16,
  the crossing 13.6, its middle 19.2, the knee 16. A dense curve measured at every concurrency lands
  the same way (the simulated reference: crossing ≈ 12, middle ≈ 17, knee 16 or 17), where "the first
  level whose doubling buys under +25 %" alone would flip between 12 and 14 with 1 % of noise; on a
  smooth curve tok/s = n ÷ (a + b·n) the crossing is 1.5·a/b and the knee ≈ 2.1·a/b. When no judged
  level's doubling falls under ``min_gain`` there is no knee yet, and ``knee_at_least`` is the lowest
  measured level above the last one judged (the traffic or sweep must go higher to find it).
- **SLO limit**: the highest level whose client-seen TTFT P95 is within the SLO, over at least
  ``min_requests`` requests (where counted), with an error rate of at most ``max_error_rate``. TTFT
  from per-request times (sweeps, benchmark files) is compared directly; TTFT from a histogram
  carries its bucket judgement (core/histogram_slo.py), and "cannot tell" is never "within". A level
  with no TTFT figure at all counts as within while it sits below every level judged outside or
  cannot-tell (TTFT grows with concurrency: nothing measured says it is broken); the reason says so.
- **Sweet spot**: the highest measured level at or under both (the knee, or ``knee_at_least`` while
  the knee is not found) that itself passes the SLO test above. None when no level does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from core.histogram_slo import CANNOT_TELL, OUTSIDE, WITHIN, QuantileJudgement

MIN_GAIN: Final = 0.25  # the next doubling must buy at least +25 % output tok/s
MAX_ERROR_RATE: Final = 0.01
# Under 20 requests a level's P95 is its slowest request: one slow request moves the verdict.
MIN_REQUESTS: Final = 20
NOT_MEASURED: Final = "not measured"
FEW_REQUESTS: Final = "too few requests"
ERRORS: Final = "errors"


@dataclass(frozen=True)
class MeasuredLevel:
    """One measured concurrency level.

    ``concurrency`` running (or in-flight) requests; ``tokens_per_s`` output tok/s (None or ≤ 0: not
    on the curve); ``ttft_p95_s`` the clients' TTFT P95 in seconds from per-request times (None: not
    measured); ``ttft_judgement`` the bucket judgement when the TTFT comes from a histogram (it
    overrides ``ttft_p95_s`` for the SLO test); ``requests`` how many requests it measured (None: not
    counted); ``error_rate`` the share (0-1) of ended requests that failed (None: not known);
    ``weight`` its weight in the curve's fit (requests, minutes; 1 when all weigh alike).
    """

    concurrency: int
    tokens_per_s: float | None
    ttft_p95_s: float | None = None
    ttft_judgement: QuantileJudgement | None = None
    requests: float | None = None
    error_rate: float | None = None
    weight: float = 1.0


@dataclass(frozen=True)
class Doubling:
    """What doubling concurrency from one measured level buys on the fitted curve (tok/s)."""

    concurrency: int
    tokens_per_s: float
    doubled_tokens_per_s: float
    gain: float  # relative: 0.48 is +48 %

    @property
    def text(self) -> str:
        """``8→16 +48 % tok/s (85 → 126)``."""
        return (f"{self.concurrency}→{2 * self.concurrency} {100 * self.gain:+.0f} % tok/s "
                f"({_tps(self.tokens_per_s)} → {_tps(self.doubled_tokens_per_s)})")  # fmt: skip


def _tps(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


@dataclass(frozen=True)
class LevelSlo:
    """A level's SLO test: ``state`` within / outside / cannot tell / not measured / too few requests /
    errors, and ``detail`` the figures that decided it (one clause)."""

    concurrency: int
    state: str
    detail: str

    @property
    def passes(self) -> bool:
        return self.state in (WITHIN, NOT_MEASURED)


@dataclass(frozen=True)
class SweetSpot:
    """What the one rule found over a set of measured levels (see the module docstring).

    ``curve`` is (concurrency, fitted tok/s) of every level on it; ``doublings`` the judged levels in
    order; ``slo`` every level's SLO test. ``bound_by`` names what set the sweet spot: "the knee",
    "the TTFT SLO", "errors", "too few requests", "the highest level measured" (no knee yet), or None.
    ``reason`` is the sentences every surface shows.
    """

    sweet_spot: int | None
    knee: int | None
    knee_at_least: int | None
    slo_limit: int | None
    slo_s: float | None
    curve: tuple[tuple[int, float], ...]
    doublings: tuple[Doubling, ...]
    slo: tuple[LevelSlo, ...] = field(default=())
    bound_by: str | None = None
    reason: str = ""
    crossing: float | None = None  # the concurrency from which doubling first buys under min_gain
    knee_at: float | None = None  # √2 × crossing: the middle of the doubling the knee lies in

    @property
    def knee_found(self) -> bool:
        return self.knee is not None


def sweet_spot_of(
    levels: Sequence[MeasuredLevel],
    slo_s: float | None,
    min_gain: float = MIN_GAIN,
    max_error_rate: float = MAX_ERROR_RATE,
    min_requests: float = MIN_REQUESTS,
) -> SweetSpot:
    """The knee, the SLO limit and the sweet spot of ``levels`` by the one rule (module docstring).

    ``slo_s`` is the TTFT P95 SLO in seconds (None: no SLO, every level's TTFT passes). Levels of the
    same concurrency are not merged: give one per concurrency. Never raises on empty or odd input:
    no usable level gives a SweetSpot of Nones whose reason says so.
    """
    ordered = sorted(levels, key=lambda lv: lv.concurrency)
    curve = fitted_curve(ordered)
    doublings = doublings_of(curve)
    crossing = crossing_of(doublings, min_gain)
    knee_at = None if crossing is None else math.sqrt(2.0) * crossing
    knee = None if crossing is None or knee_at is None else _knee_level(curve, crossing, knee_at)
    at_least = None if knee is not None else _first_unjudged(curve, doublings)
    tests = tuple(_slo_tests(ordered, slo_s, max_error_rate, min_requests))
    passing = [t.concurrency for t in tests if t.passes]
    slo_limit = max(passing, default=None)
    cap = knee if knee is not None else at_least
    sweet = max((c for c in passing if cap is not None and c <= cap), default=None)
    bound = _bound(tests, sweet, knee, at_least)
    result = SweetSpot(sweet, knee, at_least, slo_limit, slo_s, curve, doublings, tests, bound, crossing=crossing,
                       knee_at=knee_at)
    return _with_reason(result, min_gain)


def fitted_curve(levels: Sequence[MeasuredLevel]) -> tuple[tuple[int, float], ...]:
    """(concurrency, fitted tok/s) of the levels with tok/s > 0: their non-decreasing weighted fit."""
    usable = [lv for lv in sorted(levels, key=lambda lv: lv.concurrency)
              if lv.tokens_per_s is not None and math.isfinite(lv.tokens_per_s) and lv.tokens_per_s > 0
              and lv.concurrency > 0]  # fmt: skip
    fitted = monotone_fit([lv.tokens_per_s or 0.0 for lv in usable], [max(lv.weight, 1e-9) for lv in usable])
    return tuple((lv.concurrency, f) for lv, f in zip(usable, fitted, strict=True))


def monotone_fit(values: Sequence[float], weights: Sequence[float]) -> list[float]:
    """The non-decreasing sequence closest to ``values`` in weighted least squares (pool-adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, weight, count]
    for v, w in zip(values, weights, strict=True):
        blocks.append([v, w, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m2, w2, n2), (m1, w1, n1) = blocks.pop(), blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    return [m for m, _, n in blocks for _ in range(int(n))]


def doublings_of(curve: Sequence[tuple[int, float]]) -> tuple[Doubling, ...]:
    """The gain of doubling concurrency from each level whose double lies within the curve's range."""
    if not curve:
        return ()
    top = curve[-1][0]
    out = []
    for c, t in curve:
        if 2 * c > top:
            break
        doubled = _read(curve, 2.0 * c)
        out.append(Doubling(c, t, doubled, doubled / t - 1))
    return tuple(out)


def _knee_level(curve: Sequence[tuple[int, float]], crossing: float, knee_at: float) -> int:
    """The highest measured level in [crossing, √2 × crossing]; where none lies there (levels a
    doubling apart, as 8, 16, 32), the first measured level past the crossing: never one below it,
    from which doubling still pays."""
    between = [c for c, _ in curve if crossing - 1e-9 <= c <= knee_at + 1e-9]
    if between:
        return max(between)
    return min((c for c, _ in curve if c >= crossing - 1e-9), default=curve[-1][0])


def crossing_of(doublings: Sequence[Doubling], min_gain: float = MIN_GAIN) -> float | None:
    """Where the gain of doubling falls under ``min_gain``: linear in the gain between the last judged
    level at or above it and the first under it; the first judged level when it is already under;
    None when no judged level is under (module docstring)."""
    for i, d in enumerate(doublings):
        if d.gain < min_gain:
            if i == 0 or not math.isfinite(doublings[i - 1].gain):
                return float(d.concurrency)
            p = doublings[i - 1]
            return p.concurrency + (d.concurrency - p.concurrency) * (p.gain - min_gain) / (p.gain - d.gain)
    return None


def _read(curve: Sequence[tuple[int, float]], concurrency: float) -> float:
    """The curve at ``concurrency`` within its range, linear between the two levels around it."""
    for (a, ta), (b, tb) in zip(curve, curve[1:], strict=False):
        if a <= concurrency <= b:
            return ta + (tb - ta) * (concurrency - a) / (b - a)
    return curve[-1][1]


def _first_unjudged(curve: Sequence[tuple[int, float]], doublings: Sequence[Doubling]) -> int | None:
    judged = {d.concurrency for d in doublings}
    return next((c for c, _ in curve if c not in judged), None)


def _slo_tests(levels: Sequence[MeasuredLevel], slo_s: float | None, max_error_rate: float,
               min_requests: float) -> list[LevelSlo]:  # fmt: skip
    judged = [(lv, _ttft_state(lv, slo_s)) for lv in levels]
    broken = min((lv.concurrency for lv, (state, _) in judged if state in (OUTSIDE, CANNOT_TELL)), default=math.inf)
    out = []
    for lv, (state, detail) in judged:
        if lv.error_rate is not None and lv.error_rate > max_error_rate:
            state, detail = ERRORS, f"errors {100 * lv.error_rate:.1f} % > {100 * max_error_rate:g} %"
        elif lv.requests is not None and lv.requests < min_requests:
            state, detail = FEW_REQUESTS, f"{lv.requests:,.0f} requests < {min_requests:,.0f}"
        elif state == NOT_MEASURED and lv.concurrency > broken:
            state, detail = CANNOT_TELL, f"TTFT not measured, above {broken:g} where the SLO does not hold"
        out.append(LevelSlo(lv.concurrency, state, detail))
    return out


def _ttft_state(level: MeasuredLevel, slo_s: float | None) -> tuple[str, str]:
    if slo_s is None:
        return NOT_MEASURED, "no TTFT SLO"
    if level.ttft_judgement is not None:
        return level.ttft_judgement.state, f"TTFT P95 {level.ttft_judgement.text}"
    if level.ttft_p95_s is None or not math.isfinite(level.ttft_p95_s):
        return NOT_MEASURED, "TTFT not measured"
    relation = "≤" if level.ttft_p95_s <= slo_s else ">"
    return (WITHIN if relation == "≤" else OUTSIDE), f"TTFT P95 {level.ttft_p95_s:.2f} s {relation} {slo_s:g} s"


def _bound(tests: Sequence[LevelSlo], sweet: int | None, knee: int | None, at_least: int | None) -> str | None:
    """What set the sweet spot: the knee, or the first measured level above it that fails (and how)."""
    if sweet is None:
        return None
    cap = knee if knee is not None else at_least
    blocker = next((t for t in tests if sweet < t.concurrency <= (cap or 0) and not t.passes), None)
    if blocker is None:
        return "the knee" if knee is not None else "the highest level measured"
    return {ERRORS: "errors", FEW_REQUESTS: "too few requests"}.get(blocker.state, "the TTFT SLO")


def _with_reason(found: SweetSpot, min_gain: float) -> SweetSpot:
    return replace(found, reason=" ".join(reason_sentences(found, min_gain)))


def reason_sentences(found: SweetSpot, min_gain: float = MIN_GAIN) -> list[str]:
    """The reason, sentence by sentence: the doublings, the SLO, the sweet spot and what bound it."""
    out = [_knee_sentence(found, min_gain)]
    failing = [t for t in found.slo if not t.passes and (found.sweet_spot is None or t.concurrency > found.sweet_spot)]
    if found.slo_s is not None and failing:
        first = failing[0]
        out.append(f"At {first.concurrency}: {first.detail}.")
    if found.sweet_spot is None:
        out.append("No sweet spot: no measured level passes the SLO test at or under the knee.")
    else:
        out.append(f"Sweet spot {found.sweet_spot} (bound by {found.bound_by}).")
    return out


def _knee_sentence(found: SweetSpot, min_gain: float) -> str:
    if not found.doublings:
        return "No knee measured: no level's double lies within the measured levels."
    if found.knee is None:
        said = ", ".join(d.text for d in found.doublings[-3:])
        return (f"Doubling still buys at least {100 * min_gain:+.0f} % ({said}): no knee within the measured "
                f"levels, at least {found.knee_at_least}; measure higher to find it.")  # fmt: skip
    crossing, knee_at = found.crossing or 0.0, found.knee_at or 0.0
    return (f"Knee {found.knee}: {crossing_clause(found, min_gain)}; the knee lies in the doubling from "
            f"{crossing:.3g} to {2 * crossing:.3g}, and {found.knee} is the highest level measured between "
            f"{crossing:.3g} and its middle, {knee_at:.3g}.")


def crossing_clause(found: SweetSpot, min_gain: float = MIN_GAIN) -> str:
    """``doubling stops buying +25 % tok/s at 13.6 (8→16 +48 % tok/s (85 → 126), 16→32 +15 % …)``:
    the crossing with the judged doublings either side of it."""
    crossing = found.crossing or 0.0
    upto = [d for d in found.doublings if d.concurrency <= crossing][-1:]
    after = [d for d in found.doublings if d.concurrency > crossing][:1]
    said = ", ".join(d.text for d in upto + after) or ", ".join(d.text for d in found.doublings[:1])
    return f"doubling stops buying {100 * min_gain:+.0f} % tok/s at {crossing:.3g} ({said})"
