"""The command-line entry point: parse arguments, load settings once, translate errors once."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from app.loader import load_settings
from core.errors import SweetspotError, refusal
from core.settings import ENV_CONFIG
from core.text import LogFormatter, TerminalWriter, escaped

log = logging.getLogger(__name__)

# command name → module under app.commands (documented in docs/commands.md; a test checks it).
COMMANDS: dict[str, str] = {
    "run": "run",
    "collect": "collect",
    "inspect": "inspect",
    "status": "status",
    "sim": "sim",
    "sweep": "sweep",
    "ui": "ui",
    "config": "config",
    "db": "dbadmin",
    "alerts": "alerts",
    "rules": "rules",
    "digest": "digest",
    "query": "query",
    "health": "health",
    "backfill": "backfill",
    "bench": "bench",
    "epochs": "epochs",
    "plan": "plan",
    "targets": "targets",
    "scenarios": "scenarios",
}


def _load(command: str) -> ModuleType:
    return importlib.import_module(f"app.commands.{COMMANDS[command]}")


def build_parser(commands: Sequence[str] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m app",
        description="Sweetspot: watch whether LLM serving sits in its bandwidth sweet spot.",
    )
    parser.add_argument("--config", metavar="FILE", help=f"TOML settings file (or ${ENV_CONFIG})")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug detail")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # The global options are accepted after the command too (`status --config f.toml`): users type both.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    for name in commands or COMMANDS:
        module = _load(name)
        command_parser = sub.add_parser(name, help=module.HELP, description=module.HELP, parents=[common])
        module.configure(command_parser)
    return parser


def _requested_command(argv: Sequence[str]) -> list[str] | None:
    """Build only the requested command's parser, so one command's imports never slow another."""
    tokens = iter(argv)
    for token in tokens:
        if token in COMMANDS:
            return [token]
        if token == "--config":
            next(tokens, None)  # its value is a path, not a command
        elif not token.startswith("-"):
            return None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_requested_command(argv))
    args = parser.parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)
    # every log line masked (core/redact.py: a library's message may name a URL with its credentials)
    # and its message's control characters escaped (core/text.py: a name from outside is data)
    handler.setFormatter(LogFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, handlers=[handler])
    # Per-request and per-run lines of these libraries drown the collector's own log at INFO.
    for noisy in ("httpx", "httpcore", "apscheduler"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    settings = None
    stdout = sys.stdout
    module = _load(args.command)
    # One writer per destination: JSON (`--json`, whose json.dumps escapes every control character
    # itself) and data commands (query, rules export) write as they are, never cut; what a command
    # prints for a terminal holds text from outside (model names, answers): each control character
    # shown as an escape, each line bounded (core/text.py TerminalWriter)
    if not (getattr(module, "DATA_OUTPUT", False) or getattr(args, "json", None) is True):
        sys.stdout = TerminalWriter(stdout)
    try:
        overrides = {"db_url": getattr(args, "db", None)}
        settings = load_settings(args.config, os.environ, overrides)
        args.environ = os.environ  # for flags that name a secret's variable (inspect --bearer-token-env)
        return int(module.execute(args, settings) or 0)
    except SweetspotError as exc:
        print(f"ERROR: {escaped(exc.one_line())}", file=sys.stderr)
        return 2
    except Exception as exc:
        # a database error a command did not translate itself (a damaged file under `alerts list`):
        # translated here, once for every command, as the others translate theirs
        from sqlalchemy.exc import SQLAlchemyError

        sub = getattr(args, f"{args.command}_command", None)
        doing = f"`{args.command}{' ' + sub if sub else ''}`"
        if isinstance(exc, SQLAlchemyError):
            from db.errors import storage_error

            error = storage_error(f"running {doing}", exc, settings.db_url if settings else None)
            print(f"ERROR: {escaped(error.one_line())}", file=sys.stderr)
            return 2
        # the error boundary of every command: anything else (a hostile input no module foresaw) is
        # one line naming what was refused; the traceback only with --verbose (core/errors.py refusal)
        log.debug("the traceback of %s", doing, exc_info=True)
        print(f"ERROR: {refusal(exc, doing)}" + ("" if args.verbose else " (--verbose shows the traceback)"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`... | head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        sys.stdout = stdout
