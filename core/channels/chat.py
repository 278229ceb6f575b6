"""A chat incoming webhook ([alerts.chat]): Slack's and Mattermost's ``{"text": …}``, the alert
text only, one message a group. Its URL is its credential (``hooks.slack.com/services/T/B/XXXX``):
shown to its origin, masked in ``config --json``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from core.channels.base import Stored, http_problems, origin_only, slack_escape


class Chat:
    name = "chat"
    secrets: tuple[str, ...] = ("url",)

    def problems(self, table: Any, key: str) -> Iterator[str]:
        yield from http_problems(table, key)

    def endpoint(self, table: Any) -> str:
        return str(table.url)

    def shown(self, table: Any) -> str:
        return origin_only(self.endpoint(table))

    def body(self, item: Stored, table: Any, dashboard_url: str, now: float) -> Any:
        return {"text": slack_escape(item.body_text)}


CHANNEL = Chat()
