"""``python -m app config``: check a settings file, or list every setting with its default."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from core.channels import CHANNELS
from core.redact import masked, masked_path
from core.settings import ENVIRONMENT_VARIABLES, Settings, iter_settings

HELP = "check the settings file (one line; --json prints the effective settings, --describe every setting)"
# Fields printed as *** when set: the secrets of the settings table (passwords, bearer tokens).
SECRETS = frozenset(key.rsplit(".", 1)[-1] for key, kind, _, _ in iter_settings() if kind == "secret")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--describe", action="store_true", help="list every setting, its type, default and meaning")
    parser.add_argument("--json", action="store_true", help="print the effective settings as JSON")


def execute(args: argparse.Namespace, settings: Settings) -> int:
    if args.describe:
        for key, kind, default, help_text in iter_settings():
            print(f"{key:40} {kind:14} default {default!r:28} {help_text}")
        for name, help_text in ENVIRONMENT_VARIABLES.items():
            print(f"${name:39} {'environment':14} {'':36} {help_text}")
        return 0
    if args.json:
        print(json.dumps(shown(with_hook_paths_hidden(dataclasses.asdict(settings))), indent=2, default=str))
    else:
        print(f"settings OK: {len(settings.targets)} target(s), database {masked(settings.db_url)} "
              "(--json prints every effective setting)")
    return 0


def with_hook_paths_hidden(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (settings as ``asdict`` gives them) with every channel's secret fields masked, as the
    channel declares them (core/channels): a URL down to its origin (a Slack-style webhook's path is
    the credential: https://hooks.slack.com/services/T/B/XXXX), any other value as ``***``."""
    alerts = dict(data.get("alerts") or {})
    for channel in CHANNELS:
        table = alerts.get(channel.name)
        if isinstance(table, dict):
            alerts[channel.name] = {**table, **{name: _secret_shown(table.get(name)) for name in channel.secrets}}
    return {**data, "alerts": alerts}


def _secret_shown(value: Any) -> str:
    text = str(value or "")
    return masked_path(text) if "://" in text else "***" if text else ""


def shown(value: Any, name: str = "") -> Any:
    """``value`` (settings as ``asdict`` gives them) as printed: secrets and header values as ``***``
    (a header may carry a credential), the password of any URL's userinfo masked."""
    if name in SECRETS:
        return "***" if value else ""
    if name == "headers":
        return dict.fromkeys(value, "***")
    if isinstance(value, dict):
        # HttpSettings.given is the loader's bookkeeping, not a setting
        return {key: shown(item, key) for key, item in value.items() if key != "given"}
    if isinstance(value, list | tuple):
        return [shown(item) for item in value]
    return masked(value) if isinstance(value, str) else value
