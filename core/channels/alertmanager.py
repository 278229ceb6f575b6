"""Alertmanager: alerts POSTed to its v2 API as Prometheus sends them ([alerts.alertmanager])."""

from __future__ import annotations

from typing import Any

from core.channels.base import Posting, Stored, prometheus_alert, valid_for
from core.redact import masked

API_PATH = "/api/v2/alerts"


class Alertmanager(Posting):
    name = "alertmanager"  # its URL is masked as a webhook's by config --json (a proxy's path may be a token)

    def endpoint(self, table: Any) -> str:
        return str(table.url).rstrip("/") + API_PATH

    def shown(self, table: Any) -> str:
        """Alertmanager's API URL, without a password."""
        return masked(self.endpoint(table))

    def body(self, item: Stored, table: Any, dashboard_url: str, now: float) -> Any:
        """The list of alerts Prometheus would POST."""
        return [prometheus_alert(a, valid_for(table), now) for a in item.alerts]


CHANNEL = Alertmanager()
