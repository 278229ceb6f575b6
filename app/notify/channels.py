"""The notification channels beside e-mail (an Alertmanager, a webhook) and where each one goes, as
stored, logged and shown: what the grouping, the HTTP sender and the status line share."""

from __future__ import annotations

import httpx

from collectors.fetch import masked
from core.settings import AlertsSettings, WebhookSettings

ALERTMANAGER, WEBHOOK = "alertmanager", "webhook"
API_PATH = "/api/v2/alerts"


def prefix(channel: str) -> str:
    """What starts the group keys of ``channel`` (e-mail's keys have no prefix)."""
    return f"{channel}: "


def endpoint(channel: str, settings: WebhookSettings) -> str:
    """The URL POSTed to: Alertmanager's v2 alerts API under its base URL, a webhook's URL as given."""
    return settings.url.rstrip("/") + API_PATH if channel == ALERTMANAGER else settings.url


def shown(channel: str, settings: WebhookSettings) -> str:
    """Where notifications go, as stored, logged and shown: a webhook's path often is its secret (a
    Slack incoming webhook's is), so only its origin is shown; Alertmanager's API URL, without a password."""
    url = masked(endpoint(channel, settings))
    if channel == ALERTMANAGER:
        return url
    parts = httpx.URL(url)
    return f"{parts.scheme}://{parts.netloc.decode()}" + ("/…" if parts.path not in ("", "/") else "")


def destinations(alerts: AlertsSettings) -> list[str]:
    """``alertmanager http://…`` and ``webhook https://host/…`` for the channels that are on."""
    hooks = ((ALERTMANAGER, alerts.alertmanager), (WEBHOOK, alerts.webhook))
    return [f"{channel} {shown(channel, settings)}" for channel, settings in hooks if settings.enabled]
