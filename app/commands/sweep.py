"""``python -m app sweep``: the field report's load sweep, automated (docs/sweep.md).

Runs a closed-loop load at each concurrency level against an OpenAI-compatible server, prints the
result table and the verdict (sweet-spot concurrency, gateway limit), optionally writes a JSON file,
and stores the run in the database.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from core.durations import DurationError, format_duration, parse_duration
from core.errors import UsageError
from core.progress import SweepProgress
from core.redact import masked
from core.settings import Settings
from core.text import visible
from db.results import SweepLevel, SweepRun
from sweep.client import API_PATHS, discover_served
from sweep.engine import EngineLevel
from sweep.fit import Context, Sized, engine_context, fit_mix, sized_note
from sweep.report import CLIENT_VS_ENGINE, engine_json, format_engine, format_table, format_verdict, to_json
from sweep.runner import SweepConfig, run_sweep
from sweep.verdict import recommend
from sweep.workload import DEFAULT_MIX, mix_label, parse_mix

HELP = "closed-loop load sweep of an OpenAI-compatible server: tok/s and TTFT per concurrency, and the sweet spot"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1 (default: --target's server)")
    parser.add_argument(
        "--target", help="the configured target whose server is swept, stored with the run (default: the one at --url)"
    )
    parser.add_argument("--concurrency", default="8,16,32", help="comma-separated levels (default 8,16,32)")
    parser.add_argument("--duration", default="10m", help="measured window of each level: 600, 90s, 10m (default 10m, as the report)")
    parser.add_argument(
        "--warmup", help="load run before each window and left out of the figures (default: a tenth of --duration)"
    )
    parser.add_argument("--mix", default=DEFAULT_MIX, help=f"request classes and shares (default {DEFAULT_MIX})")
    parser.add_argument("--model", help="model name (default: the first of GET /models)")
    parser.add_argument("--ttft-slo", help="TTFT P95 objective: 3, 3s, 2500ms (default: sweetspot.ttft_p95_slo_s)")
    parser.add_argument("--json", metavar="FILE", help="also write the levels and the verdict to this JSON file")
    parser.add_argument("--db", metavar="URL", help="database URL (default: the db_url setting)")
    parser.add_argument("--no-store", action="store_true", help="do not store the run in the database")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic prompts (default 0)")
    parser.add_argument(
        "--api", choices=sorted(API_PATHS), default="completions", help="endpoint to load (default completions)"
    )
    parser.add_argument(
        "--server-speed",
        type=float,
        default=1.0,
        help="the server's clock runs this many times real time (the simulator's --speed): report its time",
    )
    parser.add_argument(
        "--request-timeout", default="300s", help="silence on a stream that counts as a timeout (default 300s)"
    )


def _duration(value: str, option: str) -> float:
    try:
        seconds = parse_duration(value)
    except DurationError as exc:
        raise UsageError(f"{option}: {exc}") from None
    if seconds <= 0:
        raise UsageError(f"{option}: must be greater than 0")
    return seconds


def parse_warmup(text: str) -> float:
    """A warm-up duration; unlike a window it may be 0."""
    try:
        return parse_duration(text)
    except DurationError as exc:
        raise UsageError(f"--warmup: {exc}") from None


def parse_concurrency(text: str) -> tuple[int, ...]:
    """``8,16,32`` → (8, 16, 32): distinct positive integers, ascending."""
    try:
        levels = {int(part) for part in text.split(",") if part.strip()}
    except ValueError:
        raise UsageError(f"--concurrency: {text!r} is not a list of integers", "write it like 8,16,32") from None
    if not levels or min(levels) < 1:
        raise UsageError(f"--concurrency: {text!r} needs integers of at least 1", "write it like 8,16,32")
    return tuple(sorted(levels))


def sweep_target(settings: Settings, url: str | None, target: str | None) -> tuple[str, str | None]:
    """The base URL to load and the configured target it belongs to (None: no target watches it).

    ``--target`` names a target (its server's base URL is the default ``--url``); without it, the
    target whose ``vllm_url`` has the same scheme, host and port as ``--url``, if any.
    """
    targets = {t.name: t for t in settings.targets if t.vllm_url}
    if target is not None and target not in targets:
        known = ", ".join(targets) or "none configured"
        raise UsageError(f"--target: no target named {target!r} with a vllm_url ({known})", "name one of the [[targets]]")
    if url is None:
        if target is None:
            raise UsageError("--url is required without --target", "give --url http://HOST:8000/v1 or --target NAME")
        url = f"{_server(targets[target].vllm_url)}/v1"
    if target is None:
        target = next((t.name for t in targets.values() if _server(t.vllm_url) == _server(url)), None)
    return url.rstrip("/"), target


def watched_by(db_url: str, url: str) -> str | None:
    """The stored target whose ``vllm_url`` has ``url``'s server (None: none, or no database yet).

    The demo's target is set by ``run``, not in the settings, and its simulator takes a free port at
    each start: a sweep stored without the target's name matched only that port, and was orphaned
    ("sweeps of other servers not shown") after any restart. Stored with the name, it stays the demo's."""
    from core.errors import StorageError
    from db.queries import Reader

    try:
        targets = Reader(db_url).targets()
    except StorageError:
        return None
    return next((t.name for t in targets if t.vllm_url and _server(t.vllm_url) == _server(url)), None)


def has_gateway(settings: Settings, target: str | None) -> bool | None:
    """Whether a gateway stands in front of ``target`` (its settings, else what the collector stored
    of it); None where no target is known: the verdict then names both limits."""
    if target is None:
        return None
    configured = next((t for t in settings.targets if t.name == target), None)
    if configured is not None:
        return configured.gateway.kind != "none"
    from core.errors import StorageError
    from db.queries import Reader

    try:
        stored = next((t for t in Reader(settings.db_url).targets() if t.name == target), None)
    except StorageError:
        return None
    return None if stored is None else stored.gateway_source not in ("", "none")


def _server(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _config(args: argparse.Namespace, model: str) -> SweepConfig:
    if args.server_speed <= 0:
        raise UsageError("--server-speed: must be greater than 0")
    duration_s = _duration(args.duration, "--duration")
    warmup_s = duration_s / 10 if args.warmup is None else parse_warmup(args.warmup)
    return SweepConfig(
        base_url=args.url,
        model=model,
        concurrencies=parse_concurrency(args.concurrency),
        duration_s=duration_s,
        warmup_s=warmup_s,
        server_speed=args.server_speed,
        mix=parse_mix(args.mix),
        api=args.api,
        seed=args.seed,
        request_timeout_s=_duration(args.request_timeout, "--request-timeout"),
    )


def execute(args: argparse.Namespace, settings: Settings) -> int:
    if not getattr(args, "verbose", False):
        # httpx logs every request at INFO: thousands of lines that would bury the progress bar.
        logging.getLogger("httpx").setLevel(logging.WARNING)
    slo = _duration(args.ttft_slo, "--ttft-slo") if args.ttft_slo else settings.sweetspot.ttft_p95_slo_s
    args.url, target = sweep_target(settings, args.url, args.target)
    if target is None and not args.no_store:
        target = watched_by(settings.db_url, args.url)
    _config(args, "?")  # validate every argument before touching the network
    served = discover_served(args.url, args.model)
    config = _config(args, served.model)
    context = engine_context(config.base_url, config.api, served, config.mix)
    mix, sized = fit_mix(config.mix, context)  # refused here, before any load, when a class cannot fit
    config = dataclasses.replace(config, mix=mix)
    total = format_duration(round(config.level_s * len(config.concurrencies)))
    print(
        f"sweeping {masked(config.base_url)} ({f'target {visible(target)}' if target else 'no configured target'}) "
        f"model {visible(config.model)}: concurrency {args.concurrency}, "
        f"{format_duration(config.warmup_s)} warm-up + {format_duration(config.duration_s)} each "
        f"({total} of load, plus each level's drain: the requests in flight at a window's end run to their end, "
        f"up to --request-timeout; the time left is estimated once the first level has drained), "
        f"mix {mix_label(config.mix)}{_context_words(context)}",
        file=sys.stderr,
    )
    if sized:
        print(sized_note(sized, context), file=sys.stderr)
    started_at = time.time()
    # stored at its start with the planned end of its load (every level, each with a drain of up to
    # --request-timeout): the alert evaluator holds the load rules of its target meanwhile
    planned = SweepRun(started_at, config.base_url, config.model, mix_label(config.mix), slo, (), {}, target=target,
                       ends_at=started_at + len(config.concurrencies) * (config.level_s + config.request_timeout_s))
    run_id = None if args.no_store else _store(planned, settings.db_url)
    engine: list[EngineLevel] = []
    try:
        levels = _measure(config, engine)
    except BaseException:
        if run_id is not None:  # interrupted or failed: nothing of it is stored, and the hold ends now
            _drop(run_id, settings.db_url)
        raise
    run = dataclasses.replace(_make_run(started_at, config, slo, levels, engine), target=target, ends_at=time.time())
    run.recommendation.update(_fit_json(context, sized))
    _print_result(run, engine, has_gateway(settings, target))
    if args.json:
        Path(args.json).write_text(json.dumps(to_json(run), indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}", file=sys.stderr)
    if run_id is not None:
        _finish(run_id, run, settings.db_url)
        print(f"stored as sweep run {run_id} in {masked(settings.db_url)}", file=sys.stderr)
    return 0


def _measure(config: SweepConfig, engine: list[EngineLevel]) -> list[SweepLevel]:
    levels: list[SweepLevel] = []
    try:
        progress = SweepProgress(len(config.concurrencies), config.level_s, concurrencies=config.concurrencies)
        asyncio.run(run_sweep(config, progress, levels, engine))
    except KeyboardInterrupt:
        if levels:  # ten minutes a level: never lose the levels already measured
            print(f"interrupted after {len(levels)} of {len(config.concurrencies)} levels (not stored):")
            print(format_table(levels))
        raise
    return levels


def _make_run(
    started_at: float, config: SweepConfig, slo: float, levels: list[SweepLevel], engine: list[EngineLevel]
) -> SweepRun:
    verdict = recommend(levels, slo)
    # Stored with the run (the recommendation is its one free-form field): how it was measured,
    # and the engine's own figures over each level's span, beside the client's.
    verdict["warmup_s"] = config.warmup_s * config.server_speed
    if engine:
        verdict["engine"] = [engine_json(figures) for figures in engine]
    if config.server_speed != 1:
        verdict["server_speed"] = config.server_speed  # its figures are in the server's time
    return SweepRun(started_at, config.base_url, config.model, mix_label(config.mix), slo, tuple(levels), verdict)


def _context_words(context: Context) -> str:
    return "" if context.max_model_len is None else f", the engine's max_model_len {context.max_model_len:,}"


def _fit_json(context: Context, sized: list[Sized]) -> dict[str, object]:
    """What the run's prompts were fitted to, stored with its verdict (docs/sweep.md)."""
    return {
        "max_model_len": context.max_model_len,
        "engine_tokens_per_prompt_token": round(context.ratio, 3),
        "sized_classes": {s.name: {"asked": list(s.asked), "sent": list(s.sent)} for s in sized},
    }


def _print_result(run: SweepRun, engine: list[EngineLevel], gateway: bool | None) -> None:
    print(format_table(run.levels))
    for figures in engine:
        print(format_engine(figures))
    if engine:
        print(CLIENT_VS_ENGINE)
    print()
    print(format_verdict(run.recommendation, gateway))


def _store(run: SweepRun, db_url: str) -> int:
    # Imported here: the database layer (SQLAlchemy) costs nothing to a sweep run with --no-store.
    from db.engine import open_engine
    from db.sweeps import store_sweep

    engine = open_engine(db_url)
    try:
        return store_sweep(engine, run)
    finally:
        engine.dispose()


def _finish(run_id: int, run: SweepRun, db_url: str) -> None:
    from db.engine import open_engine
    from db.sweeps import finish_sweep

    engine = open_engine(db_url)
    try:
        finish_sweep(engine, run_id, run)
    finally:
        engine.dispose()


def _drop(run_id: int, db_url: str) -> None:
    from db.engine import open_engine
    from db.sweeps import drop_sweep

    engine = open_engine(db_url)
    try:
        drop_sweep(engine, run_id)
    except Exception as exc:  # noqa: BLE001 - the interruption is what the user must see; the hold ends at its planned end
        print(f"could not drop the interrupted sweep run {run_id}: {exc}", file=sys.stderr)
    finally:
        engine.dispose()
