"""The check of the ``[alerts]`` settings, run by the settings loader: a bad rule or mute window stops
the command with one line naming its key (ConfigError), before anything starts."""

from __future__ import annotations

from core.settings import Settings


def check_alerts(settings: Settings) -> None:
    from app.alerts.figures import NAMES
    from app.alerts.rules import check_rules
    from app.alerts.silences import check_mute_windows
    from core.settings import ConfigError

    if settings.alerts.evaluate_every_s <= 0:
        raise ConfigError("alerts.evaluate_every_s: must be greater than 0")
    if settings.alerts.lease_s <= settings.alerts.evaluate_every_s:
        raise ConfigError("alerts.lease_s: must be longer than alerts.evaluate_every_s (the holder renews it each run)")
    check_rules(settings, NAMES)
    check_mute_windows(settings.alerts.mute_windows)
