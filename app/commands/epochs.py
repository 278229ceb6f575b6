"""``python -m app epochs TARGET``: when the target's configuration changed or its process restarted, and
the sweet-spot figures before against after each change (db/epochs.py, app/epochs.py)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

from app.commands.sweep import _duration  # the same rule: a duration longer than 0
from app.epochs import comparisons
from core.durations import format_duration
from core.errors import UsageError
from core.settings import Settings
from core.text import terminal

HELP = "when a target's configuration changed or it restarted, and its figures before against after each change"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="TARGET", help="the target's name")
    parser.add_argument("--since", metavar="DURATION", help="only epochs that began within DURATION (default: all)")
    parser.add_argument("--window", metavar="DURATION", default="1h",
                        help="each side of a comparison at most this long (default 1h)")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="one JSON array: each epoch with its comparison")
    parser.add_argument("--db", metavar="URL", help="database URL (overrides db_url / SWEETSPOT_DB_URL)")


def execute(args: argparse.Namespace, settings: Settings) -> int:
    from db.queries import Reader

    reader, now = Reader(settings.db_url), time.time()
    window_s = _duration(args.window, "--window")
    if args.target not in {t.name for t in reader.targets()}:
        raise UsageError(f"no target {args.target!r} in the database", "`python -m app status --all` lists them")
    epochs = reader.epochs(args.target)
    compared = {c.epoch.ts: c for c in comparisons(reader, args.target, epochs, window_s, now)}
    since = now - _duration(args.since, "--since") if args.since else None
    shown = [e for e in epochs if since is None or e.ts >= since]
    if args.json:
        print(json.dumps([{**dataclasses.asdict(e), "text": e.text(),
                           "comparison": dataclasses.asdict(compared[e.ts]) if e.ts in compared else None}
                          for e in shown], indent=2))  # fmt: skip
        return 0
    if not shown:
        print(f"{args.target}: no configuration seen yet (the collector stores one from its first round)")
    for epoch in shown:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch.ts))
        print(terminal(f"{when}  {epoch.kind:<14} {epoch.text()}"))
        if epoch.ts in compared:
            print(terminal(f"    {compared[epoch.ts].text()} ({format_duration(window_s)} at most each side)"))
    if shown:
        latest = shown[-1].config
        print(terminal("now: " + ", ".join(f"{k}={v}" for k, v in sorted(latest.items()))))
    return 0
