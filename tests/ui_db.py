"""Databases for the UI tests and the benchmark: the simulator's history, parsed by the real
collectors' parsers, written by the real writer, rolled up by the real rollup.

``demo`` is healthy history up to now; ``edge`` was scraped for an hour and has been down for the
last ten minutes (failed rounds with the error a refused connection gives); ``sglang`` is an hour of
the simulator speaking SGLang's names.
"""

from __future__ import annotations

import functools
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from collectors.dcgm import parse_dcgm
from collectors.gateway import queue_from_prometheus
from collectors.records import GatewayReading, ScrapeRound, SourceResult
from collectors.vllm import parse_vllm
from core.settings import REFERENCE_CEILING, GatewaySettings, GpuSettings, TargetSettings
from db.engine import open_engine
from db.results import SweepLevel, SweepRun
from db.rollup import rollup
from db.sweeps import store_sweep
from db.writer import Writer
from simulator import generate_history

GATEWAY_METRIC = "sweetspot_gateway_queue_depth"
DOWN_ERROR = "cannot reach http://127.0.0.1:8000/metrics (connection refused)"
# GPUs are read every round, as the collector does; the benchmark thins its old history with this.
GPU_EVERY_S = 0.0


def target_settings(name: str) -> TargetSettings:
    return TargetSettings(
        name=name,
        vllm_url="http://127.0.0.1:8000/metrics",
        gateway=GatewaySettings(preset="sweetspot-sim", kind="prometheus", url="http://127.0.0.1:8001/metrics", metric=GATEWAY_METRIC),
        gpu=GpuSettings(source="dcgm", url="http://127.0.0.1:9400/metrics"),
        ceiling=REFERENCE_CEILING,  # the simulated reference deployment, configured as the demo does
    )  # fmt: skip


def simulated_rounds(
    target: str, start: float, end: float, step_s: float, seed: int = 0, down_after: float | None = None,
    engine: str = "vllm",
) -> Iterator[ScrapeRound]:
    """Rounds as the collector would make them from the simulator's three endpoints."""
    next_gpu = start
    for sample in generate_history(start, end, step_s, seed=seed, engine=engine):
        if down_after is not None and sample.ts >= down_after:
            yield ScrapeRound(target, sample.ts, None, SourceResult(False, DOWN_ERROR))
            continue
        gpus = ()
        if sample.ts >= next_gpu:
            gpus, next_gpu = parse_dcgm(sample.dcgm, peak_bw_gbps=900.0), sample.ts + GPU_EVERY_S
        gateway = GatewayReading(queue_from_prometheus(sample.gateway, GATEWAY_METRIC), "sweetspot-sim")
        ok = SourceResult(True, duration_s=0.004)
        yield ScrapeRound(target, sample.ts, parse_vllm(sample.vllm), ok, gateway, ok, gpus, ok if gpus else None)


def fill(path: Path, now: float, hours: float = 1.0, step_s: float = 5.0) -> str:
    """``demo`` and ``edge`` (see the module docstring) in a new SQLite file; returns its URL."""
    url = f"sqlite:///{path}"
    engine = open_engine(url)
    writer = Writer(engine)
    for name in ("demo", "edge", "sglang"):
        writer.register_target(target_settings(name))
    writer.write_rounds(simulated_rounds("demo", now - hours * 3600, now, step_s))
    writer.write_rounds(simulated_rounds("edge", now - 3600, now, step_s, seed=2, down_after=now - 600))
    writer.write_rounds(simulated_rounds("sglang", now - 3600, now, step_s, seed=3, engine="sglang"))
    rollup(engine, now)
    evaluate_alerts(engine, url, now)
    engine.dispose()
    return url


def evaluate_alerts(engine: Any, url: str, now: float) -> None:
    """What the collector's evaluator would have stored: two evaluations two minutes apart (``edge``
    has been down for ten: its target_down alert fires), and a silence on it."""
    from app.alerts.evaluator import Evaluator
    from app.alerts.model import Silence
    from app.alerts.silences import add_silence
    from core.settings import Settings

    settings = Settings(db_url=url, targets=(target_settings("demo"), target_settings("edge")))
    evaluator = Evaluator(engine, settings)
    evaluator.evaluate_once(now - 120)
    evaluator.evaluate_once(now)
    add_silence(engine, Silence({"target": "edge"}, int(now), int(now + 3600), "ops", "edge is being rebuilt", int(now)))


@functools.cache
def shared() -> str:
    """One database filled up to the first call, per test process (AppTest and browser modules share it)."""
    return fill(Path(tempfile.mkdtemp(prefix="sweetspot-ui-")) / "sweetspot.db", time.time())


def empty(path: Path) -> str:
    """A migrated database nothing was collected into."""
    url = f"sqlite:///{path}"
    open_engine(url).dispose()
    return url


DEMO_URLS = {"vllm_metrics": "http://127.0.0.1:8000/metrics", "gateway_metrics": "http://127.0.0.1:8001/metrics",
             "dcgm_metrics": "http://127.0.0.1:9400/metrics"}  # fmt: skip
LIVE_S = 600.0  # the demo's live rounds (every 5 s) after its backfilled history


def demo(path: Path, now: float, days: float = 7.0) -> str:
    """The database ``python -m app run`` makes on a fresh machine, ``LIVE_S`` after its first start.

    A week of history backfilled by the demo's own path (app/backfill.py, one round per 30 s), then
    live rounds every 5 s, rolled up and with the raw retention applied as the collector does, and the
    alert states its evaluator stores (:func:`evaluate_alerts`); plus ``edge``, down for its last ten
    minutes. The demo's ceiling inputs are its model's shape, stored as the collector stores them when
    the first page names the served model (app/collection.py ``_shape``).
    """
    from app.alerts.replay import judge_history
    from app.backfill import backfill
    from app.commands.run import BACKFILL_STEP_S, demo_target
    from app.model_shapes import shaped
    from core.settings import Settings
    from db import epochs
    from db.rollup import apply_retention
    from simulator.options import SimOptions

    url = f"sqlite:///{path}"
    engine = open_engine(url)
    writer = Writer(engine)
    target = demo_target(DEMO_URLS)
    writer.register_target(target)
    writer.register_target(target_settings("edge"))
    backfill(writer, target, now - days * 86400, now - LIVE_S, BACKFILL_STEP_S)
    epochs.forget_start(engine, target.name)  # the live engine continues the history, as app/history_fill.py has it
    writer = Writer(engine)  # the live collector's: it reads the history's last round and states from the database
    writer.write_rounds(simulated_rounds("demo", now - LIVE_S + 5, now, 5.0, seed=1))
    writer.write_rounds(simulated_rounds("edge", now - 3600, now, 5.0, seed=2, down_after=now - 600))
    filled, shape = shaped(target, SimOptions.model, "")
    assert shape is not None, f"the table of known architectures has no row for {SimOptions.model}"
    writer.register_target(filled, shape_source=shape.source)
    rollup(engine, now)
    judge_history(engine, Settings(db_url=url, targets=(target,)), target.name, now - days * 86400, now)  # as the fill does
    apply_retention(engine, now, Settings())
    store_sweep(engine, demo_sweep(now - 2 * 86400, "http://127.0.0.1:8000/v1", "demo"))
    store_sweep(engine, demo_sweep(now - 86400, "http://10.0.0.9:8000/v1", None))  # another server
    evaluate_alerts(engine, url, now)  # the collector evaluates the alert rules after its rounds
    engine.dispose()
    return url


def demo_sweep(at: float, url: str, target: str | None) -> SweepRun:
    """A stored load sweep shaped like the report's (8 → 85, 16 → 126, 32 → 145 tok/s)."""
    levels = tuple(
        SweepLevel(c, 600, 100, 0, tok, 0.3, 0.8, ttft, ttft * 1.2, 0.08, 40.0, 60.0, 0.0)
        for c, tok, ttft in ((8, 85.0, 1.5), (16, 126.0, 2.4), (32, 145.0, 4.8))
    )
    return SweepRun(at, url, "sweetspot/sim-70b-awq", "short:0.6,long:0.4", 3.0, levels, target=target)
