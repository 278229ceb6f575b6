"""A generic JSON webhook ([alerts.webhook]): Alertmanager's own webhook body (version 4) with a
Slack-compatible ``text``."""

from __future__ import annotations

from typing import Any

from core.channels.base import Posting, Stored, prometheus_alert, slack_escape, valid_for

RESOLVED = "resolved"  # a stored alert's state once it resolved (app.alerts.model.RESOLVED)


class Webhook(Posting):
    name = "webhook"

    def body(self, item: Stored, table: Any, dashboard_url: str, now: float) -> Any:
        alerts = [prometheus_alert(a, valid_for(table), now) for a in item.alerts]
        for a, stored in zip(alerts, item.alerts, strict=True):
            a["status"] = "resolved" if stored["state"] == RESOLVED else "firing"
        common = {k: v for k, v in alerts[0]["labels"].items() if all(a["labels"].get(k) == v for a in alerts)} if alerts else {}
        grouped = {k: v for k, v in common.items() if k in table.group_by or k == "alertname" and "rule" in table.group_by}
        return {
            "version": "4", "receiver": "sweetspot", "groupKey": item.group_key,
            "status": "firing" if item.kind == "firing" else "resolved", "truncatedAlerts": 0,
            "groupLabels": grouped, "commonLabels": common, "commonAnnotations": {}, "externalURL": dashboard_url,
            "alerts": alerts, "text": slack_escape(item.body_text),
        }  # fmt: skip


CHANNEL = Webhook()
