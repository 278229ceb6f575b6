"""Stored alert states and transitions: what the evaluator writes and the CLI, UI and e-mail read.

The evaluator (one process, holding the lease) is the only writer of ``alert_states`` and
``alert_transitions``; readers call one function each. Rows are keyed by names (rule, target,
model), not ids, so history stays readable after a target is renamed or dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, and_, bindparam, select, update

from app.alerts.model import FIRING, PENDING, AlertState, Silence, Transition
from app.alerts.silences import _connection, active_silences, list_silences, silenced_by
from core.settings import MuteWindowSettings
from db import schema

Key = tuple[str, str, str]  # (rule, target, model)
_STATE_FIELDS = tuple(c.name for c in schema.alert_states.columns)


def _state(row: Any) -> AlertState:
    r = dict(row._mapping)
    r["labels"] = json.loads(r["labels"] or "{}")
    r["summary"], r["recommendation"] = r["summary"] or "", r["recommendation"] or ""
    return AlertState(**r)


def _state_values(s: AlertState) -> dict[str, Any]:
    values = {name: getattr(s, name) for name in _STATE_FIELDS}
    values["labels"] = json.dumps(dict(s.labels), sort_keys=True)
    return values


def _transition(row: Any) -> Transition:
    r = dict(row._mapping)
    r["labels"] = json.loads(r["labels"] or "{}")
    r["summary"], r["recommendation"] = r["summary"] or "", r["recommendation"] or ""
    return Transition(**r)


def load_states(engine_or_conn: Engine | Connection, target: str | None = None) -> dict[Key, AlertState]:
    """Every stored state (of one target when named), keyed by (rule, target, model)."""
    t = schema.alert_states
    stmt = select(t) if target is None else select(t).where(t.c.target == target)
    with _connection(engine_or_conn) as conn:
        return {(r.rule, r.target, r.model): _state(r) for r in conn.execute(stmt)}


def current(engine_or_conn: Engine | Connection, target: str | None = None) -> list[AlertState]:
    """Firing and pending alerts (of one target when named), firing and critical first."""
    states = [s for s in load_states(engine_or_conn, target).values() if s.state in (FIRING, PENDING)]
    return sorted(states, key=lambda s: (s.state != FIRING, s.severity != "critical", s.target, s.rule, s.model))


def history(
    engine_or_conn: Engine | Connection, since: float, target: str | None = None, rule: str | None = None
) -> list[Transition]:
    """Transitions at or after ``since``, oldest first."""
    t = schema.alert_transitions
    stmt = select(t).where(t.c.at >= int(since))
    if target is not None:
        stmt = stmt.where(t.c.target == target)
    if rule is not None:
        stmt = stmt.where(t.c.rule == rule)
    with _connection(engine_or_conn) as conn:
        return [_transition(r) for r in conn.execute(stmt.order_by(t.c.at, t.c.id))]


_UPDATE = (
    update(schema.alert_states)
    .where(
        and_(
            schema.alert_states.c.rule == bindparam("k_rule"),
            schema.alert_states.c.target == bindparam("k_target"),
            schema.alert_states.c.model == bindparam("k_model"),
        )
    )
    .values({name: bindparam("v_" + name) for name in _STATE_FIELDS if name not in ("rule", "target", "model")})
)


def save(
    conn: Connection, states: Sequence[AlertState], existing: Iterable[Key], transitions: Sequence[Transition]
) -> None:
    """Write the evaluated states (update the stored keys, insert new ones) and the transitions, in the
    caller's transaction: a crash leaves either the whole evaluation or none of it."""
    stored = set(existing)
    old = [_state_values(s) for s in states if (s.rule, s.target, s.model) in stored]
    new = [_state_values(s) for s in states if (s.rule, s.target, s.model) not in stored]
    if old:
        params = [{"k_" + k: v[k] for k in ("rule", "target", "model")} | {"v_" + k: x for k, x in v.items()} for v in old]
        conn.execute(_UPDATE, params)
    if new:
        conn.execute(schema.alert_states.insert(), new)
    if transitions:
        rows = [
            {
                "rule": t.rule, "target": t.target, "model": t.model, "from_state": t.from_state,
                "to_state": t.to_state, "at": t.at, "value": t.value, "threshold": t.threshold,
                "severity": t.severity, "summary": t.summary, "recommendation": t.recommendation,
                "labels": json.dumps(dict(t.labels), sort_keys=True),
            }
            for t in transitions
        ]  # fmt: skip
        conn.execute(schema.alert_transitions.insert(), rows)


# -- what the pages read (one function each) -----------------------------------------------------------
@dataclass(frozen=True)
class Board:
    """The Alerts page: alerts firing or pending now (with what silences each), recent transitions
    (oldest first) with the state each alert was in before them, and the silences not ended yet."""

    alerts: list[tuple[AlertState, str | None]]
    history: list[Transition]
    silences: list[Silence]
    start: float
    end: float


def board(engine: Engine, now: float, mute_windows: Sequence[MuteWindowSettings], since_s: float = 86400.0) -> Board:
    """Everything the Alerts page shows, in one connection."""
    with engine.connect() as conn:
        silences = active_silences(conn, now)
        alerts = [(s, silenced_by(s, now, silences, mute_windows)) for s in current(conn)]
        return Board(alerts, history(conn, now - since_s), list_silences(conn, now), now - since_s, now)
