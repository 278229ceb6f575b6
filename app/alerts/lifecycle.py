"""The alert lifecycle: one pure step from the stored state and a rule's outcome to the next state.

``inactive → pending → firing → resolved`` as Prometheus alerting rules and Grafana's alert states:
a condition that holds starts the ``for`` timer (pending; a rule with ``for`` 0 fires at once);
a pending alert whose condition clears goes back to inactive (flapping inside ``for`` never fires);
a firing alert whose condition clears stays firing ``keep_firing_for`` and then resolves.
``no_data`` and ``error`` are states of their own: never OK, and a firing alert stays firing
through them (only a cleared condition resolves it). Times are whole unix seconds.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from app.alerts.model import ERROR, FIRING, INACTIVE, NO_DATA, PENDING, RESOLVED, AlertState, Transition
from app.alerts.rules import CANNOT_TELL, CLEAR, HOLDS, Outcome, Rule

if TYPE_CHECKING:
    from app.alerts.down_clock import DownSpell


def new_state(rule: Rule, target: str, model: str, now: int) -> AlertState:
    """The state of an alert never evaluated before."""
    return AlertState(
        rule=rule.name, target=target, model=model, state=INACTIVE, severity=rule.severity,
        last_change_at=now, last_eval_at=now, labels=dict(rule.labels),
    )  # fmt: skip


def advance(prev: AlertState, rule: Rule, out: Outcome, now: int, recommendation: str = "",
            spell: DownSpell | None = None) -> tuple[AlertState, Transition | None]:  # fmt: skip
    """The state after evaluating ``rule`` at ``now`` with outcome ``out``, and the transition if any.
    ``spell``: the condition's own clock (app/alerts/down_clock.py, the target's failed scrapes): the
    ``for`` timer then counts from its ``since`` to its ``at`` instead of from the evaluations."""
    s = dataclasses.replace(prev, last_eval_at=now, severity=rule.severity, labels=dict(rule.labels))
    if out.status in (HOLDS, CLEAR):
        s = dataclasses.replace(s, value=out.value, threshold=out.threshold)
    if out.summary and (out.status in (HOLDS, CLEAR) or prev.state != FIRING):  # a firing alert keeps why it fired
        s = dataclasses.replace(s, summary=out.summary)
    if recommendation:
        s = dataclasses.replace(s, recommendation=recommendation)
    nxt = _next(s, rule, out.status, now, spell)
    if nxt.state == prev.state:
        return nxt, None
    nxt = dataclasses.replace(nxt, last_change_at=now)
    return nxt, transition(prev.state, nxt, now)


def _next(s: AlertState, rule: Rule, status: str, now: int, spell: DownSpell | None = None) -> AlertState:
    if s.state == FIRING:
        return _firing(s, rule, status, now)
    if status == HOLDS:
        since = s.pending_since if s.state == PENDING and s.pending_since is not None else now
        held_s: float = now - since
        if spell is not None:
            since, held_s = int(spell.since), spell.length_s
        if held_s >= rule.for_s:
            return dataclasses.replace(s, state=FIRING, pending_since=since, firing_since=now, cleared_since=None, resolved_at=None)
        return dataclasses.replace(s, state=PENDING, pending_since=since)
    if status == CANNOT_TELL:
        return s  # the buckets prove neither: nothing starts, nothing clears, the pending timer waits
    if status == CLEAR:
        # A resolved alert stays resolved (it says when) until the condition holds again.
        return dataclasses.replace(s, state=RESOLVED if s.state == RESOLVED else INACTIVE, pending_since=None)
    # no_data / error: the pending timer is dropped; the rule cannot be judged, which is not OK.
    return dataclasses.replace(s, state=NO_DATA if status == NO_DATA else ERROR, pending_since=None)


def _firing(s: AlertState, rule: Rule, status: str, now: int) -> AlertState:
    if status == HOLDS:
        return dataclasses.replace(s, cleared_since=None)
    if status != CLEAR:
        return s  # no data or an error never resolves a firing alert on its own
    cleared = s.cleared_since if s.cleared_since is not None else now
    if now - cleared >= rule.keep_firing_for_s:
        return dataclasses.replace(s, state=RESOLVED, resolved_at=now, cleared_since=cleared, pending_since=None)
    return dataclasses.replace(s, cleared_since=cleared)


def transition(from_state: str, s: AlertState, now: int) -> Transition:
    return Transition(
        rule=s.rule, target=s.target, model=s.model, from_state=from_state, to_state=s.state, at=now,
        severity=s.severity, value=s.value, threshold=s.threshold, summary=s.summary,
        recommendation=s.recommendation, labels=dict(s.labels),
    )  # fmt: skip
