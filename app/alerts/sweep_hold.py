"""The load rules held while a stored load sweep loads the target.

A sweep (``python -m app sweep``, docs/sweep.md) drives its target past the knee on purpose: more
requests running than the sweet spot, TTFT past the SLO, the KV cache full. The command stores its
run when it starts, with the planned end of its load (db/sweeps.py); from then until the rule's own
window has passed after that end (the window still holds the sweep's load), each rule marked
``load`` (app/alerts/rules.py) is judged clear, and says why, instead of firing at the operator who
asked for the load. Every other rule (down, not serving, failing requests, under-delivering) judges
as always: a sweep that breaks the engine is still a fault. The minute's stored verdict lists each
held rule in ``not_judged`` with the same words, so the history says why a loaded minute read fine.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.alerts.rules import CANNOT_TELL, CLEAR, HOLDS, Outcome, Rule
from app.formatting import clock
from app.operating_point import server
from db.results import SweepSpan

HELD = "held"  # the first word of a held rule's summary and of its not_judged reason


def sweep_of(spans: Sequence[SweepSpan], target: str, vllm_url: str | None) -> SweepSpan | None:
    """The latest stored sweep of ``target`` among ``spans``: stored with its name, or (an older run,
    stored without a target) with its server's scheme, host and port."""
    mine = [s for s in spans if s.target == target or (s.target is None and vllm_url and server(s.url) == server(vllm_url))]
    return max(mine, key=lambda s: s.started_at, default=None)


def holds(rule: Rule, span: SweepSpan | None, at: float) -> bool:
    """Whether ``span`` holds ``rule`` at ``at``: a load rule, from the sweep's start until its
    window has passed after the sweep's end."""
    return rule.load and span is not None and span.started_at <= at <= span.ends_at + rule.window_s


def why(span: SweepSpan) -> str:
    """``held: load sweep 3 on this target from 00:10 to 00:31 (python -m app sweep)``."""
    return f"{HELD}: load sweep {span.id} on this target from {clock(span.started_at)} to {clock(span.ends_at)} (python -m app sweep)"


def held(out: Outcome, span: SweepSpan) -> Outcome:
    """``out`` judged clear while the sweep loads the target; the figures kept, the summary saying why.
    "Cannot tell" is held too (the sweep's load put the quantile in the SLO's bucket); a rule that could
    not be judged at all (no data, an error) stays so: a hold proves nothing either."""
    if out.status not in (HOLDS, CLEAR, CANNOT_TELL):
        return out
    return Outcome(CLEAR, out.value, out.threshold, f"{why(span)}; {out.summary}" if out.summary else why(span))
