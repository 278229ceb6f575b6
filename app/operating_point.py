"""Where the knee of a throughput curve is, and why: pure arithmetic over (concurrency, tok/s, TTFT P95) levels.

Used by the Operating point page (reference curve or the latest stored load sweep). The rule is the
report's reasoning (DOMAIN.md §2): doubling concurrency should buy a real throughput gain; where the
next step gains less than ``min_gain`` while latency keeps rising, more concurrency only queues work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from app.formatting import number
from db.results import SweepRun, TargetInfo

# The reference deployment of DOMAIN.md §2: (concurrency, output tok/s, TTFT P95 s or None).
REFERENCE_LEVELS: tuple[tuple[int, float, float | None], ...] = ((8, 85.0, 1.5), (16, 126.0, None), (32, 145.0, 4.8))


@dataclass(frozen=True)
class Knee:
    """The knee concurrency and the figures that put it there (one sentence each)."""

    concurrency: int
    reasons: tuple[str, ...]


def find_knee(
    levels: Sequence[tuple[int, float | None, float | None]], slo_s: float, min_gain: float = 0.25
) -> Knee | None:
    """The last level before throughput gains fall under ``min_gain``, stepped back while its TTFT P95 > SLO.

    Levels without tok/s are skipped; fewer than two usable levels give None.
    """
    usable = sorted((c, t, ttft) for c, t, ttft in levels if t is not None and t > 0)
    if len(usable) < 2:
        return None
    reasons: list[str] = []
    knee_index = len(usable) - 1
    for i in range(len(usable) - 1):
        (c0, t0, _), (c1, t1, _) = usable[i], usable[i + 1]
        gain = t1 / t0 - 1
        reasons.append(f"{c0}→{c1}: {gain * 100:+.0f} % tok/s ({number(t0)} → {number(t1)})")
        if gain < min_gain:
            knee_index = i
            reasons[-1] += " only"
            break
    while knee_index > 0 and (ttft := usable[knee_index][2]) is not None and ttft > slo_s:
        knee_index -= 1
    reasons.extend(_latency_notes(usable, knee_index, slo_s))
    return Knee(usable[knee_index][0], tuple(reasons))


def _latency_notes(usable: Sequence[tuple[int, float, float | None]], knee_index: int, slo_s: float) -> list[str]:
    # The first level past the knee that breaks the SLO: the latency price of going further.
    for c, _, ttft in usable[knee_index + 1 :]:
        if ttft is not None and ttft > slo_s:
            return [f"TTFT P95 {number(ttft)} s at {c} > {number(slo_s)} s SLO"]
    return []


def server(url: str | None) -> str:
    """``scheme://host:port`` of ``url``: what tells two URLs of one server apart from another's."""
    parts = urlsplit(url or "")
    return f"{parts.scheme}://{parts.netloc}"


def sweeps_of(info: TargetInfo | None, sweeps: Sequence[SweepRun]) -> tuple[list[SweepRun], list[SweepRun]]:
    """``sweeps`` split into those that measured ``info``'s server and the others.

    A run stored with its target belongs to that target; an older one (no target) to the target
    whose ``vllm_url`` has the run's scheme, host and port.
    """
    mine: list[SweepRun] = []
    others: list[SweepRun] = []
    for run in sweeps:
        ours = info is not None and (
            run.target == info.name or (run.target is None and server(run.url) == server(info.vllm_url))
        )
        (mine if ours else others).append(run)
    return mine, others
