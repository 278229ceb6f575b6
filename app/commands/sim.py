"""``python -m app sim``: the calibrated simulator (serve it, or --calibrate in virtual time)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any

from core.durations import DurationError, parse_duration
from core.engines import DEFAULT as DEFAULT_ENGINE
from core.engines import NAMES as ENGINE_NAMES
from core.errors import UsageError
from core.settings import Settings

HELP = "run the simulated vLLM + gateway + GPUs on 127.0.0.1, or --calibrate it against the field report"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--calibrate", action="store_true", help="virtual-time sweep at 8, 16, 32 beside the report")
    parser.add_argument("--json", action="store_true", help="with --calibrate: print JSON")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = pick a free one)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (same seed, same run)")
    parser.add_argument("--max-num-seqs", type=int, default=32, help="vLLM --max-num-seqs")
    parser.add_argument("--max-model-len", type=int, default=8192, help="vLLM --max-model-len")
    parser.add_argument("--gateway-limit", type=int, default=16, help="requests the gateway lets through at once")
    parser.add_argument("--vllm-version", choices=("v1", "v0"), default="v1", help="metric names of vLLM V1 or V0")
    parser.add_argument("--engine", choices=ENGINE_NAMES, default=DEFAULT_ENGINE.name,
                        help="the engine whose metric names /metrics speaks (--vllm-version applies to vllm only)")
    parser.add_argument("--api-server-count", type=int, default=1, metavar="N",
                        help="as vLLM's: N > 1 serves /metrics in multiprocess mode (no *_created, no process_*)")
    parser.add_argument("--load", type=int, default=0, metavar="N",
                        help="built-in closed-loop load of N clients through the gateway (daily: peak clients)")
    parser.add_argument("--load-pattern", choices=("daily",), help="demand that rises and falls through the day")
    parser.add_argument("--speed", type=float, default=1.0, metavar="K", help="simulated time runs K× faster")
    parser.add_argument("--restart-every", metavar="DURATION", help="restart vLLM every DURATION of simulated time")
    parser.add_argument("--dcgm-interval", metavar="DURATION", default="30s",
                        help="dcgm-exporter reads the GPUs every DURATION of simulated time (its --collect-interval)")
    parser.add_argument("--slowdown", type=float, default=0.0, metavar="F",
                        help="fault knob: the GPUs do F (0–1) less work per second, e.g. 0.3; mid-run: "
                        "POST /admin/slowdown?fraction=F")
    parser.add_argument("--duration", type=float, default=600.0, help="with --calibrate: simulated seconds per level")
    parser.add_argument("--gpu-memory-utilization", type=float, default=None, metavar="F",
                        help="vLLM --gpu-memory-utilization (default 0.92): the KV cache's share of GPU memory")
    parser.add_argument("--levels", default="8,16,32", help="with --calibrate: concurrency levels, e.g. 64")


def execute(args: argparse.Namespace, settings: Settings) -> int:
    if args.calibrate:
        return _calibrate(args)
    return _serve(args)


def _config(args: argparse.Namespace) -> Any:
    from simulator import EngineConfig

    if args.max_num_seqs < 1 or args.max_model_len < 16:
        raise UsageError("--max-num-seqs must be ≥ 1 and --max-model-len ≥ 16")
    return EngineConfig(max_num_seqs=args.max_num_seqs, max_model_len=args.max_model_len)


def _params(args: argparse.Namespace) -> Any:
    from simulator.params import EngineParams

    share = args.gpu_memory_utilization
    if share is None:
        return EngineParams()
    if not 0.5 <= share <= 1.0:  # below half, the weights of the simulated model leave no KV cache
        raise UsageError(f"--gpu-memory-utilization must be between 0.5 and 1, not {share}")
    return EngineParams(gpu_memory_utilization=share)


def _calibrate(args: argparse.Namespace) -> int:
    from simulator.calibrate import REFERENCE, calibrate, misses

    try:
        levels = [int(part) for part in args.levels.split(",")]
    except ValueError:
        raise UsageError(f"--levels: not a comma-separated list of integers: {args.levels!r}") from None
    result = calibrate(levels, duration_s=args.duration, seed=args.seed, config=_config(args))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    reference = {r["concurrency"]: r for r in REFERENCE}
    print(f"{'concurrency':>11} {'tok/s':>14} {'TTFT P95 s':>14} {'E2E mean s':>14} {'QPS':>14} {'preempt':>8}")
    for level in result["levels"]:
        ref = reference.get(level["concurrency"], {})
        cells = [_cell(level[k], ref.get(k)) for k in ("tokens_per_s", "ttft_p95_s", "e2e_mean_s", "qps")]
        print(f"{level['concurrency']:>11} " + " ".join(f"{c:>14}" for c in cells) + f" {level['preemptions']:>8}")
    print("(simulated, report in brackets; 10 simulated minutes per level after 1 minute of warm-up)")
    problems = misses(result)
    for problem in problems:
        print(f"outside tolerance: {problem}")
    return 1 if problems else 0


def _cell(value: float | None, ref: float | None) -> str:
    text = "-" if value is None else f"{value:g}"
    return f"{text} [{ref:g}]" if ref is not None else text


def _serve(args: argparse.Namespace) -> int:
    from simulator import SimOptions, start_simulator

    try:
        restart_every = parse_duration(args.restart_every) if args.restart_every else None
    except DurationError as exc:
        raise UsageError(f"--restart-every: {exc}") from None
    try:
        dcgm_interval = parse_duration(args.dcgm_interval)
    except DurationError as exc:
        raise UsageError(f"--dcgm-interval: {exc}") from None
    if args.speed <= 0:
        raise UsageError("--speed must be greater than 0")
    if args.api_server_count < 1:
        raise UsageError("--api-server-count must be 1 or more")
    if not 0.0 <= args.slowdown < 1.0:
        raise UsageError(f"--slowdown: {args.slowdown:g} must be ≥ 0 and < 1 (0.3: the GPUs 30 % slower)")
    config = _config(args)
    options = SimOptions(port=args.port, seed=args.seed, max_num_seqs=config.max_num_seqs,
                         max_model_len=config.max_model_len, gateway_limit=args.gateway_limit,
                         vllm_version=args.vllm_version, engine=args.engine, api_servers=args.api_server_count,
                         load=args.load, load_pattern=args.load_pattern,
                         speed=args.speed, restart_every_s=restart_every, dcgm_interval_s=dcgm_interval,
                         params=_params(args), slowdown=args.slowdown)
    try:
        sim = start_simulator(options)
    except OSError as exc:
        raise UsageError(f"cannot listen on 127.0.0.1:{args.port} ({exc.strerror})", "Pick another --port") from None
    print(json.dumps(sim.urls), flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, lambda *_: sim.restart())
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        sim.stop()
    print("simulator stopped", file=sys.stderr)
    return 0
