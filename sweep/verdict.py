"""The verdict of a sweep: the sweet-spot concurrency and the gateway limit to set.

Rule (DOMAIN.md §2-3):

1. SLO: the highest level whose TTFT P95 meets the SLO (≤ ``ttft_slo_s``) with an error rate of at
   most ``max_error_rate``. Above it users see the service "hang".
2. Knee: for each step between consecutive levels, the elasticity = relative throughput gain ÷
   relative concurrency gain (8 → 16 is +100 % concurrency; +48 % tok/s gives 0.48). The knee is
   the lower level of the first step whose elasticity falls under ``knee_elasticity`` (default
   0.25: doubling the clients buys less than +25 % tok/s, while latency keeps growing).
3. Sweet spot = the highest level that meets the SLO and is not past the knee: the SLO caps it,
   and going past the knee buys little throughput for a lot of latency. With no knee inside the sweep, the SLO level stands (and the
   reason says to sweep higher). With no level meeting the SLO there is no sweet spot in the range.
4. Gateway limit = the sweet spot: the gateway keeps that many requests in flight and queues the
   rest, which holds TTFT P95 under the SLO (the report's production fix).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from db.results import SweepLevel

KNEE_ELASTICITY = 0.25
MAX_ERROR_RATE = 0.01
# Under 20 requests a level's P95 is its slowest request: one slow request moves the verdict.
MIN_REQUESTS = 20


def sample_caution(levels: Sequence[SweepLevel], min_requests: int = MIN_REQUESTS) -> str:
    """A caution when the verdict rests on few requests ("" when every level has enough), naming the
    levels and their counts: a P95 of fewer than 20 requests is their slowest one."""
    few = [lv for lv in sorted(levels, key=lambda lv: lv.concurrency) if lv.requests < min_requests]
    if not few:
        return ""
    named = ", ".join(f"{lv.concurrency} ({lv.requests} request{'s' if lv.requests != 1 else ''})" for lv in few)
    what = "the level" if len(few) == 1 else "levels"
    return (f"Caution, few requests: {what} {named} rest{'s' if len(few) == 1 else ''} on fewer than {min_requests} "
            "measured requests, whose TTFT P95 is the slowest of them: the sweet spot and gateway limit may move. "
            "Sweep again with a longer --duration")


def steps(levels: Sequence[SweepLevel]) -> list[dict[str, Any]]:
    """Marginal gains between consecutive levels (sorted by concurrency) that both have tok/s > 0."""
    known = [lv for lv in sorted(levels, key=lambda lv: lv.concurrency) if lv.tokens_per_s]
    out = []
    for low, high in zip(known, known[1:], strict=False):
        assert low.tokens_per_s and high.tokens_per_s  # filtered above; for mypy
        gain = high.tokens_per_s / low.tokens_per_s - 1
        out.append(
            {
                "from": low.concurrency,
                "to": high.concurrency,
                "tokens_per_s_gain_pct": round(100 * gain, 1),
                "tokens_per_s_per_added_client": round(
                    (high.tokens_per_s - low.tokens_per_s) / (high.concurrency - low.concurrency), 3
                ),
                "elasticity": round(gain / (high.concurrency / low.concurrency - 1), 3),
            }
        )
    return out


def meets_slo(level: SweepLevel, ttft_slo_s: float, max_error_rate: float = MAX_ERROR_RATE) -> bool:
    """TTFT P95 known and ≤ the SLO, and errors no more than ``max_error_rate`` (0–1) of ended requests."""
    if level.ttft_p95_s is None or level.ttft_p95_s > ttft_slo_s:
        return False
    return level.error_rate is None or level.error_rate <= max_error_rate


def recommend(
    levels: Sequence[SweepLevel],
    ttft_slo_s: float,
    knee_elasticity: float = KNEE_ELASTICITY,
    max_error_rate: float = MAX_ERROR_RATE,
) -> dict[str, Any]:
    """The recommendation dict stored with the run and written to the JSON file (module docstring)."""
    ordered = sorted(levels, key=lambda lv: lv.concurrency)
    passing = [lv.concurrency for lv in ordered if meets_slo(lv, ttft_slo_s, max_error_rate)]
    slo_max = max(passing) if passing else None
    gains = steps(ordered)
    knee = next((s["from"] for s in gains if s["elasticity"] < knee_elasticity), None)
    # The highest level that meets the SLO and is not past the knee (a level can pass above the
    # knee while one below it fails, e.g. on errors: never recommend a failing level).
    sweet = max((c for c in passing if knee is None or c <= knee), default=None)
    return {
        "sweet_spot_concurrency": sweet,
        "gateway_limit": sweet,
        "knee_concurrency": knee,
        "slo_max_concurrency": slo_max,
        "ttft_slo_s": ttft_slo_s,
        "knee_elasticity": knee_elasticity,
        "max_error_rate": max_error_rate,
        "steps": gains,
        "reason": _reason(ordered, ttft_slo_s, slo_max, knee, sweet, gains) + _with(sample_caution(ordered)),
        "caution": sample_caution(ordered) or None,
    }


def _with(caution: str) -> str:
    return f" {caution}." if caution else ""


def _reason(
    ordered: Sequence[SweepLevel],
    slo: float,
    slo_max: int | None,
    knee: int | None,
    sweet: int | None,
    gains: list[dict[str, Any]],
) -> str:
    parts = [_slo_sentence(ordered, slo, slo_max), _knee_sentence(gains, knee)]
    if sweet is None:
        lowest = ordered[0].concurrency if ordered else 0
        parts.append(f"No sweet spot in this range: sweep concurrencies below {lowest}")
    else:
        why = _bound(ordered, slo_max, knee)
        parts.append(
            f"Sweet spot {sweet} (bound by {why}): set the gateway limit to {sweet} in-flight requests"
            " and let extra requests queue at the gateway"
        )
    return ". ".join(parts) + "."


def _bound(ordered: Sequence[SweepLevel], slo_max: int | None, knee: int | None) -> str:
    """What limits the sweet spot, for the reason text."""
    if knee is not None and knee < (slo_max or 0):
        return "the knee"
    if knee is None and slo_max == ordered[-1].concurrency:
        return "the highest level swept"
    return "the TTFT SLO"


def _slo_sentence(ordered: Sequence[SweepLevel], slo: float, slo_max: int | None) -> str:
    failing = [lv for lv in ordered if slo_max is None or lv.concurrency > slo_max]
    text = (
        f"TTFT P95 meets {slo:g} s up to concurrency {slo_max}" if slo_max else f"No level meets TTFT P95 ≤ {slo:g} s"
    )
    if failing:
        first = failing[0]
        shown = "no data" if first.ttft_p95_s is None else f"{first.ttft_p95_s:.2f} s"
        errors = f", errors {100 * first.error_rate:.1f} %" if first.error_rate else ""
        text += f" ({first.concurrency}: TTFT P95 {shown}{errors})"
    return text


def _knee_sentence(gains: list[dict[str, Any]], knee: int | None) -> str:
    if not gains:
        return "No knee measured (fewer than two levels with throughput)"
    described = ", ".join(f"{s['from']}→{s['to']} {s['tokens_per_s_gain_pct']:+.0f} % tok/s" for s in gains)
    if knee is None:
        return f"Throughput still grows ({described}): no knee within the sweep, sweep higher to find it"
    return f"Throughput {described}: the knee is at {knee}"
