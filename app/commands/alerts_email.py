"""The e-mail side of ``python -m app alerts``: ``test-email`` and ``history --notifications``.

Plain functions the ``alerts`` command calls (app/commands/alerts.py); each prints and returns the
exit status.
"""

from __future__ import annotations

import json
import time

from app.formatting import clock
from core.errors import UsageError
from core.settings import Settings
from db.notifications import NotificationEntry


def test_email(settings: Settings) -> int:
    """Send one test message to every recipient; print the server's answer, or raise a MailError
    (one line naming the setting to fix, printed by the CLI's edge)."""
    from app.notify import message, smtp
    from app.notify.grouping import all_recipients

    email = settings.alerts.email
    if not email.enabled:
        raise UsageError("e-mail is off: no SMTP server configured", "Set SWEETSPOT_SMTP_HOST (alerts.email.host), docs/configuration.md")
    to = all_recipients(email)
    where = f"{email.host}:{email.effective_port}"
    with smtp.connect(email, settings.smtp_password) as session:
        answer = smtp.send(session, message.trial_message(email.from_address, to, time.time()), where)
    print(f"sent a test message to {', '.join(to)} through {where} ({email.tls}); the server answered: {answer}")
    return 0


def print_notifications(settings: Settings, since_s: float, as_json: bool) -> int:
    """The notification log of the last ``since_s`` seconds, newest first."""
    from db.queries import Reader

    entries = Reader(settings.db_url).notifications(time.time() - since_s)
    if as_json:
        keys = ("id", "created_at", "kind", "status", "group_key", "subject", "recipients", "attempts",
                "last_error", "sent_at", "answer", "next_attempt_at")  # fmt: skip
        print(json.dumps([{k: getattr(e, k) for k in keys} for e in entries], indent=2))
        return 0
    if not entries:
        print("no notification in this period")
    for e in entries:
        print(f"{clock(e.created_at)}  {e.status:<10} {e.kind:<8} {e.subject}")
        print(f"    to {', '.join(e.recipients) or '-'}; {describe(e)}")
    return 0


def describe(e: NotificationEntry) -> str:
    """What became of one notification: sent (after how many attempts), retrying, failed, held back."""
    if e.status == "sent":
        retried = f" after {e.attempts} attempts" if e.attempts > 1 else ""
        return f"sent {clock(e.sent_at)}{retried}: {e.answer}"
    if e.status == "queued":
        tried = f"{e.attempts} attempt(s) failed, last: {e.last_error}; " if e.attempts else ""
        return f"{tried}next attempt {clock(e.next_attempt_at)}"
    if e.status == "failed":
        return f"given up after {e.attempts} attempts: {e.last_error}"
    return "held back by a silence or mute window; not sent"
