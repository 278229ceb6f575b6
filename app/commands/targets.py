"""``python -m app targets [drop NAME --keep-history|--delete-history]``: the stored targets and whether
the collector still reads each, and dropping one it no longer reads (db/retire.py)."""

from __future__ import annotations

import argparse
import time

from app.formatting import clock
from core.errors import UsageError
from core.redact import masked
from core.settings import Settings
from core.text import terminal, visible

HELP = "list the stored targets (configured, or not any more), or drop one the collector no longer reads"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=("list", "drop"), default="list", help="list (default) or drop")
    parser.add_argument("name", nargs="?", metavar="NAME", help="the target to drop")
    history = parser.add_mutually_exclusive_group()
    history.add_argument("--keep-history", action="store_true",
                         help="drop: out of every list (Fleet, digest, status, the sidebar); its rows stay for queries")
    history.add_argument("--delete-history", action="store_true", help="drop: delete the target and every row of it")  # fmt: skip
    parser.add_argument("--db", metavar="URL", help="database URL (overrides db_url / SWEETSPOT_DB_URL)")


def execute(args: argparse.Namespace, settings: Settings) -> int:
    from db.queries import Reader

    infos = {t.name: t for t in Reader(settings.db_url).targets()}
    if args.action == "list":
        for listed in infos.values():
            print(terminal(f"{visible(listed.name, 60):30} {_state(listed.retired_at, listed.discovered_by)}"))
        return 0
    if not args.name:
        raise UsageError("targets drop: name the target", "python -m app targets drop NAME --keep-history")
    if not (args.keep_history or args.delete_history):  # asked, never assumed: a deletion cannot be undone
        raise UsageError(f"targets drop {args.name}: say what becomes of its history",
                         "add --keep-history (out of every list, its rows kept for queries) or --delete-history "
                         "(the target and every row of it deleted)")  # fmt: skip
    info = infos.get(args.name)
    if info is None:
        raise UsageError(f"no target {args.name!r} listed in {masked(settings.db_url)} (listed: {', '.join(infos) or 'none'})",
                         "`python -m app targets` lists them")  # fmt: skip
    if info.retired_at is None:
        raise UsageError(f"target {args.name!r} is still read by the collector ({_state(None, info.discovered_by)})",
                         "remove it from the collector's configuration and restart the collector first; it then reads "
                         "\"not configured any more\" and can be dropped")  # fmt: skip
    return _drop(settings, args.name, args.keep_history)


def _drop(settings: Settings, name: str, keep: bool) -> int:
    from db.engine import open_engine
    from db.retire import drop

    engine = open_engine(settings.db_url)
    try:
        with engine.begin() as conn:
            done = drop(conn, name, time.time(), keep)
    finally:
        engine.dispose()
    if done.kept:
        print(terminal(f"dropped {visible(name, 60)} from every list; its history is kept (the query views still have it)"))
    else:
        rows = ", ".join(f"{n} from {table}" for table, n in done.rows.items())
        print(terminal(f"deleted {visible(name, 60)} and its history: {rows}"))
    return 0


def _state(retired_at: float | None, discovered_by: str | None) -> str:
    if retired_at is not None:
        return f"not configured any more (since {clock(retired_at)}): droppable"
    return f"found by the Prometheus source {visible(discovered_by, 60)}" if discovered_by else "configured"
