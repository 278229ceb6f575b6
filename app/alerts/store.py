"""Stored alert states and transitions: what the evaluator writes and the CLI, UI and e-mail read.

The evaluator (one process, holding the lease) is the only writer of ``alert_states`` and
``alert_transitions``; readers call one function each (db/alerts.py, re-exported here; the
dashboard reads them through ``Reader.alert_board``). Rows are keyed by names (rule, target,
model), not ids, so history stays readable after a target is renamed or dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, and_, bindparam, update

from app.alerts.model import AlertState, Transition
from db import schema
from db.alerts import Key, current, history, load_states

# the stored states' reads, named here for the CLI, the evaluator and e-mail
__all__ = ["Key", "current", "history", "load_states", "save"]

_STATE_FIELDS = tuple(c.name for c in schema.alert_states.columns)


def _state_values(s: AlertState) -> dict[str, Any]:
    values = {name: getattr(s, name) for name in _STATE_FIELDS}
    values["labels"] = json.dumps(dict(s.labels), sort_keys=True)
    return values


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
