"""A chat incoming webhook ([alerts.chat]): Slack's and Mattermost's ``{"text": …}``, the alert
text only, one message a group. Its URL is its credential (``hooks.slack.com/services/T/B/XXXX``):
shown to its origin, masked in ``config --json`` (:class:`~core.channels.base.Posting`)."""

from __future__ import annotations

from typing import Any

from core.channels.base import Posting, Stored, slack_escape


class Chat(Posting):
    name = "chat"

    def body(self, item: Stored, table: Any, dashboard_url: str, now: float) -> Any:
        return {"text": slack_escape(item.body_text)}


CHANNEL = Chat()
