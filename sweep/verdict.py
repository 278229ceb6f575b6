"""The verdict of a sweep: the sweet-spot concurrency and the gateway limit to set.

The sweet spot is the one knee rule's (core/knee.py ``sweet_spot_of``, DOMAIN.md §3), the same
function the learner, imported benchmarks, the planner and the Operating point page call:

1. Knee: where the next doubling of concurrency stops buying +25 % output tok/s on the
   non-decreasing fit of the levels (8 → 16 +48 %, 16 → 32 +15 %: the gain crosses +25 % at 13.6),
   the knee being the highest swept level between it and the middle of that doubling (√2 × 13.6 =
   19.2: 16); the doubled concurrency is read linearly between the two swept levels around it.
2. SLO limit: the highest level whose TTFT P95 (the client's, per request) is within ``ttft_slo_s``,
   over at least ``min_requests`` requests, with at most ``max_error_rate`` of them failed.
3. Sweet spot = the highest swept level at or under both. With no knee inside the sweep, the knee is
   at least the lowest level whose double was not swept, and the reason says to sweep higher.
4. Gateway limit = the sweet spot: the gateway keeps that many requests in flight and queues the
   rest, which holds TTFT P95 under the SLO (the report's production fix).

What is printed, stored with the run (its ``recommendation``) and shown by every surface is this one
number: app/sweet_spot.py reads ``sweet_spot_concurrency`` back from the stored run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.knee import MAX_ERROR_RATE, MIN_GAIN, MIN_REQUESTS, MeasuredLevel, SweetSpot, sweet_spot_of
from db.results import SweepLevel


def sample_caution(levels: Sequence[SweepLevel], min_requests: int = MIN_REQUESTS) -> str:
    """A caution when the verdict rests on few requests ("" when every level has enough), naming the
    levels and their counts: a P95 of fewer than 20 requests is their slowest one."""
    few = [lv for lv in sorted(levels, key=lambda lv: lv.concurrency) if lv.requests < min_requests]
    if not few:
        return ""
    named = ", ".join(f"{lv.concurrency} ({lv.requests} request{'s' if lv.requests != 1 else ''})" for lv in few)
    what = "the level" if len(few) == 1 else "levels"
    return (f"Caution, few requests: {what} {named} rest{'s' if len(few) == 1 else ''} on fewer than {min_requests} "
            "measured requests, whose TTFT P95 is the slowest of them: too few to prove the SLO, so they cannot be the "
            "sweet spot. Sweep again with a longer --duration")


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


def measured_levels(levels: Sequence[SweepLevel]) -> list[MeasuredLevel]:
    """The sweep's levels as the one rule reads them: per-request TTFT P95, requests, error rate,
    each weighing its requests in the curve's fit."""
    return [MeasuredLevel(lv.concurrency, lv.tokens_per_s, lv.ttft_p95_s, requests=lv.requests,
                          error_rate=lv.error_rate, weight=max(float(lv.requests), 1.0))
            for lv in levels]  # fmt: skip


def recommend(
    levels: Sequence[SweepLevel],
    ttft_slo_s: float,
    min_gain: float = MIN_GAIN,
    max_error_rate: float = MAX_ERROR_RATE,
    min_requests: int = MIN_REQUESTS,
) -> dict[str, Any]:
    """The recommendation dict stored with the run and written to the JSON file (module docstring)."""
    ordered = sorted(levels, key=lambda lv: lv.concurrency)
    found = sweet_spot_of(measured_levels(ordered), ttft_slo_s, min_gain, max_error_rate, min_requests)
    caution = sample_caution(ordered, min_requests)
    return {
        "sweet_spot_concurrency": found.sweet_spot,
        "gateway_limit": found.sweet_spot,
        "knee_concurrency": found.knee,
        "knee_at_least": found.knee_at_least,
        "slo_max_concurrency": found.slo_limit,
        "bound_by": found.bound_by,
        "ttft_slo_s": ttft_slo_s,
        "knee_min_gain": min_gain,
        "max_error_rate": max_error_rate,
        "min_requests": min_requests,
        "steps": steps(ordered),
        "doublings": [{"from": d.concurrency, "to": 2 * d.concurrency, "tokens_per_s": round(d.tokens_per_s, 3),
                       "doubled_tokens_per_s": round(d.doubled_tokens_per_s, 3), "gain_pct": round(100 * d.gain, 1)}
                      for d in found.doublings],  # fmt: skip
        "reason": _reason(found, ordered) + _with(caution),
        "caution": caution or None,
    }


def _with(caution: str) -> str:
    return f" {caution}." if caution else ""


def _reason(found: SweetSpot, ordered: Sequence[SweepLevel]) -> str:
    """The one rule's reason, with what to do about it: the gateway limit to set, or where to sweep."""
    if found.sweet_spot is not None:
        # The knob to set (a gateway's limit or vLLM's --max-num-seqs) is named by the headline, which
        # knows whether the target has a gateway (sweep/report.py format_verdict); the reason does not.
        return f"{found.reason.removesuffix('.')}: hold in-flight requests at {found.sweet_spot}."
    lowest = ordered[0].concurrency if ordered else 0
    return f"{found.reason} Sweep concurrencies below {lowest}, or longer (--duration) where requests were few."
