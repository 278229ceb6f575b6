"""``python -m app health``: exit 0 when the collector wrote a round lately (container health checks).

"Lately" is within three scrape intervals: one late round is not an outage, three in a row are. With
``--ui`` it asks the dashboard's own health endpoint instead. Non-zero exits print the reason.
"""

from __future__ import annotations

import argparse
import sys
import time

from app.formatting import elapsed
from core.durations import format_duration
from core.errors import UsageError
from core.redact import masked
from core.settings import Settings

HELP = "exit 0 when the collector wrote a round within three intervals (--ui: when the dashboard answers)"
INTERVALS = 3


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="URL", help="database URL (overrides db_url / SWEETSPOT_DB_URL)")
    parser.add_argument("--ui", action="store_true", help="check the dashboard on 127.0.0.1:ui.port instead")
    parser.add_argument(
        "--port", type=int, help="with --ui: the dashboard's port, as given to `ui --port` or `run --port` (default ui.port)"
    )


def collector_health(settings: Settings, now: float) -> tuple[bool, str]:
    """(healthy, the reason in one line) from the newest round stored. The age is spelled as every age
    (``3 s``, ``1 h 6 min``: app/formatting.py ``elapsed``), the limit as the setting it comes from."""
    from db.fleet import last_round_at
    from db.queries import Reader

    last = last_round_at(Reader(settings.db_url).engine)
    limit = INTERVALS * settings.interval_s
    if last is None:
        return False, f"no round stored in {masked(settings.db_url)} yet: is `python -m app collect` running?"
    from app.prometheus_source import FUTURE_SKEW_S

    if last > now + FUTURE_SKEW_S:  # would read as "0 s old" for ever, the collector stopped or not
        return False, (f"the latest round is stamped {elapsed(last - now)} in the future: a source's clock (or this "
                       "machine's) is wrong; rounds from the future are no longer stored, check the clocks")
    age = max(0.0, now - last)
    if age > limit:
        return False, (
            f"the latest round is {elapsed(age)} old (more than {INTERVALS} × interval_s = "
            f"{format_duration(limit)}): is the collector running, and can it reach its targets?"
        )
    return True, f"the latest round is {elapsed(age)} old (limit {format_duration(limit)})"


def ui_health(settings: Settings, timeout_s: float = 3.0, port: int | None = None) -> tuple[bool, str]:
    """(healthy, reason) from Streamlit's ``/_stcore/health`` on this machine, at ``port`` (default ui.port)."""
    import httpx

    url = f"http://127.0.0.1:{settings.ui.port if port is None else port}/_stcore/health"
    try:
        answer = httpx.get(url, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return False, f"the dashboard does not answer at {url} ({type(exc).__name__}): is `python -m app ui` running?"
    if answer.status_code != 200:
        return False, f"the dashboard answered {answer.status_code} at {url}"
    return True, f"the dashboard answers at {url}"


def execute(args: argparse.Namespace, settings: Settings) -> int:
    if args.port is not None and not args.ui:
        raise UsageError("--port: only with --ui (the collector's health is read from the database)")
    if args.port is not None and not 1 <= args.port <= 65535:
        raise UsageError(f"--port: {args.port} is not a TCP port", "give 1 to 65535")
    healthy, reason = ui_health(settings, port=args.port) if args.ui else collector_health(settings, time.time())
    print(("healthy: " if healthy else "UNHEALTHY: ") + reason, file=sys.stdout if healthy else sys.stderr)
    return 0 if healthy else 1
