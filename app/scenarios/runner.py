"""One scenario through the product itself: its scrapes parsed and stored as the collector does,
the alert evaluator run at its cadence on the scenario's clock, and the verdicts it stores.

Nothing here judges: the simulator's exposition texts go through ``rounds_from_history``'s parsers
(the collector's) into the Writer, :class:`app.alerts.evaluator.Evaluator` evaluates every rule at
each tick of virtual time (the rounds up to that instant written first, as live), and the runner
keeps the transitions it returns and reads the minutes' verdicts it stored (db/verdicts.py). The
target is the demo's (the simulated reference deployment), whose sweet spot and curve the
product resolves itself (app/sweet_spot.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from app.alerts.evaluator import Evaluator
from app.alerts.model import Transition
from app.backfill import OK, rounds_from_history
from app.commands.run import demo_target
from app.scenarios.library import EPOCH, Scenario
from collectors.records import ScrapeRound, SourceResult
from core.settings import DEMO_TARGET, Settings, TargetSettings
from db import verdicts
from db.engine import open_engine
from db.results import SweepRun
from db.sweeps import store_sweep
from db.writer import Writer
from simulator.scenario import ScenarioSample, scenario_history

_NEVER_READ = "http://127.0.0.1:1"  # the scenario's history is written, not scraped


@dataclass(frozen=True)
class Run:
    """What the product did over one scenario: unix-second timestamps, ``start`` the scenario's."""

    scenario: Scenario
    start: float
    transitions: tuple[Transition, ...]
    verdicts: tuple[verdicts.StoredVerdict, ...]
    evaluations: int


def scenario_target() -> TargetSettings:
    base = _NEVER_READ
    return demo_target({"vllm_metrics": f"{base}/metrics", "gateway_metrics": f"{base}/gateway/metrics",
                        "dcgm_metrics": f"{base}/dcgm/metrics"})  # fmt: skip


def samples(scenario: Scenario) -> Iterator[ScenarioSample]:
    """The scenario's scrapes, from its start (:data:`EPOCH`) to its end."""
    return scenario_history(lambda ts: scenario.conditions_at(ts - EPOCH), EPOCH, EPOCH + scenario.duration_s,
                            scenario.step_s, scenario.seed)


def rounds(target: TargetSettings, scenario_samples: Iterator[ScenarioSample]) -> Iterator[ScrapeRound]:
    """The ScrapeRounds the collector would have built: a refused ``/metrics`` is a failed round."""
    for s in scenario_samples:
        if s.sample is None:
            failed = SourceResult(False, s.error)
            yield ScrapeRound(target=target.name, ts=s.ts, vllm=None, vllm_status=failed, gateway_status=OK, gpu_status=OK)
        else:
            yield from rounds_from_history(target, iter([s.sample]))


def planned_sweep(scenario: Scenario, target: TargetSettings) -> SweepRun | None:
    """The sweep a ``sweep`` scenario's phases are, as the command stores it at its start (levels to
    come, its planned end), or None."""
    if not scenario.sweep or not scenario.phases:
        return None
    start, end = scenario.phases[0].start_s, scenario.phases[-1].end_s
    return SweepRun(EPOCH + start, target.vllm_url, "scenario", "scenario", 3.0, (), {}, target=target.name, ends_at=EPOCH + end)


def run(scenario: Scenario, workdir: Path) -> Run:
    """Run ``scenario`` through the product on a fresh SQLite file under ``workdir``."""
    url = f"sqlite:///{workdir / (scenario.name + '.db')}"
    engine = open_engine(url)
    try:
        target = scenario_target()
        settings = Settings(db_url=url, targets=(target,))
        writer = Writer(engine)
        writer.register_target(target)
        evaluator = Evaluator(engine, settings, clock=lambda: EPOCH)
        every = scenario.evaluate_every_s
        pending: list[ScrapeRound] = []
        transitions: list[Transition] = []
        tick, evaluations = EPOCH + every, 0
        sweep = planned_sweep(scenario, target)
        for r in rounds(target, samples(scenario)):
            while r.ts > tick:  # every round up to the tick is stored before the tick's evaluation
                writer.write_rounds(iter(pending))
                pending = []
                if sweep is not None and tick >= sweep.started_at:  # `python -m app sweep` starts now
                    store_sweep(engine, sweep)
                    sweep = None
                transitions += evaluator.evaluate_once(tick)
                evaluations += 1
                tick += every
            pending.append(r)
        writer.write_rounds(iter(pending))
        with engine.connect() as conn:
            stored = verdicts.read(conn, DEMO_TARGET, EPOCH, EPOCH + scenario.duration_s)
        return Run(scenario, EPOCH, tuple(transitions), tuple(stored), evaluations)
    finally:
        engine.dispose()
