"""``python -m app collect``: the collector process (the one writer), or one round with ``--once``."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import threading

from app import scheduler
from core.durations import parse_duration
from core.errors import UsageError
from core.settings import GatewaySettings, GpuSettings, Settings, TargetSettings

HELP = "poll every target's vLLM, gateway and GPUs into the database (--once: one round, printed)"
log = logging.getLogger(__name__)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--once", action="store_true", help="run one round, print what was stored, exit")
    parser.add_argument("--db", metavar="URL", help="database URL (sqlite:///path, postgresql://user@host/db)")
    parser.add_argument("--interval", metavar="DURATION", help="scrape interval, e.g. 5s (default: interval_s)")
    quick = parser.add_argument_group("single target without a config file")
    quick.add_argument("--vllm-url", metavar="URL", help="vLLM metrics URL, e.g. http://127.0.0.1:8000/metrics")
    quick.add_argument("--name", default="default", help="target name (default: default)")
    quick.add_argument("--gateway-url", metavar="URL", help="gateway Prometheus metrics URL")
    quick.add_argument("--gateway-metric", metavar="NAME", help="gateway queue-depth metric (or a preset name)")
    quick.add_argument("--gpu", metavar="SOURCE", default="none", help="nvml, none, or a dcgm-exporter URL")


def quick_target(args: argparse.Namespace) -> TargetSettings:
    """The target described by the ``--vllm-url`` family of flags."""
    gateway = GatewaySettings()
    if args.gateway_url:
        if not args.gateway_metric:
            raise UsageError("--gateway-url needs --gateway-metric", "e.g. --gateway-metric litellm_in_flight_requests")
        gateway = GatewaySettings(kind="prometheus", url=args.gateway_url, metric=args.gateway_metric)
    gpu = GpuSettings()
    if args.gpu == "nvml":
        gpu = GpuSettings(source="nvml")
    elif args.gpu.startswith("http"):
        gpu = GpuSettings(source="dcgm", url=args.gpu)
    elif args.gpu != "none":
        raise UsageError(f"--gpu {args.gpu!r} is not nvml, none or a dcgm-exporter URL")
    return TargetSettings(name=args.name, vllm_url=args.vllm_url, gateway=gateway, gpu=gpu)


def effective_settings(args: argparse.Namespace, settings: Settings) -> Settings:
    if args.vllm_url:
        settings = dataclasses.replace(settings, targets=(quick_target(args),))
    if args.interval:
        settings = dataclasses.replace(settings, interval_s=parse_duration(args.interval))
    if not any(t.vllm_url for t in settings.targets):
        raise UsageError(
            "no target to collect from",
            "Pass --vllm-url http://HOST:PORT/metrics, or name [[targets]] in the config file (--config)",
        )
    return settings


def execute(args: argparse.Namespace, settings: Settings) -> int:
    from app.collector import CollectorService

    settings = effective_settings(args, settings)
    service = CollectorService(settings)
    try:
        if args.once:
            for line in service.collect_once():
                print(line)
            return 0
        stop = threading.Event()
        scheduler.install_signal_handlers(stop)  # a SIGTERM from now on stops after the round in flight
        print(f"collecting {len(settings.targets)} target(s) every {settings.interval_s:g} s into {settings.db_url}")
        service.run_forever(stop)
    finally:
        service.close()
    return 0

