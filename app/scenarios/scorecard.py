"""The scorecard as printed: one line per scenario, the total line, and the goals (issue 40) each
with its figure and whether it is met. The same text for the product's evaluator and for a rule
file run through promtool (those have no stored verdicts: their accuracy is "—")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.scenarios.library import FAULT
from app.scenarios.score import Score, Total

MEDIAN_DETECT_GOAL_S = 180.0
WORST_DETECT_GOAL_S = 600.0
ACCURACY_GOAL = 0.98


def _s(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value / 60:.1f} min" if value >= 60 else f"{value:.0f} s"


def row(s: Score, with_verdicts: bool = True) -> str:
    caught = "—" if s.caught is None else ("caught" if s.caught else "MISSED")
    verdicts = f"{s.accuracy * 100:5.1f} % of {s.minutes} min" if with_verdicts else "—"
    false = f"{s.false_firings}" + (f" ({', '.join(s.false_rules)})" if s.false_rules else "")
    return (f"{s.name:28} {s.kind:7} {caught:7} {s.right_clause or '—':18} detect {_s(s.detect_s):>8}  "
            f"resolve {_s(s.resolve_s):>8}  false {false:24} verdicts {verdicts}")  # fmt: skip


@dataclass(frozen=True)
class Goal:
    text: str
    figure: str
    met: bool


def goals(t: Total, with_verdicts: bool = True) -> list[Goal]:
    out = [
        Goal("every fault caught with the right clause", f"{t.right}/{t.faults}", t.right == t.faults),
        Goal("median time to detect ≤ 3 min", _s(t.median_detect_s),
             t.median_detect_s is not None and t.median_detect_s <= MEDIAN_DETECT_GOAL_S),
        Goal("worst time to detect ≤ 10 min", _s(t.worst_detect_s) + (f" ({t.faults - t.caught} never detected)" if t.caught < t.faults else ""),
             t.worst_detect_s is not None and t.worst_detect_s <= WORST_DETECT_GOAL_S and t.caught == t.faults),
        Goal("0 false firings in healthy time", f"{t.false_in_healthy} over {t.healthy_weeks:.2f} weeks", t.false_in_healthy == 0),
    ]  # fmt: skip
    if with_verdicts:
        out.append(Goal("stored verdicts agree with the truth ≥ 98 % of minutes", f"{t.accuracy * 100:.1f} %",
                        t.accuracy >= ACCURACY_GOAL))
    return out


def lines(title: str, scores: Sequence[Score], t: Total, with_verdicts: bool = True) -> list[str]:
    out = [f"== {title}", *(row(s, with_verdicts) for s in scores)]
    out.append(f"TOTAL: faults caught {t.caught}/{t.faults} (right clause {t.right}); detect median {_s(t.median_detect_s)}, "
               f"worst {_s(t.worst_detect_s)}; false firings {t.false_per_healthy_week:.2f} per healthy week "
               f"({t.false_in_healthy} over {t.healthy_weeks:.2f} weeks)"
               + (f"; verdicts agree {t.accuracy * 100:.1f} % of minutes" if with_verdicts else ""))  # fmt: skip
    out += [f"  {'met ' if g.met else 'MISSED'}  {g.text}: {g.figure}" for g in goals(t, with_verdicts)]
    return out


def faults_only(scores: Sequence[Score]) -> list[Score]:
    return [s for s in scores if s.kind == FAULT]
