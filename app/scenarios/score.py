"""A scenario's run scored against its ground truth, and the library's total line.

Definitions (docs/scenarios.md): an alert *fired* at its transition to ``firing``. A fault is
*caught* when one of its clauses fires (a rule that ``watches`` a clause, its SLO "cannot tell" for
long, counts for that clause) between the fault's start and :data:`LAG_S` after its end
(a rule judges a window that ends then); *time to detect* is that firing's time after the fault's
start; *time to resolve* is how long after the fault's end every alert that fired for it
stopped firing. A *false
firing* is any firing outside every fault (and its lag), after the warm-up. A minute's stored
verdict *agrees* with the truth when it says ``in_sweet_spot`` in a healthy minute and anything
else (outside, no data, cannot tell) in a minute out of the sweet spot: a minute without data is
right only when the verdict is not OK.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from app.alerts.model import FIRING, Transition
from app.alerts.rules import DEFAULT_RULES
from app.scenarios.library import FAULT, WARMUP_S, WEEK_S
from app.scenarios.runner import Run
from db.verdicts import IN_SWEET_SPOT, StoredVerdict

LAG_S = 300.0  # the longest default rule window: a firing this long after a fault's end is still its own
MINUTE_S = 60


@dataclass(frozen=True)
class Score:
    """One scenario's figures (seconds; None where they do not apply)."""

    name: str
    kind: str
    caught: bool | None  # None for a healthy scenario
    right_clause: str  # the clause that fired first ("" when none)
    detect_s: float | None
    resolve_s: float | None  # None: still firing at the scenario's end (or nothing fired)
    false_firings: int
    false_rules: tuple[str, ...]
    minutes: int
    agreeing: int
    weeks: float  # of healthy time (for the false-firing rate)

    @property
    def accuracy(self) -> float:
        return self.agreeing / self.minutes if self.minutes else 1.0


def score(run: Run) -> Score:
    """Score one run against its scenario's truth."""
    sc = run.scenario
    truth = [(run.start + a, run.start + b) for a, b in sc.truth]
    firings = [t for t in run.transitions if t.to_state == FIRING]
    mine = [t for t in firings if any(a <= t.at <= b + LAG_S for a, b in truth)]
    expected = sorted((t for t in mine if clause_of(t.rule) in sc.clauses), key=lambda t: t.at)
    false = [t for t in firings if t not in mine and t.at >= run.start + WARMUP_S]
    detect = expected[0].at - truth[0][0] if expected and truth else None
    resolve = _resolve_s(run, mine, truth[-1][1]) if mine else None
    minutes, agreeing = _agreement(run, truth)
    healthy_s = sc.duration_s - WARMUP_S - sum(b - a for a, b in sc.truth)
    return Score(sc.name, sc.kind, bool(expected) if sc.kind == FAULT else None, expected[0].rule if expected else "",
                 detect, resolve, len(false), tuple(sorted({t.rule for t in false})), minutes, agreeing,
                 healthy_s / WEEK_S)  # fmt: skip


# A rule that alerts about a clause's judgement (its TTFT SLO "cannot tell" for long) counts for that clause.
WATCHES = {rule.name: rule.watches for rule in DEFAULT_RULES if rule.watches}


def clause_of(rule: str) -> str:
    """The contract clause an alert of ``rule`` names: its own name, or the clause it watches."""
    return WATCHES.get(rule, rule)


def _resolve_s(run: Run, mine: Sequence[Transition], fault_end: float) -> float | None:
    """Seconds after ``fault_end`` until every alert that fired for the fault stopped firing (0 when
    all had stopped by then); None when one still fires at the scenario's end."""
    last = fault_end
    for fired in mine:
        ended = next((t.at for t in sorted(run.transitions, key=lambda t: t.at)
                      if t.rule == fired.rule and t.from_state == FIRING and t.at > fired.at), None)  # fmt: skip
        if ended is None:
            return None
        last = max(last, ended)
    return last - fault_end


def _agreement(run: Run, truth: Sequence[tuple[float, float]]) -> tuple[int, int]:
    """(minutes judged after the warm-up, minutes whose stored verdict agrees with the truth)."""
    judged = _judged(run, truth)
    return len(judged), sum(1 for v, out in judged if _agrees(v, out))


def _judged(run: Run, truth: Sequence[tuple[float, float]]) -> list[tuple[StoredVerdict, bool]]:
    """Each stored minute after the warm-up, with whether the truth has it out of the sweet spot."""
    return [(v, any(a <= v.ts < b for a, b in truth)) for v in run.verdicts if v.ts >= run.start + WARMUP_S]


def _agrees(v: StoredVerdict, out: bool) -> bool:
    return (v.state != IN_SWEET_SPOT) if out else (v.state == IN_SWEET_SPOT)


def disagreements(run: Run) -> list[str]:
    """One line per stored minute that disagrees with the truth: its minute after the start, the
    truth, the stored state, the rules that held and the rules not judged (why)."""
    truth = [(run.start + a, run.start + b) for a, b in run.scenario.truth]
    lines = []
    for v, out in _judged(run, truth):
        if not _agrees(v, out):
            why = "; ".join(f"{rule or 'window'}: {reason}" for rule, reason in v.not_judged.items())
            lines.append(f"  minute {(v.ts - run.start) / 60:5.0f}: truth {'out' if out else 'in'}, stored {v.state}"
                         f"{', held ' + ', '.join(sorted(v.held)) if v.held else ''}{', not judged: ' + why if why else ''}")
    return lines


@dataclass(frozen=True)
class Total:
    faults: int
    caught: int
    right: int
    median_detect_s: float | None
    worst_detect_s: float | None
    false_per_healthy_week: float
    false_in_healthy: int
    healthy_weeks: float
    accuracy: float


def total(scores: Sequence[Score]) -> Total:
    faults = [s for s in scores if s.kind == FAULT]
    detects = [s.detect_s for s in faults if s.detect_s is not None]
    healthy = [s for s in scores if s.kind != FAULT]
    weeks = sum(s.weeks for s in healthy)
    false = sum(s.false_firings for s in healthy)
    minutes = sum(s.minutes for s in scores)
    return Total(len(faults), sum(1 for s in faults if s.caught), sum(1 for s in faults if s.right_clause),
                 statistics.median(detects) if detects else None, max(detects) if detects else None,
                 false / weeks if weeks else 0.0, false, weeks,
                 sum(s.agreeing for s in scores) / minutes if minutes else 1.0)  # fmt: skip
