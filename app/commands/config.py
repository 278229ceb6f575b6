"""``python -m app config``: check a settings file, or list every setting with its default."""

from __future__ import annotations

import argparse
import dataclasses
import json

from core.settings import ENVIRONMENT_VARIABLES, Settings, iter_settings

HELP = "check the settings file and print the effective settings (or --describe every setting)"


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
    effective = dataclasses.asdict(settings)
    for secret in ("ui_password", "smtp_password"):
        effective[secret] = "***" if effective[secret] else ""
    if args.json:
        print(json.dumps(effective, indent=2, default=str))
    else:
        print(f"settings OK: {len(settings.targets)} target(s), database {settings.db_url}")
    return 0
