"""The channels as the notifier holds them (core/channels declares them): which are on, the group
keys that keep each one's groups apart, and where each one goes, as stored, logged and shown."""

from __future__ import annotations

from core.channels import CHANNELS, HTTP_CHANNELS, Channel, HttpChannel
from core.channels.base import DeliveryTable
from core.settings import AlertsSettings, WebhookSettings

EMAIL = CHANNELS[0]  # the first channel: its group keys have no prefix (they were stored before the others)


def table(channel: Channel, alerts: AlertsSettings) -> DeliveryTable:
    """``[alerts.<name>]`` of ``channel``."""
    found: DeliveryTable = getattr(alerts, channel.name)
    return found


def hook_table(channel: HttpChannel, alerts: AlertsSettings) -> WebhookSettings:
    found: WebhookSettings = getattr(alerts, channel.name)
    return found


def on(alerts: AlertsSettings) -> list[str]:
    """The names of the channels that are on, in the tuple's order (``email``, ``alertmanager``, …)."""
    return [c.name for c in CHANNELS if table(c, alerts).enabled]


def hooks_on(alerts: AlertsSettings) -> list[tuple[HttpChannel, WebhookSettings]]:
    """The POSTing channels that are on, with their tables."""
    return [(c, hook_table(c, alerts)) for c in HTTP_CHANNELS if hook_table(c, alerts).enabled]


def prefix(channel: Channel) -> str:
    """What starts the group keys of ``channel`` (e-mail's keys have no prefix)."""
    return "" if channel is EMAIL else f"{channel.name}: "


def destinations(alerts: AlertsSettings) -> list[str]:
    """``alertmanager http://…`` and ``webhook https://host/…`` for the POSTing channels that are on."""
    return [f"{channel.name} {channel.shown(settings)}" for channel, settings in hooks_on(alerts)]
