"""What to notify now: Alertmanager's grouping and timing over the stored alert states. Pure.

Each alert goes to the recipients of the first route that matches it (else ``alerts.email.to``);
alerts with the same recipients and the same ``group_by`` values form a group, one e-mail each.
A group's log (:class:`GroupLog`, Alertmanager's nflog) holds which alerts it last notified as
firing. Per group:

- a new group (nothing notified as firing) waits ``group_wait`` from its first alert's firing time,
  so alerts that fire together arrive in one e-mail (``target_down`` waits for nothing: see
  :func:`wait_of`);
- afterwards a change (an alert newly firing, or one resolved) is notified ``group_interval`` after
  the previous e-mail at the earliest; with no change, alerts still firing are repeated every
  ``repeat_interval``;
- a resolved alert is notified once (``send_resolved``), in the group's next e-mail; when nothing
  is left firing the e-mail is a ``[RESOLVED]`` notice and the group ends;
- a muted alert (silence or mute window) is left out of every e-mail; it is logged once as held
  back, and notified when it still fires after the silence ends. One that resolves while muted
  sends nothing (it is logged as suppressed).

``no_data`` and ``error`` never resolve a firing alert: such an alert keeps its place in the log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from app.alerts.model import FIRING, INACTIVE, PENDING, RESOLVED, AlertState
from app.alerts.rules import DATA_RULES
from app.notify.channels import destinations, on
from app.notify.outbox import GroupLog, alert_key
from core.durations import format_duration
from core.settings import AlertsSettings, DeliverySettings, EmailSettings
from db.delivery import StoredDelivery

Muted = Callable[[AlertState, float], bool]
Grouper = Callable[[AlertState], tuple[str, str, tuple[str, ...]]]  # state → (group key, label, recipients)
_ENDED = (RESOLVED, INACTIVE, PENDING)  # no longer firing; no_data and error are not an end


@dataclass(frozen=True)
class Due:
    """One e-mail to send now: the group's firing alerts (muted ones left out) and newly resolved ones."""

    group_key: str
    label: str  # the group_by values, e.g. "prod-70b"
    recipients: tuple[str, ...]
    firing: tuple[AlertState, ...]
    resolved: tuple[AlertState, ...]

    @property
    def kind(self) -> str:
        return "firing" if self.firing else "resolved"


@dataclass(frozen=True)
class Held:
    """Alerts held back by a silence or mute window (logged once, never sent)."""

    group_key: str
    label: str
    recipients: tuple[str, ...]
    alerts: tuple[AlertState, ...]
    resolved: bool  # True: they resolved while muted, so nothing will be sent for them


@dataclass
class Plan:
    due: list[Due] = field(default_factory=list)
    held: list[Held] = field(default_factory=list)
    groups: list[GroupLog] = field(default_factory=list)  # logs to write (changed ones only)


def recipients(state: AlertState, email: EmailSettings) -> tuple[str, ...]:
    for route in email.routes:
        if route.severity in ("", state.severity) and route.target in ("", state.target):
            return tuple(route.to)
    return tuple(email.to)


def all_recipients(email: EmailSettings) -> list[str]:
    return sorted({*email.to, *(r for route in email.routes for r in route.to)})


def delivery_line(email: EmailSettings, alerts: AlertsSettings | None = None) -> str:
    """One line for ``status`` and the Alerts page: where alert e-mails go, or that they are off, and
    where else notifications go (``alerts``: its Alertmanager and webhook, when on)."""
    others = destinations(alerts) if alerts is not None else []
    also = f"; also to {', '.join(others)}" if others else ""
    if not email.enabled and others:
        return f"e-mail off{also.replace('; also to', ': notifications go to')}"
    if not email.enabled:
        return "e-mail off: alerts are evaluated and stored but not sent (set SWEETSPOT_SMTP_HOST, docs/configuration.md)"
    return f"e-mail on: {email.host}:{email.effective_port} ({email.tls}) to {', '.join(all_recipients(email))}{also}"


def delivery_channels(alerts: AlertsSettings) -> list[str]:
    """The channels this process would send through: ``email``, ``alertmanager``, ``webhook``, … (those on)."""
    return on(alerts)


def collector_delivery(stored: StoredDelivery | None, alerts: AlertsSettings, now: float) -> tuple[str, bool]:
    """``(line, sending)``: where the collector's notifications go, as the collector stored it
    (db/delivery.py), never what this process's own settings say: ``status`` or the UI started in
    another shell or container has other ones. ``sending``: a live collector sends through a channel.
    With nothing stored (no collector evaluated here yet), this process's settings, said to be so."""
    if stored is None:
        own = delivery_line(alerts.email, alerts)
        return (f"no collector has evaluated alerts on this database yet: nothing is sent. With this process's "
                f"settings it would be: {own}"), False  # fmt: skip
    if stored.live:
        return f"{stored.line} (the collector {stored.holder}, {_age(now - stored.written_at)})", bool(stored.channels)
    return (f"{stored.line}: as the collector {stored.holder} stored it {_age(now - stored.written_at)}; no collector "
            "holds the evaluator's lease now, so nothing is evaluated or sent (is `python -m app collect` running?)"), False


def _age(seconds: float) -> str:
    return "just now" if seconds < 1 else f"{format_duration(round(seconds))} ago"


def group_of(state: AlertState, email: EmailSettings) -> tuple[str, str, tuple[str, ...]]:
    """``(group key, label, recipients)``; the key names the group_by values and the recipients."""
    return grouped(state, email.group_by, recipients(state, email))


def grouped(state: AlertState, group_by: Iterable[str], to: tuple[str, ...], prefix: str = "") -> tuple[str, str, tuple[str, ...]]:
    """``(group key, label, recipients)`` of ``state`` grouped by ``group_by``; ``prefix`` keeps the
    keys of each channel apart (e-mail's have none: they are the keys stored before the others)."""
    values = [(key, str(getattr(state, key)) or "-") for key in group_by]
    label = " ".join(v for _, v in values) or "all"
    key = prefix + " ".join(f"{k}={v}" for k, v in values) + " to " + ",".join(to)
    return key, label, to


def plan(states: Iterable[AlertState], logs: dict[str, GroupLog], email: DeliverySettings, muted: Muted, now: float,
         group: Grouper | None = None) -> Plan:  # fmt: skip
    """Decide, for every group with something firing or logged, what to send now and what to log.
    ``email`` gives the timing; ``group`` the grouping (default: e-mail's routes and ``group_by``);
    ``logs`` are the group logs of this channel only."""
    members: dict[str, list[AlertState]] = {}
    labels: dict[str, tuple[str, tuple[str, ...]]] = {}
    by = group or (lambda s: group_of(s, email))  # type: ignore[arg-type]
    for state in states:
        key, label, to = by(state)
        log = logs.get(key) or GroupLog(key, to)
        if state.state == FIRING or alert_key(state) in log.firing or alert_key(state) in log.held:
            members.setdefault(key, []).append(state)
            labels[key] = (label, to)
    out = Plan()
    for key in sorted(set(members) | set(logs)):
        log = logs.get(key) or GroupLog(key, labels[key][1])
        label, to = labels.get(key, (key.split(" to ")[0], log.recipients))
        _plan_group(out, log, label, to, members.get(key, []), email, muted, now)
    return out


def _plan_group(out: Plan, log: GroupLog, label: str, to: tuple[str, ...], states: list[AlertState],
                email: DeliverySettings, muted: Muted, now: float) -> None:  # fmt: skip
    by_key = {alert_key(s): s for s in states}
    quiet = {k for k, s in by_key.items() if muted(s, now)}
    firing = [s for k, s in by_key.items() if s.state == FIRING and k not in quiet]
    new = [s for s in firing if log.firing.get(alert_key(s)) != s.firing_since]
    # logged as firing and ended since (a row that vanished counts as ended: its rule was removed)
    ended = {k for k in log.firing if k not in by_key or by_key[k].state in _ENDED}
    resolved = [by_key[k] for k in sorted(ended) if k in by_key and k not in quiet] if email.send_resolved else []
    announce = {alert_key(s) for s in resolved}
    # ended alerts that will never be notified (muted, or resolved notices off) leave the log now
    notified = {k: v for k, v in log.firing.items() if k not in ended or k in announce}
    held = {k: int(s.firing_since or 0) for k, s in by_key.items() if s.state == FIRING and k in quiet}
    newly_held = [by_key[k] for k, since in held.items() if since not in (log.held.get(k), log.firing.get(k))]
    if newly_held:
        out.held.append(Held(log.group_key, label, to, tuple(newly_held), resolved=False))
    # told as firing, or held back, and resolved while muted: nothing will ever be sent for them
    held_ended = {k for k in log.held if k in by_key and by_key[k].state in _ENDED}
    ended_quiet = [by_key[k] for k in sorted(ended | held_ended) if k in quiet]
    if ended_quiet:
        out.held.append(Held(log.group_key, label, to, tuple(ended_quiet), resolved=True))
    last = log.last_notified_at
    at = _due_at(log, new, resolved, firing, email)
    if at is not None and now >= at:
        out.due.append(Due(log.group_key, label, to, tuple(firing), tuple(resolved)))
        # what the group has been told is firing: this e-mail's alerts, and the muted ones told before
        notified = {k: v for k, v in log.firing.items() if k in quiet and k not in ended}
        notified.update({alert_key(s): int(s.firing_since or 0) for s in firing})
        last = int(now)
    updated = replace(log, recipients=to, firing=notified, held=held, last_notified_at=last)
    if updated != log:
        out.groups.append(updated)


def wait_of(state: AlertState, email: DeliverySettings) -> float:
    """How long a new group waits for ``state``: ``group_wait``, except for an alert of a rule that
    watches the data (``target_down``): while it holds every other rule of its target reads no data,
    so there is nothing to gather, and waiting would only delay the one e-mail that says the engine is
    gone (docs/alerts.md#down-means-mailed-within-30-s)."""
    return 0.0 if state.rule in DATA_RULES else email.group_wait_s


def _due_at(log: GroupLog, new: list[AlertState], resolved: list[AlertState],
            firing: list[AlertState], email: DeliverySettings) -> float | None:  # fmt: skip
    """When the group's next e-mail is due, or None when there is nothing to send."""
    if not log.firing or log.last_notified_at is None:  # a new group (or one all of whose alerts ended)
        if not new:
            return None
        return min(int(s.firing_since or 0) + wait_of(s, email) for s in new)
    if new or resolved:
        return log.last_notified_at + email.group_interval_s
    if firing:
        return log.last_notified_at + email.repeat_interval_s
    return None
