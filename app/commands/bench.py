"""``python -m app bench import FILE [--target NAME]`` and ``bench list``: benchmark files of other tools
(``vllm bench serve --save-result``, GuideLLM's report) stored beside production, drawn on the
Operating point page."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, replace
from pathlib import Path

from app.bench_files import BenchFileError, read_bench
from app.formatting import minute, number
from app.operating_point import server
from core.bounded import TooLarge, read_file
from core.errors import StorageError, UsageError
from core.redact import masked
from core.settings import Settings
from core.text import visible
from db.results import BenchRun

HELP = "import a `vllm bench serve --save-result` JSON or a GuideLLM report, or list the imported ones"
EARLIEST_RUN_AT = 946684800.0  # 2000-01-01 UTC: no serving benchmark ran before
FUTURE_SKEW_S = 86400.0  # a file's local date read in another zone is off by hours, not by more than a day
MAX_BYTES = 64 * 1024 * 1024  # a GuideLLM report with every request sampled runs to tens of MB


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bench_command", metavar="SUBCOMMAND", required=True)
    imp = sub.add_parser("import", help="store a benchmark file's levels for the Operating point page")
    imp.add_argument("file", metavar="FILE", help="the JSON the tool wrote")
    imp.add_argument("--target", metavar="NAME", help="the target whose server it measured (default: the report's "
                     "URL's target, else the only target)")  # fmt: skip
    imp.add_argument("--db", metavar="URL", help="database URL (overrides db_url / SWEETSPOT_DB_URL)")
    lst = sub.add_parser("list", help="the imported benchmarks, the latest run first")
    lst.add_argument("--target", metavar="NAME", help="only this target's")
    lst.add_argument("--json", action="store_true", help="one JSON array of the runs with their levels")
    lst.add_argument("--db", metavar="URL", help="database URL (overrides db_url / SWEETSPOT_DB_URL)")


def execute(args: argparse.Namespace, settings: Settings) -> int:
    from db.queries import Reader

    if args.bench_command == "list":
        runs = Reader(settings.db_url).bench_runs(1000, args.target)
        if args.json:
            print(json.dumps([asdict(r) for r in runs], indent=2))
        for run in [] if args.json else runs:
            print(describe(run))
        if not runs and not args.json:
            print("no benchmark imported yet: `python -m app bench import FILE`")
        return 0
    return _import(args, settings)


def _import(args: argparse.Namespace, settings: Settings) -> int:
    from db.benches import store_bench
    from db.engine import open_engine
    from db.queries import Reader

    path = Path(args.file)
    try:  # a regular file only, read with a cap (core/bounded.py): a link to /dev/zero has size 0 and no end
        text = read_file(path, MAX_BYTES).decode("utf-8")
    except TooLarge as exc:
        raise BenchFileError(f"cannot read {visible(str(exc))} (a benchmark file is a regular file of {MAX_BYTES:,} bytes at most)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchFileError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    run = read_bench(text, path.name)
    now = time.time()
    if not EARLIEST_RUN_AT <= run.run_at <= now + FUTURE_SKEW_S:  # stored, it would sort first forever
        raise BenchFileError(f"{path.name}: the benchmark's time {minute(run.run_at)} is "
                             f"{'in the future' if run.run_at > now else 'before 2000'} (this machine's clock reads {minute(now)})",
                             "Fix the file's date (or this machine's clock); nothing was stored")  # fmt: skip
    known = {t.name: t.vllm_url for t in settings.targets}
    try:  # discovered targets too; a database not made yet has none
        known.update({t.name: t.vllm_url or "" for t in Reader(settings.db_url).targets()
                      if t.name not in known and t.retired_at is None})  # not one the collector no longer reads
    except StorageError:
        pass
    run = replace(run, target=_target(run, args.target, known))
    engine = open_engine(settings.db_url)
    try:
        run_id = store_bench(engine, run, now)
    finally:
        engine.dispose()
    print(f"imported {describe(run)} as run {run_id} into {masked(settings.db_url)}")
    if run.tool == "vllm bench serve" and run.points[0].ttft_p95_s is None:
        print("  no TTFT P95 in the file (vllm bench serve gives P99 by default): run it with --metric-percentiles 50,95,99")
    return 0


def _target(run: BenchRun, named: str | None, known: dict[str, str]) -> str:
    """The target named, else the one whose server the report names, else the only one."""
    if named is not None:
        if named not in known:
            raise UsageError(f"no target {named!r} (known: {', '.join(sorted(known)) or 'none'})",
                             "Name a configured or discovered target with --target")  # fmt: skip
        return named
    url = str(run.settings.get("target", ""))
    if url:
        matches = [name for name, vllm_url in known.items() if vllm_url and server(vllm_url) == server(url)]
        if len(matches) == 1:
            return matches[0]
    if len(known) == 1:
        return next(iter(known))
    raise UsageError(f"{run.file_name} does not say which target it measured "
                     f"(known: {', '.join(sorted(known)) or 'none'})", "Name it with --target NAME")  # fmt: skip


def describe(run: BenchRun) -> str:
    """``vllm bench serve of 2026-12-06 03:01 (model m, target t): max_concurrency 8: 728 tok/s, TTFT P95 0.056 s``."""
    when = minute(run.run_at)
    levels = "; ".join(
        f"{visible(p.label)}: {number(p.tokens_per_s)} tok/s at {number(p.concurrency)} concurrent"
        + (f", TTFT P95 {number(p.ttft_p95_s)} s" if p.ttft_p95_s is not None else "")
        for p in run.points
    )
    # names from the file are data: each made visible (escaped, bounded), so none can start a line
    return f"{run.tool} of {when} ({visible(run.file_name)}, model {visible(run.model)}, target {visible(run.target)}): {levels}"
