"""The Alerts page's e-mail section: whether e-mail is on, and the notification log (sent, retried,
failed, held back by a silence) of the last day. ``rows`` is pure; ``render`` draws it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st

from app.formatting import clock
from app.notify.grouping import collector_delivery
from app.ui import page
from app.ui.guard import guard

DAY_S = 86400.0
STATUS_ICONS = {"sent": "sent", "queued": "queued", "failed": "FAILED", "suppressed": "held back"}  # words: no emoji font in Debian's Chromium


def rows(entries: Sequence[Any]) -> list[dict[str, str]]:
    """One row per notification, newest first: when, status, kind, subject, to, what became of it."""
    return [
        {
            "created": clock(e.created_at), "status": STATUS_ICONS.get(e.status, e.status), "kind": e.kind,
            "subject": e.subject, "to": ", ".join(e.recipients), "attempts": str(e.attempts), "outcome": _outcome(e),
        }  # fmt: skip
        for e in entries
    ]


def _outcome(e: Any) -> str:
    if e.status == "sent":
        return f"{clock(e.sent_at)}: {e.answer}"
    if e.status == "queued":
        return f"next attempt {clock(e.next_attempt_at)}" + (f"; last error: {e.last_error}" if e.last_error else "")
    if e.status == "failed":
        return f"given up: {e.last_error}"
    return "not sent (silence or mute window)"


def render(ctx: page.Context, now: float) -> None:
    st.subheader("E-mail")
    # what the collector stored (it sends, with its own settings), never this process's settings
    line, sending = collector_delivery(guard("the collector's delivery", ctx.reader.delivery, now), ctx.settings.alerts, now)
    (st.caption if sending else st.info)(line)
    entries = guard("the notification log", ctx.reader.notifications, now - DAY_S)
    if not entries:
        st.caption("No notification in the last 24 hours.")
        return
    st.dataframe(rows(entries), hide_index=True, width="stretch")
