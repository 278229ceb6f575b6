"""The product's settings loader: core's typed settings, then the checks that need the app layer.

``core.settings`` builds and validates every setting it can judge alone; whether an
``[[alerts.rules]]`` expression names known figures needs the rule set (app.alerts), which the
ground floor must not import. Every entry point (the CLI, the UI process) loads through here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.alerts.checks import check_alerts
from core.settings import Settings, read_settings


def load_settings(
    config_path: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """:func:`core.settings.read_settings`, then the alert rules and mute windows checked (ConfigError)."""
    settings = read_settings(config_path, environ, overrides)
    check_alerts(settings)
    return settings
