"""The check of the ``[alerts]`` settings, run by the settings loader: a bad rule or mute window stops
the command with one line naming its key (ConfigError), before anything starts."""

from __future__ import annotations

from core.settings import Settings


def check_alerts(settings: Settings) -> None:
    from app.alerts.names import NAMES
    from app.alerts.rules import check_rules
    from app.alerts.silences import check_mute_windows

    # evaluate_every_s and lease_s are judged with every other limit (core.limits)
    check_rules(settings, NAMES)
    check_mute_windows(settings.alerts.mute_windows)
