"""``python -m app rules export``: the effective alert rules for another system (a Prometheus rule file)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.errors import UsageError
from core.settings import Settings

HELP = "export the effective alert rules (rules export --format prometheus: a Prometheus rule file)"
# printed as it is, not through the terminal's escaping (app/cli.py): a rule file is data (written by a YAML library)
DATA_OUTPUT = True


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="rules_command", metavar="SUBCOMMAND", required=True)
    export = sub.add_parser("export", help="write the rule set as a Prometheus rule file (recording and alerting rules)")
    export.add_argument("--format", choices=("prometheus",), default="prometheus", help="the file's format (prometheus)")
    export.add_argument("--names", choices=("colon", "underscore"), default="colon",
                        help="metric names as Prometheus stores them: vllm:x (colon, default) or vllm_x (underscore)")
    export.add_argument("--target-label", default="instance", metavar="LABEL",
                        help="the label whose every value is one target (default: instance)")
    export.add_argument("--curve", metavar="C:TOK,...",
                        help="the own curve under_delivering judges by, as concurrency:output-tok/s points "
                        "(e.g. 8:85,16:126,32:145, a sweep's levels); without it the rule is left out")
    export.add_argument("--gateway-queue", default="sweetspot_gateway_queue_depth", metavar="METRIC",
                        help="the gateway's queue-depth gauge for queue_growing (default: Sweetspot's gateway's); "
                        "'' leaves the rule out")
    export.add_argument("--output", "-o", metavar="FILE", help="write here instead of stdout")


def parse_curve(text: str | None) -> tuple[tuple[float, float], ...]:
    """``8:85,16:126`` → ((8.0, 85.0), (16.0, 126.0)); raises UsageError naming the bad point."""
    points = []
    for part in (text or "").split(","):
        if not part.strip():
            continue
        try:
            c, t = (float(x) for x in part.split(":"))
        except ValueError:
            raise UsageError(f"--curve: {part.strip()!r} is not concurrency:tok/s", "e.g. --curve 8:85,16:126,32:145") from None
        if not (c > 0 and t >= 0):
            raise UsageError(f"--curve: {part.strip()!r} needs a concurrency > 0 and tok/s ≥ 0", "e.g. --curve 8:85,16:126,32:145")
        points.append((c, t))
    return tuple(sorted(points))


def execute(args: argparse.Namespace, settings: Settings) -> int:
    from app.alerts.promql import Options, export

    if not args.target_label.isidentifier():
        raise UsageError(f"--target-label {args.target_label!r} is not a Prometheus label name", "e.g. --target-label instance")
    text = export(settings, Options(names=args.names, target_label=args.target_label, curve=parse_curve(args.curve),
                                    gateway_queue=args.gateway_queue))
    if args.output:
        Path(args.output).write_text(text)
        print(f"wrote {args.output}: check it with promtool check rules {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
