"""Alert states written straight into alert_states, as the evaluator stores them, for the notifier tests."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from sqlalchemy import Engine, delete, insert

from app.alerts.model import FIRING, AlertState
from core.settings import EmailSettings, Settings
from db import schema

T0 = 1_764_000_000


def state(rule: str = "preemptions", target: str = "prod-70b", status: str = FIRING, since: int = T0, **kw: Any) -> AlertState:
    values: dict[str, Any] = {
        "rule": rule, "target": target, "model": "", "state": status, "severity": "critical",
        "last_change_at": since, "last_eval_at": since, "pending_since": since, "firing_since": since if status == FIRING else None,
        "value": 12.0, "threshold": 0.0, "summary": f"{rule} over 5m 12 > 0",
        "recommendation": "lower --max-num-seqs", "labels": {},
    }  # fmt: skip
    values.update(kw)
    return AlertState(**values)


def write_states(engine: Engine, *states: AlertState) -> None:
    """Replace the stored states by ``states`` (a rule, target, model each)."""
    with engine.begin() as conn:
        conn.execute(delete(schema.alert_states))
        for s in states:
            row = dataclasses.asdict(s)
            row["labels"] = json.dumps(row["labels"])
            conn.execute(insert(schema.alert_states).values(**row))


def email_settings(port: int, **kw: Any) -> Settings:
    email = EmailSettings(host="127.0.0.1", port=port, tls="none", from_address="sweetspot@example.test",
                          to=("ops@example.test",), dashboard_url="http://dash.example.test:8501", **kw)  # fmt: skip
    return dataclasses.replace(Settings(), alerts=dataclasses.replace(Settings().alerts, email=email))
