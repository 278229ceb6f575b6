"""The records of the alert lifecycle, shared by the evaluator, the CLI, the UI and e-mail delivery.

They live in db/alerts.py, below the query facade, so that ``Reader.alert_board`` can return them;
the judge's modules and the pages name them from here. States follow Prometheus alerting rules and
Grafana's alert states (docs/alerts.md).
"""

from __future__ import annotations

from db.alerts import (
    CRITICAL,
    ERROR,
    FIRING,
    INACTIVE,
    PENDING,
    RESOLVED,
    SEVERITIES,
    STATES,
    WARNING,
    AlertBoard,
    AlertState,
    Silence,
    Transition,
)
from db.verdicts import NO_DATA  # one word for "cannot be judged": an alert's state and a minute's verdict

__all__ = ["CRITICAL", "ERROR", "FIRING", "INACTIVE", "NO_DATA", "PENDING", "RESOLVED", "SEVERITIES", "STATES", "WARNING",
           "AlertBoard", "AlertState", "Silence", "Transition"]  # fmt: skip
