"""``python -m app backfill --prometheus URL --since 7d``: import the history a Prometheus holds."""

from __future__ import annotations

import argparse
import dataclasses
import time

from app.commands.sweep import _duration  # the same rule: a duration longer than 0
from core.durations import format_duration
from core.errors import UsageError
from core.redact import masked
from core.settings import PrometheusSettings, Settings, require_scrape_tokens

HELP = "import the history a Prometheus holds (query_range at the scrape interval); resumable, no duplicates"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prometheus", metavar="URL", required=True, help="Prometheus base URL, e.g. http://prometheus:9090")
    parser.add_argument("--since", metavar="DURATION", default="7d", help="how far back, e.g. 7d (default), 12h")
    parser.add_argument("--selector", metavar="SELECTOR", help="series selector (default: the [[prometheus]] one, else {job=\"vllm\"})")
    parser.add_argument("--target-label", metavar="LABEL", help="label that names a target (default: instance)")
    parser.add_argument("--step", metavar="DURATION", help="one round per step (default: interval_s, the scrape interval)")
    parser.add_argument("--db", metavar="URL", help="database URL (overrides db_url / SWEETSPOT_DB_URL)")


def source_for(args: argparse.Namespace, settings: Settings) -> PrometheusSettings:
    """The ``[[prometheus]]`` of that URL (its HTTP settings, selector, ceiling), else the defaults; flags win."""
    url = args.prometheus.rstrip("/")
    source = next((s for s in settings.prometheus if s.url.rstrip("/") == url), PrometheusSettings(url=url))
    if args.selector:
        source = dataclasses.replace(source, selector=args.selector)
    if args.target_label:
        source = dataclasses.replace(source, target_label=args.target_label)
    return source


def execute(args: argparse.Namespace, settings: Settings) -> int:
    from app.alerts.replay import judge_history
    from app.prometheus_backfill import backfill
    from db.engine import open_engine

    since_s = _duration(args.since, "--since")
    step_s = _duration(args.step, "--step") if args.step else settings.interval_s
    if not args.prometheus.startswith(("http://", "https://")):
        raise UsageError(f"--prometheus {args.prometheus!r} is not an http(s) URL", "e.g. --prometheus http://prometheus:9090")
    source = source_for(args, settings)
    require_scrape_tokens(dataclasses.replace(settings, targets=(), prometheus=(source,)))
    engine = open_engine(settings.db_url)
    try:
        result = backfill(engine, source, since_s, step_s, time.time(), timeout_s=max(30.0, settings.scrape_timeout_s))
        # every minute written is judged once, as the evaluator would have (app/alerts/replay.py)
        judged = sum(judge_history(engine, settings, name, result.start, result.end) for name in result.names)
    finally:
        engine.dispose()
    resumed = f", continuing the run that stopped at {time.strftime('%Y-%m-%d %H:%M', time.localtime(result.resumed_from))}" \
        if result.resumed_from is not None else ""
    if result.resumed_from is not None and result.rounds == 0:
        print(f"nothing to add: {masked(settings.db_url)} already holds {source.selector} up to "
              f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(result.resumed_from))} (a run of the same source)")
        return 0
    print(f"backfilled {result.rounds:,} rounds of {result.targets} target(s) from {source.selector} at "
          f"{format_duration(step_s)} steps into {masked(settings.db_url)}{resumed}; {judged:,} minutes judged")
    return 0
