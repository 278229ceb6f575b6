"""``python -m app collect``: the collector process (the one writer), or one round with ``--once``."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import sys
import threading
from collections.abc import Iterator

from app import scheduler
from core.durations import parse_duration
from core.errors import UsageError
from core.limits import LIMITS
from core.redact import masked
from core.settings import DEFAULT_TIMEOUT_SHARE, GatewaySettings, GpuSettings, Settings, TargetSettings
from core.text import named, visible
from core.url_check import url_problem

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
    """The target described by the ``--vllm-url`` family of flags; a bad URL names its flag."""
    for flag, url in (("--vllm-url", args.vllm_url), ("--gateway-url", args.gateway_url)):
        if url and url_problem(url):
            raise UsageError(f"{flag}: {url_problem(url)}")
    gateway = GatewaySettings()
    if args.gateway_url:
        if not args.gateway_metric:
            raise UsageError("--gateway-url needs --gateway-metric", "e.g. --gateway-metric litellm_in_flight_requests")
        gateway = GatewaySettings(kind="prometheus", url=args.gateway_url, metric=args.gateway_metric)
    gpu = GpuSettings()
    if args.gpu == "nvml":
        gpu = GpuSettings(source="nvml")
    elif args.gpu.startswith("http"):
        if url_problem(args.gpu):
            raise UsageError(f"--gpu: {url_problem(args.gpu)}")
        gpu = GpuSettings(source="dcgm", url=args.gpu)
    elif args.gpu != "none":
        raise UsageError(f"--gpu {args.gpu!r} is not nvml, none or a dcgm-exporter URL")
    return TargetSettings(name=args.name, vllm_url=args.vllm_url, gateway=gateway, gpu=gpu)


def effective_settings(args: argparse.Namespace, settings: Settings) -> Settings:
    if args.vllm_url:
        settings = dataclasses.replace(settings, targets=(quick_target(args),))
    if args.interval:
        interval = parse_duration(args.interval)
        if not LIMITS["interval_s"].allows(interval):
            raise UsageError(f"--interval: {args.interval!r} is out of range; it must be {LIMITS['interval_s'].text()}")
        # a scrape ends, and its round is stored, before the next round starts
        settings = dataclasses.replace(settings, interval_s=interval,
                                       scrape_timeout_s=min(settings.scrape_timeout_s, DEFAULT_TIMEOUT_SHARE * interval))
    if not any(t.vllm_url for t in settings.targets) and not settings.prometheus:
        raise UsageError(
            "no target to collect from",
            "Pass --vllm-url http://HOST:PORT/metrics, or name [[targets]] or [[prometheus]] in the config file (--config)",
        )
    return settings


def _name_flags(text: str, flags: dict[str, str]) -> str:
    return named(text, flags)


class _FlagNames(logging.Filter):
    """Rewrites each log record as :func:`_name_flags` does the printed lines: the collector's
    warnings name the settings (``targets[].vllm_url``) of a target the user gave as flags."""

    def __init__(self, flags: dict[str, str]) -> None:
        super().__init__()
        self.flags = flags

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = _name_flags(record.getMessage(), self.flags), None
        return True


@contextlib.contextmanager
def _logs_name(flags: dict[str, str]) -> Iterator[None]:
    """While inside, every handler of the root logger (where every module's records end) names ``flags``."""
    handlers, names = logging.getLogger().handlers if flags else [], _FlagNames(flags)
    for handler in handlers:
        handler.addFilter(names)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(names)


def _once_status(settings: Settings, flags: dict[str, str]) -> int:
    """1 when a target's vLLM could not be read in the round just stored (a line each on stderr), else 0.

    The failed round is stored (that is what the collector does with it); a script running
    ``collect --once`` to check a target still learns from the exit status that it is down.
    """
    from db.queries import Reader

    stored = {t.name: t for t in Reader(settings.db_url).targets()}
    down = [stored[t.name] for t in settings.targets if t.name in stored and stored[t.name].up is False]
    for info in down:
        print(_name_flags(f"ERROR: target {visible(info.name)} is down: {visible(info.last_error, 2000)}", flags), file=sys.stderr)
    return 1 if down else 0


def execute(args: argparse.Namespace, settings: Settings) -> int:
    from app.collection import CollectionService

    settings = effective_settings(args, settings)
    service = CollectionService(settings)
    try:
        # A target made from flags: its errors name the flag (the stored hints name the setting).
        flags = {"targets[].vllm_url": "--vllm-url", "targets[].gateway.url": "--gateway-url",
                 "targets[].gpu.url": "--gpu", "targets[].gpu.source = none or dcgm": "--gpu none or --gpu DCGM_URL",
                 "targets[].gpu.source": "--gpu"} if args.vllm_url else {}  # fmt: skip
        # and what it stores: the dashboard and status, run elsewhere, name the flag too
        service.writer.names = service.evaluator.names = flags
        if args.once:
            with _logs_name(flags):
                lines = service.collect_once()
            for line in lines:
                print(_name_flags(line, flags))
            for job in service.prometheus if service.turn.holding else ():
                for line in job.run():
                    print(line)
            return _once_status(settings, flags)
        stop = threading.Event()
        scheduler.install_signal_handlers(stop)  # a SIGTERM from now on stops after the round in flight
        sources = f" and {len(settings.prometheus)} Prometheus source(s)" if settings.prometheus else ""
        print(service.turn.start_line(f"collecting {len(settings.targets)} target(s){sources} every "
                                      f"{settings.interval_s:g} s into {masked(settings.db_url)}"), flush=True)
        with _logs_name(flags):
            service.run_forever(stop)
    finally:
        service.close()
    return 0

