"""``python -m app plan TARGET``: how many replicas of today's deployment hold a demand inside the sweet
spot, and what another GPU or tensor-parallel size would give (app/plan.py, docs/plan.md)."""

from __future__ import annotations

import argparse
import json
import sys
import time

from core.errors import UsageError
from core.settings import Settings
from core.text import terminal

HELP = "capacity what-if: replicas of today's deployment for a demand, and what other GPUs or TP would give"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="TARGET", help="the target's name")
    demand = parser.add_mutually_exclusive_group()
    demand.add_argument("--demand-rps", type=float, metavar="X",
                        help="requests/s to hold, at the observed output length (default: the last 7 days' peak hour)")  # fmt: skip
    demand.add_argument("--demand-tps", type=float, metavar="Y", help="output tok/s to hold")
    parser.add_argument("--gpu", metavar="NAME", help="another deployment's GPU (a name of core/gpu_specs.json)")
    parser.add_argument("--gpus", type=int, metavar="N", help="GPUs a replica of it has (default: --tp)")
    parser.add_argument("--tp", type=int, metavar="N", help="its tensor-parallel size (default: --gpus)")
    parser.add_argument("--from", dest="source", choices=("minutes", "sweep", "bench"),
                        help="fit the step model on the production minutes, the latest sweep or the imported benchmarks "
                             "(default: minutes when 30 or more, else the sweep, else the benchmarks)")  # fmt: skip
    parser.add_argument("--levels", metavar="LO-HI", help="calibrate only on samples at LO to HI running requests")
    parser.add_argument("--json", action="store_true", help="the whole what-if as one JSON object")
    parser.add_argument("--db", metavar="URL", help="database URL (overrides db_url / SWEETSPOT_DB_URL)")


def execute(args: argparse.Namespace, settings: Settings) -> int:
    from app import plan as what_if
    from db.queries import Reader

    if (args.gpus or args.tp) and not args.gpu:
        raise UsageError("--gpus and --tp describe the deployment --gpu names", "Add --gpu, e.g. --gpu H200 --gpus 2")
    asked = [what_if.deployment(what_if.find_gpu(args.gpu), args.gpus, args.tp)] if args.gpu else []
    levels = what_if.parse_levels(args.levels)
    say = lambda line: print(f"… {line}", file=sys.stderr, flush=True)  # noqa: E731 - progress, off stdout
    result = what_if.plan(Reader(settings.db_url), settings, args.target, time.time(), rps=args.demand_rps,
                          tps=args.demand_tps, asked=asked, source=args.source, levels=levels, say=say)  # fmt: skip
    if args.json:
        print(json.dumps(result.as_json(), indent=2))
        return 0
    for line in result.lines():
        print(terminal(line))
    return 0
