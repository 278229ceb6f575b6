"""The durable outbox and the per-group notification log, in the database. SQLAlchemy Core only.

A notification is inserted (status ``queued``) in the same transaction that records it in its
group's log; delivery marks it ``sent`` only after the SMTP server accepted it, and every attempt
is kept with the server's answer or the error. Times are unix seconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update

from app.alerts.model import AlertState
from db import schema

QUEUED, SENT, FAILED, SUPPRESSED = "queued", "sent", "failed", "suppressed"
EMAIL = "email"  # the channel of e-mail (and of every row written before there were others)
FIRING_KIND, RESOLVED_KIND, DIGEST_KIND = "firing", "resolved", "digest"
_N, _A, _G = schema.notifications, schema.notification_attempts, schema.notification_groups


def alert_key(state: AlertState) -> str:
    """The identity of one alert across evaluations: ``rule|target|model``."""
    return f"{state.rule}|{state.target}|{state.model}"


@dataclass(frozen=True)
class GroupLog:
    """What a group was last notified of: alert key → firing_since notified as firing, or held back."""

    group_key: str
    recipients: tuple[str, ...]
    firing: dict[str, int] = field(default_factory=dict)
    held: dict[str, int] = field(default_factory=dict)
    last_notified_at: int | None = None
    last_notification_id: int | None = None


@dataclass(frozen=True)
class Outgoing:
    """A notification to record: a message (or, status suppressed, a log line that is never sent)."""

    group_key: str
    kind: str
    recipients: tuple[str, ...]
    subject: str
    body_text: str
    body_html: str
    images: dict[str, str] = field(default_factory=dict)  # content id → base64 PNG
    alerts: tuple[dict[str, Any], ...] = ()
    status: str = QUEUED
    channel: str = EMAIL


@dataclass(frozen=True)
class Notification:
    """One stored row of the outbox."""

    id: int
    group_key: str
    kind: str
    status: str
    recipients: tuple[str, ...]
    subject: str
    body_text: str
    body_html: str
    images: dict[str, str]
    alerts: tuple[dict[str, Any], ...]
    created_at: int
    due_at: int
    attempts: int
    last_error: str | None
    sent_at: int | None
    answer: str | None
    channel: str = EMAIL


def read_groups(conn: Connection) -> dict[str, GroupLog]:
    out = {}
    for row in conn.execute(select(_G)).mappings():
        out[row["group_key"]] = GroupLog(
            row["group_key"], tuple(json.loads(row["recipients"])), json.loads(row["firing"]),
            json.loads(row["held"]), row["last_notified_at"], row["last_notification_id"],
        )  # fmt: skip
    return out


def record(conn: Connection, outgoing: Sequence[Outgoing], groups: Iterable[GroupLog], now: int,
           due_at: int | None = None) -> list[int]:  # fmt: skip
    """Queue ``outgoing`` (due at ``due_at``, default ``now``) and write the groups' logs, in the
    caller's transaction; returns the new ids.

    A group whose log has nothing firing or held any more is deleted: its next alert starts a new
    group (and waits ``group_wait`` again), as in Alertmanager.
    """
    ids = [_insert(conn, item, now, now if due_at is None else due_at) for item in outgoing]
    last_id = {item.group_key: i for item, i in zip(outgoing, ids, strict=True) if item.status == QUEUED}
    for log in groups:
        conn.execute(delete(_G).where(_G.c.group_key == log.group_key))
        if not log.firing and not log.held:
            continue
        conn.execute(insert(_G).values(
            group_key=log.group_key, recipients=json.dumps(list(log.recipients)), firing=json.dumps(log.firing),
            held=json.dumps(log.held), last_notified_at=log.last_notified_at,
            last_notification_id=last_id.get(log.group_key, log.last_notification_id),
        ))  # fmt: skip
    return ids


def _insert(conn: Connection, item: Outgoing, now: int, due_at: int) -> int:
    result = conn.execute(insert(_N).values(
        group_key=item.group_key, kind=item.kind, status=item.status, recipients=json.dumps(list(item.recipients)),
        subject=item.subject, body_text=item.body_text, body_html=item.body_html, images=json.dumps(item.images),
        alerts=json.dumps(list(item.alerts)), created_at=now, due_at=due_at, attempts=0, channel=item.channel,
    ))  # fmt: skip
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


def due(conn: Connection, now: int, limit: int = 20, ids: Sequence[int] | None = None,
        channel: str = EMAIL) -> list[Notification]:  # fmt: skip
    """Queued notifications of ``channel`` whose next attempt is due, oldest first; with ``ids``,
    those of them still queued, due or not."""
    when = _N.c.due_at <= now if ids is None else _N.c.id.in_(ids)
    query = select(_N).where(_N.c.status == QUEUED, _N.c.channel == channel, when).order_by(_N.c.id).limit(limit)
    return [_notification(row) for row in conn.execute(query).mappings()]


def _notification(row: Any) -> Notification:
    values = dict(row)
    values["recipients"] = tuple(json.loads(values["recipients"]))
    values["images"] = json.loads(values["images"])
    values["alerts"] = tuple(json.loads(values["alerts"]))
    return Notification(**values)


def mark_sent(conn: Connection, notification: Notification, now: int, answer: str) -> None:
    conn.execute(
        update(_N).where(_N.c.id == notification.id)
        .values(status=SENT, sent_at=now, answer=answer, attempts=notification.attempts + 1)
    )  # fmt: skip
    conn.execute(insert(_A).values(notification_id=notification.id, at=now, ok=1, answer=answer))


def mark_failed(conn: Connection, notification: Notification, now: int, error: str, retry_at: int | None) -> None:
    """One failed attempt; ``retry_at`` None gives up (status failed)."""
    values: dict[str, Any] = {"attempts": notification.attempts + 1, "last_error": error}
    values.update({"status": FAILED} if retry_at is None else {"due_at": retry_at})
    conn.execute(update(_N).where(_N.c.id == notification.id).values(**values))
    conn.execute(insert(_A).values(notification_id=notification.id, at=now, ok=0, answer=error))


def exists(conn: Connection, group_key: str) -> bool:
    """Whether any notification of ``group_key`` was recorded (a scheduled digest's instant, say)."""
    return conn.execute(select(_N.c.id).where(_N.c.group_key == group_key).limit(1)).first() is not None


def backlog(conn: Connection, channels: Iterable[str] = (EMAIL,)) -> list[tuple[str, int, float | None]]:
    """``(channel, queued, oldest created_at)`` of the queued notifications of each of ``channels``
    and of any other channel that has some (the collector's /metrics)."""
    query = select(_N.c.channel, func.count(), func.min(_N.c.created_at)).where(_N.c.status == QUEUED).group_by(_N.c.channel)
    found = {row[0]: (int(row[1]), float(row[2])) for row in conn.execute(query)}
    return [(channel, *found.get(channel, (0, None))) for channel in sorted({EMAIL, *channels, *found})]
