"""``python -m app digest``: the digest of a period ending now (or ``--until``), printed, written as HTML or mailed."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from core.durations import parse_duration, parse_instant
from core.errors import UsageError
from core.settings import Settings

HELP = "the digest of the last period (time in the sweet spot, TTFT, tok/s, preemptions, incidents): print, --html or --send"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--since", default="24h", metavar="DURATION", help="the period's length, ending now or --until (default 24h)")
    parser.add_argument("--until", metavar="TIME", help="the period's end (default now): ISO 8601, UTC without an offset "
                        "(2026-12-06T09:00), or epoch seconds; a past period's digest")
    parser.add_argument("--print", action="store_true", help="write it to stdout as text (the default)")
    parser.add_argument("--html", metavar="FILE", help="write it as HTML (charts inline) to FILE")
    parser.add_argument("--send", action="store_true", help="mail it to alerts.digest.to (else alerts.email.to) now")
    parser.add_argument("--db", metavar="URL", help="database URL (overrides db_url / SWEETSPOT_DB_URL)")


def execute(args: argparse.Namespace, settings: Settings) -> int:
    from app.notify import digest
    from app.notify.notifier import Notifier
    from db.engine import open_engine

    period = parse_duration(args.since)
    if period <= 0:
        raise UsageError("--since must be greater than 0", "e.g. --since 24h")
    end = time.time() if args.until is None else parse_instant(args.until)
    if end > time.time() + 60:
        raise UsageError(f"--until {args.until} is in the future", "Leave it out for a period ending now")
    to = tuple(settings.alerts.digest.to or settings.alerts.email.to)
    if args.send and not settings.alerts.email.enabled:
        raise UsageError("--send: e-mail is off", "Set SWEETSPOT_SMTP_HOST (alerts.email.host) and its friends, docs/configuration.md")
    if args.send and not to:
        raise UsageError("--send: no recipient", "Set alerts.digest.to or SWEETSPOT_ALERT_TO")
    engine = open_engine(settings.db_url)
    try:
        notifier = Notifier(engine, settings)
        reader = notifier.reader()
        report = digest.build(reader, engine, settings, end - period, end)
        charts = digest.period_charts(reader, settings, end - period, end)
        if args.print or not (args.html or args.send):
            print(digest.render_text(report), end="")
        if args.html:
            Path(args.html).write_text(digest.render_html(report, charts, inline=True)[0])
            print(f"wrote {args.html}")
        if args.send:
            # its own row only, out of the collector's reach while this command sends it: the outbox's
            # other rows belong to the collector holding the lease (sent here too, they could go twice)
            hold = settings.alerts.email.retry_max_s
            row = notifier.enqueue(digest.outgoing(report, to, charts, f"digest manual {int(end)}"), hold_s=hold)
            sent, failed = notifier.deliver(time.time(), only=(row,))
            print(f"digest sent to {', '.join(to)}" if sent else "digest queued; the SMTP server did not accept it yet "
                  "(the collector retries it; see python -m app alerts history --notifications)")  # fmt: skip
            return 0 if sent else 1
    finally:
        engine.dispose()
    return 0
