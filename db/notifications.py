"""Reading the notification log (the e-mail outbox and its attempts) for the CLI and the Alerts page."""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqlalchemy import Connection, select

from db import schema


@dataclass(frozen=True)
class NotificationEntry:
    """One notification as the log shows it; times are unix seconds, ``last_error`` None when none."""

    id: int
    created_at: float
    kind: str  # firing, resolved, digest
    status: str  # queued, sent, failed, suppressed
    group_key: str
    subject: str
    recipients: tuple[str, ...]
    attempts: int
    last_error: str | None
    sent_at: float | None
    answer: str | None
    next_attempt_at: float | None  # queued ones only


def notification_log(conn: Connection, since: float, limit: int = 200) -> list[NotificationEntry]:
    """Notifications created at or after ``since``, newest first (at most ``limit``)."""
    n = schema.notifications
    query = (
        select(n.c.id, n.c.created_at, n.c.kind, n.c.status, n.c.group_key, n.c.subject, n.c.recipients, n.c.attempts,
               n.c.last_error, n.c.sent_at, n.c.answer, n.c.due_at)
        .where(n.c.created_at >= since).order_by(n.c.id.desc()).limit(limit)
    )  # fmt: skip
    return [
        NotificationEntry(r.id, r.created_at, r.kind, r.status, r.group_key, r.subject, tuple(json.loads(r.recipients)),
                          r.attempts, r.last_error, r.sent_at, r.answer, r.due_at if r.status == "queued" else None)  # fmt: skip
        for r in conn.execute(query)
    ]
