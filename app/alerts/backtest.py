"""``alerts backtest``: replay one rule over stored history, to tune a threshold before enabling it.

The history is read as one series whose step is the rule's window (or ``step_s``): each step's
figures stand for the window ending at the step's end, and the lifecycle (``for``,
``keep_firing_for``) runs at that cadence, so times are exact to one step. The queue-growth rule
needs steps of at most a third of ``queue_growth_s`` (pass ``--step 30s``).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.alerts.lifecycle import advance, new_state
from app.alerts.model import FIRING, RESOLVED, Transition
from app.alerts.names import step_window, window_names
from app.alerts.rules import Names, Rule, outcome
from app.sweet_spot import resolve
from core.settings import Settings, effective_sweetspot
from db.queries import Reader

QUEUE_LOOKBACK = 12  # steps of history handed to the queue-growth names


@dataclass(frozen=True)
class Backtest:
    """What the rule would have done: its transitions, and how long it would have fired."""

    rule: Rule
    target: str
    start: float
    end: float
    step_s: float
    evaluations: int
    transitions: tuple[Transition, ...]
    firing_s: float

    @property
    def fired(self) -> int:
        return sum(1 for t in self.transitions if t.to_state == FIRING)


def backtest(reader: Reader, settings: Settings, target: str, rule: Rule, start: float, end: float, step_s: float | None = None) -> Backtest:
    """Replay ``rule`` for ``target`` over [start, end) of stored history."""
    step = float(step_s or rule.window_s)
    points = [p for p in reader.series(target, start, end, step) if p.ts + step <= end]  # complete steps only
    info = next((t for t in reader.targets() if t.name == target), None)
    ceiling = info.ceiling.steps_per_s if info and info.ceiling else None
    sweetspot = effective_sweetspot(settings, target)
    spot = resolve(reader, settings, target, end)  # its own sweet spot and curve, as the evaluator's
    state = new_state(rule, target, "", int(start))
    transitions: list[Transition] = []
    firing_s = 0.0
    for i, p in enumerate(points):
        at = int(p.ts + step)
        names = window_names(step_window(p, target, step, ceiling), sweetspot, points[max(0, i - QUEUE_LOOKBACK) : i + 1], spot)
        before = state.state
        state, change = advance(state, rule, outcome(rule, Names(names, step)), at)
        firing_s += step if before == FIRING and state.state in (FIRING, RESOLVED) else 0.0
        if change is not None:
            transitions.append(change)
    return Backtest(rule, target, start, end, step, len(points), tuple(transitions), firing_s)
