"""The collector service: the one writer process. Wires collectors, the writer and the scheduler."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from app import scheduler
from app.jobs import RoundCollector, describe_round
from core.settings import Settings

log = logging.getLogger(__name__)

ROLLUP_EVERY_S = 60.0
RETENTION_EVERY_S = 3600.0


class CollectorService:
    """Collect every target each interval, roll up each minute, apply retention each hour, evaluate the
    alert rules every ``alerts.evaluate_every_s`` (while this process holds the evaluator's lease)."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        from db.engine import open_engine
        from db.writer import Writer

        self.settings = settings
        self.clock = clock
        self.engine = open_engine(settings.db_url)
        self.writer = Writer(self.engine)
        for target in settings.targets:
            self.writer.register_target(target)
        self.rounds = RoundCollector(settings, clock)
        # Jobs run in scheduler threads; SQLite takes one writer at a time, so the collect, rollup and
        # retention jobs take turns on this lock (scrapes themselves happen outside it).
        self.write_lock = threading.Lock()
        from app.alerts.evaluator import Evaluator

        # Alerts are evaluated here, in the one writer process, never in the UI (docs/alerts.md).
        self.evaluator = Evaluator(self.engine, settings, clock, self.write_lock)
        self.collected = threading.Event()  # set once a round was stored: alerts wait for it

    def collect_once(self, describe: bool = True) -> list[str]:
        """One round for every target, each written in its own transaction; returns what was stored
        (one line per target, in the targets' order), or nothing when ``describe`` is False."""
        lines: dict[str, str] = {}
        failure: Exception | None = None
        # Every target's requests leave at once; each round is written as soon as its sources are in.
        for round_ in self.rounds.collect_all(self.settings.targets):
            try:
                with self.write_lock:
                    self.writer.write_round(round_)
            except Exception as exc:
                # Each round is its own transaction: one target's failed write costs that round only.
                # The first failure is raised once every target had its turn (the job logs it).
                log.warning("%s: this round was not stored: %s", round_.target, exc)
                failure = failure or exc
                continue
            if describe:
                lines[round_.target] = describe_round(round_)
        if failure is not None:
            raise failure
        return [lines[target.name] for target in self.settings.targets if target.name in lines]

    def rollup(self) -> str:
        from db.rollup import rollup

        with self.write_lock:
            return str(rollup(self.engine, self.clock()))

    def retention(self) -> str:
        from db.rollup import apply_retention

        with self.write_lock:
            return str(apply_retention(self.engine, self.clock(), self.settings))

    def jobs(self) -> list[scheduler.Job]:
        return [
            scheduler.Job("collect", self._collect_logged, self.settings.interval_s),
            scheduler.Job("rollup", self.rollup, ROLLUP_EVERY_S),
            scheduler.Job("retention", self.retention, RETENTION_EVERY_S),
            scheduler.Job("alerts", self.evaluate, self.settings.alerts.evaluate_every_s),
        ]

    def _collect_logged(self) -> None:
        # The description is formatted only when someone reads it (-v): this runs every interval.
        try:
            for line in self.collect_once(describe=log.isEnabledFor(logging.DEBUG)):
                log.debug("%s", line)
        finally:
            self.collected.set()

    def evaluate(self) -> str:
        """The alerts job: evaluates once this process's first round is in, so a start does not store
        a "never scraped" no_data spell for every rule (the jobs all start at once)."""
        if not self.collected.is_set():
            return "alert evaluator: waiting for the first round"
        return self.evaluator.run()

    def run_forever(self, stop: threading.Event | None = None) -> None:
        scheduler.run_until_stopped(self.jobs(), stop)

    def close(self) -> None:
        self.evaluator.release()
        self.rounds.close()
        self.writer.close()
        self.engine.dispose()
