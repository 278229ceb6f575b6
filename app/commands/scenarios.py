"""``python -m app scenarios``: the scenario library scored (docs/scenarios.md).

Each scenario runs through the product's own ingestion, evaluator and stored verdicts on a fresh
SQLite file; ``--rules`` runs the same series through ``promtool test rules`` against the product's
exported rules or a copied rule file instead."""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
from pathlib import Path

from core.errors import UsageError
from core.settings import Settings

HELP = "score the alert judgement on the scenario library: faults caught, time to detect, false firings, verdicts"
RULE_SETS = ("product", "exported", "vllm_example", "plain_ttft_p95")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--only", metavar="NAMES", help="comma-separated scenario names (default: all; --list shows them)")
    parser.add_argument("--fast", action="store_true", help="only the fast subset (the test suite's)")
    parser.add_argument("--list", action="store_true", help="list the scenarios and their truth, run nothing")
    parser.add_argument("--rules", choices=RULE_SETS, default="product",
                        help="product: the evaluator itself (default); exported: `rules export` through promtool; "
                        "vllm_example, plain_ttft_p95: copied rules through promtool")
    parser.add_argument("--json", action="store_true", help="print one JSON object per scenario and the total")
    parser.add_argument("--disagreements", action="store_true",
                        help="after each scenario, every minute whose stored verdict disagrees with the truth, and why")


def execute(args: argparse.Namespace, settings: Settings) -> int:
    from app.scenarios.library import select

    try:
        chosen = select(args.only, args.fast)
    except KeyError as exc:
        raise UsageError(f"--only: no scenario named {exc.args[0]!r}", "python -m app scenarios --list shows them") from None
    if args.list:
        for sc in chosen:
            truth = ", ".join(f"{a / 60:g}–{b / 60:g} min" for a, b in sc.truth) or "none (healthy)"
            print(f"{sc.name:28} {sc.kind:7} out of the sweet spot: {truth}; clause: {' / '.join(sc.clauses) or '—'}; {sc.summary}")
        return 0
    return _score(chosen, args.rules, args.json, args.disagreements)


def _score(chosen: list, rules: str, as_json: bool, disagreeing: bool = False) -> int:
    from app.scenarios import scorecard
    from app.scenarios.score import disagreements, score, total

    runner = _runner(rules)
    scores = []
    with tempfile.TemporaryDirectory(prefix="sweetspot-scenarios-") as tmp:
        for sc in chosen:
            ran = runner(sc, Path(tmp))
            s = score(ran)
            scores.append(s)
            if as_json:
                print(json.dumps(dataclasses.asdict(s)), flush=True)
            else:
                print(scorecard.row(s, rules == "product"), flush=True)
            if disagreeing:
                print("\n".join(disagreements(ran)), flush=True)
    t = total(scores)
    if as_json:
        print(json.dumps({"total": dataclasses.asdict(t)}))
    else:
        print("\n".join(scorecard.lines(f"rules: {rules}", [], t, rules == "product")[1:]))
    return 0


def _runner(rules: str):  # noqa: ANN202 - (scenario, workdir) -> Run
    from app.scenarios import promtool, runner

    if rules == "product":
        return runner.run
    text = exported_rules() if rules == "exported" else promtool.COPIED_RULES[rules]
    return lambda sc, _tmp: promtool.run_promtool(sc, text)


def exported_rules() -> str:
    """``rules export`` of the scenarios' settings, the sweet spot and the own curve as the product
    resolves them for the demo (the reference's 16 and its curve) written in, since an export needs numbers."""
    from app.alerts.promql import Options, export
    from app.scenarios.runner import scenario_target
    from app.sweet_spot import REFERENCE_KNEE, reference_spot

    base = Settings(targets=(scenario_target(),))
    sweetspot = dataclasses.replace(base.sweetspot, concurrency=REFERENCE_KNEE)
    return export(dataclasses.replace(base, sweetspot=sweetspot), Options(curve=reference_spot().curve))
