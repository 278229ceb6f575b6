"""The records of the alert lifecycle, shared by the evaluator, the CLI, the UI and e-mail delivery.

States follow Prometheus alerting rules and Grafana's alert states (docs/alerts.md):
``inactive → pending → firing → resolved``, plus ``no_data`` and ``error``, which are never OK and
never resolve a firing alert on their own. Times are unix seconds; ``model`` is "" for an alert
about the whole target.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from db.verdicts import NO_DATA  # one word for "cannot be judged": an alert's state and a minute's verdict

INACTIVE = "inactive"
PENDING = "pending"
FIRING = "firing"
RESOLVED = "resolved"
ERROR = "error"
STATES = (INACTIVE, PENDING, FIRING, RESOLVED, NO_DATA, ERROR)

WARNING = "warning"
CRITICAL = "critical"
SEVERITIES = (WARNING, CRITICAL)


@dataclass(frozen=True)
class AlertState:
    """The stored state of one (rule, target, model): one row of ``alert_states``."""

    rule: str
    target: str
    model: str
    state: str
    severity: str
    last_change_at: int
    last_eval_at: int
    pending_since: int | None = None
    firing_since: int | None = None
    cleared_since: int | None = None
    resolved_at: int | None = None
    value: float | None = None
    threshold: float | None = None
    summary: str = ""
    recommendation: str = ""
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Transition:
    """One change of state, with the value that caused it: one row of ``alert_transitions``."""

    rule: str
    target: str
    model: str
    from_state: str
    to_state: str
    at: int
    severity: str
    value: float | None = None
    threshold: float | None = None
    summary: str = ""
    recommendation: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    id: int | None = None


@dataclass(frozen=True)
class Silence:
    """Holds back notifications of matching alerts between ``starts_at`` and ``ends_at``.

    ``matchers`` maps any of ``rule``, ``target``, ``model``, ``severity`` to an exact value; an
    alert matches when every matcher equals its field. A silenced alert still changes state.
    """

    matchers: dict[str, str]
    starts_at: int
    ends_at: int
    author: str
    comment: str
    created_at: int
    expired_at: int | None = None
    id: int | None = None

    def active(self, now: float) -> bool:
        end = self.ends_at if self.expired_at is None else min(self.ends_at, self.expired_at)
        return self.starts_at <= now < end

    def matches(self, rule: str, target: str, model: str, severity: str) -> bool:
        fields = {"rule": rule, "target": target, "model": model, "severity": severity}
        return all(fields.get(k) == v for k, v in self.matchers.items())
