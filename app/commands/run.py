"""``python -m app run``: the whole product in one command (the README's first line).

With real targets configured it runs the collector and the UI. With none (a fresh machine), it starts
the built-in simulator of the reference deployment with its daily load pattern, backfills a week of
simulated history through the normal ingestion path on the first start, then collects live.
Ctrl-C (or SIGTERM) stops every part cleanly: the UI process, the collector after its round in
flight, then the simulator.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING

from app import scheduler
from core.durations import parse_duration
from core.errors import UsageError
from core.redact import masked
from core.settings import (
    DEMO_TARGET,
    REFERENCE_CEILING,
    CeilingSettings,
    GatewaySettings,
    GpuSettings,
    Settings,
    TargetSettings,
)

if TYPE_CHECKING:
    from app.collection import CollectionService
    from app.history_fill import HistoryFill
    from simulator import RunningSim

HELP = "start the product: collector + dashboard (+ the simulator with a week of history when no target is set)"
BACKFILL_STEP_S = 30.0
log = logging.getLogger(__name__)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="URL", help="database URL (default: db_url, a SQLite file under ./data/)")
    parser.add_argument("--no-ui", action="store_true", help="run without the dashboard")
    parser.add_argument("--backfill", metavar="DURATION", default="7d", help="simulated history on first start (0: none)")
    parser.add_argument("--seed", type=int, default=0, help="simulator seed (demo only)")
    parser.add_argument("--port", type=int, help="dashboard port (default: ui.port, 8501)")


def demo_target(urls: dict[str, str]) -> TargetSettings:
    """The target that watches the simulator: its vLLM, its gateway queue and its 8 dcgm GPUs. Its
    model's shape (Llama-3-70B AWQ g128, the table's row for the simulator's served name) gives the
    weights a step reads (37.67 GB), the KV bytes a token and the active parameters: none is typed;
    the collector reads them when the first page names the model (app/model_shapes.py)."""
    return TargetSettings(
        name=DEMO_TARGET,
        vllm_url=urls["vllm_metrics"],
        gateway=GatewaySettings(preset="sweetspot-sim", kind="prometheus", url=urls["gateway_metrics"],
                                metric="sweetspot_gateway_queue_depth"),
        gpu=GpuSettings(source="dcgm", url=urls["dcgm_metrics"]),
        # The reference deployment's TP and bandwidth, configured here and nowhere else (a real target
        # without them has no ceiling): dcgm-exporter cannot tell peak bandwidth, the simulated V100s
        # have the datasheet's 900 GB/s. Weights, KV bytes a token and active parameters: the shape's.
        ceiling=CeilingSettings(tensor_parallel=REFERENCE_CEILING.tensor_parallel, bandwidth_gbps=REFERENCE_CEILING.bandwidth_gbps),
        max_num_seqs=_sim_max_num_seqs(),  # the simulator's engine runs at most this many (the report's fix: 32)
        reference=True,  # its sweet spot and curve are the report's (source "reference")
    )


def _sim_max_num_seqs() -> int:
    from simulator.options import SimOptions

    return SimOptions.max_num_seqs


def has_history(db_url: str, target: str) -> bool:
    from db.queries import Reader

    return any(t.name == target and t.last_scrape_at is not None for t in Reader(db_url).targets())


def execute(args: argparse.Namespace, settings: Settings) -> int:
    from app.collection import CollectionService

    backfill_s = parse_duration(args.backfill)  # a bad flag fails before anything starts
    if not args.no_ui:
        from app.commands.ui import refuse_open_public, refuse_taken_port

        refuse_open_public(settings, settings.ui.address)
        port = args.port or settings.ui.port
        refuse_taken_port(settings.ui.address, port, "PORT={port} make run, --port {port}, or ui.port in the config file")
    sim = service = ui = None
    try:
        # The dashboard first (Streamlit takes seconds to start: the rest is done meanwhile), the history
        # behind it: the week fills in while the live collection runs (app/history_fill.py), and the
        # pages say how far it has come.
        if not args.no_ui:
            ui = _start_ui(args, settings)
        if not any(t.vllm_url for t in settings.targets) and not settings.prometheus:
            sim = _start_simulator(settings, args.seed)
            settings = dataclasses.replace(settings, targets=(demo_target(sim.urls),))
        service = CollectionService(settings)
        fill = _history_fill(service, settings, backfill_s, args.seed) if sim is not None else None
        stop = threading.Event()
        scheduler.install_signal_handlers(stop)  # before the line below invites a Ctrl-C
        print(service.turn.start_line(f"collecting {', '.join(t.name for t in settings.targets)} every "
                                      f"{settings.interval_s:g} s into {masked(settings.db_url)}; Ctrl-C stops everything"),
              flush=True)  # fmt: skip
        if fill is not None:
            fill.start()
        service.run_forever(stop)
    finally:
        _stop_ui(ui)
        if service is not None:
            service.close()
        if sim is not None:
            sim.stop()
    return 0


def _start_simulator(settings: Settings, seed: int) -> RunningSim:
    if not settings.simulator:
        raise UsageError("no target has a vllm_url and simulator = false",
                         "Name a [[targets]] vllm_url in the config file, or set simulator = true")
    from simulator import SimOptions, start_simulator

    sim = start_simulator(SimOptions(port=0, seed=seed, load_pattern="daily"))
    print(f"simulator of the reference deployment (8x V100, 70B AWQ, TP 8) serving {sim.urls['openai_base']}",
          flush=True)
    return sim


def _history_fill(service: CollectionService, settings: Settings, span_s: float, seed: int) -> HistoryFill | None:
    """The demo's week, begun (its first batch written before the first live round) on the first
    start; None when there is history already or no history is asked for."""
    from app.history_fill import HistoryFill, describe, interrupted

    target = settings.targets[0]
    if span_s <= 0 or has_history(settings.db_url, target.name):
        interrupted(service.engine, target.name, time.time())  # a fill cut short by a stop says so, once
        return None
    if not service.turn.take():
        print("first start: another collector writes to this database; no simulated history written", flush=True)
        return None
    now = time.time()
    print(describe(span_s, BACKFILL_STEP_S), flush=True)
    fill = HistoryFill(service, target, now - span_s, now - settings.interval_s, BACKFILL_STEP_S, seed)
    fill.begin()
    return fill


def _start_ui(args: argparse.Namespace, settings: Settings) -> subprocess.Popen[bytes]:
    from app.commands.ui import child_environment, streamlit_command

    port = args.port or settings.ui.port
    command = streamlit_command(settings, port, settings.ui.address)
    # The UI is its own process group so the terminal's Ctrl-C reaches us first and we stop it in order.
    ui = subprocess.Popen(command, env=child_environment(args, settings, dict(os.environ)), start_new_session=True)
    print(f"dashboard: http://{settings.ui.address}:{port}/", flush=True)
    return ui


def _stop_ui(ui: subprocess.Popen[bytes] | None) -> None:
    if ui is None or ui.poll() is not None:
        return
    ui.terminate()
    try:
        ui.wait(timeout=10)
    except subprocess.TimeoutExpired:
        ui.kill()
        print("dashboard did not stop within 10 s and was killed", file=sys.stderr)

