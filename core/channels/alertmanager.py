"""Alertmanager: alerts POSTed to its v2 API as Prometheus sends them ([alerts.alertmanager])."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from core.channels.base import Stored, http_problems, prometheus_alert, valid_for
from core.redact import masked

API_PATH = "/api/v2/alerts"


class Alertmanager:
    name = "alertmanager"
    secrets: tuple[str, ...] = ("url",)  # its path may carry a credential too (a proxy's token route): shown to its origin

    def problems(self, table: Any, key: str) -> Iterator[str]:
        yield from http_problems(table, key)

    def endpoint(self, table: Any) -> str:
        return str(table.url).rstrip("/") + API_PATH

    def shown(self, table: Any) -> str:
        """Alertmanager's API URL, without a password."""
        return masked(self.endpoint(table))

    def body(self, item: Stored, table: Any, dashboard_url: str, now: float) -> Any:
        """The list of alerts Prometheus would POST."""
        return [prometheus_alert(a, valid_for(table), now) for a in item.alerts]


CHANNEL = Alertmanager()
