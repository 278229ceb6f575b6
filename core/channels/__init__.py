"""The notification channels: one module each, one line each in :data:`CHANNELS` (docs/alerts.md).

Everything that handles channels loops over this tuple: the notifier (app/notify), the loader's
checks and the limits (core/settings, core/limits.py), ``config``'s masking, ``status``'s delivery
line and the docs. A new channel is its module here, its line below, its table in
:class:`core.settings.AlertsSettings` and its test.
"""

from __future__ import annotations

from core.channels import alertmanager, chat, email, webhook
from core.channels.base import Channel, HttpChannel

CHANNELS: tuple[Channel, ...] = (
    email.CHANNEL,
    alertmanager.CHANNEL,
    webhook.CHANNEL,
    chat.CHANNEL,
)
HTTP_CHANNELS: tuple[HttpChannel, ...] = tuple(c for c in CHANNELS if isinstance(c, HttpChannel))

__all__ = ["CHANNELS", "HTTP_CHANNELS", "Channel", "HttpChannel"]
