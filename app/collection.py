"""The collection service, ``python -m app collect``'s one writer process: each interval a round of
every target (read by app.jobs.RoundReader, parsed by the collectors of ``collectors/``), stored by
the writer; rollups, retention, alert evaluation and e-mail on the same scheduler."""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from app import scheduler
from app.alerts.model import AlertState
from app.jobs import RoundReader, describe_round
from core.durations import format_duration
from core.settings import (
    Settings,
    SweetSpotSettings,
    effective_sweetspot,
    is_reference,
    require_scrape_tokens,
    stale_after,
)

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from app.prometheus_source import PrometheusJob
    from db.writer import Writer

log = logging.getLogger(__name__)


def _prometheus_jobs(settings: Settings, writer: Writer, engine: Engine, lock: threading.Lock,
                     clock: Callable[[], float], observe: Callable[[Any], object]) -> list[PrometheusJob]:  # fmt: skip
    from app.prometheus_source import PrometheusJob, PrometheusSource
    from core.text import NameClaims

    claims = NameClaims([t.name for t in settings.targets])  # one for all sources: one instance, one target
    return [PrometheusJob(PrometheusSource(settings, s, clock, claims), writer, engine, lock, observe) for s in settings.prometheus]

ROLLUP_EVERY_S = 60.0
RETENTION_EVERY_S = 3600.0
NOTIFY_EVERY_S = 5.0  # a group's e-mail leaves within this long of its group_wait / group_interval
DIGEST_EVERY_S = 60.0


def sweetspot_pairs(settings: Settings) -> list[tuple[str, SweetSpotSettings]]:
    """The thresholds each target is judged by (the global ones with its ``targets[].sweetspot``
    overrides, as the alert rules see them), and the global ones under "*" for targets without a row."""
    from app.sweet_spot import REFERENCE_KNEE
    from db.thresholds import EVERY_TARGET

    own = [(t.name, effective_sweetspot(settings, t.name)) for t in settings.targets]
    # the demo's sweet spot is the report's (app/sweet_spot.py); a sweep's or a learned one moves with
    # the history and is not stored here (NULL: none configured)
    own = [(n, dataclasses.replace(s, concurrency=REFERENCE_KNEE) if s.concurrency is None and is_reference(settings, n) else s)
           for n, s in own]  # fmt: skip
    return [(EVERY_TARGET, settings.sweetspot), *own]


class CollectionService:
    """Collect every target each interval, roll up each minute, apply retention each hour, evaluate the
    alert rules every ``alerts.evaluate_every_s`` (while this process holds the evaluator's lease)."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        from db.engine import open_engine
        from db.thresholds import write_thresholds
        from db.writer import Writer

        require_scrape_tokens(settings)  # before anything is opened: a scrape without its token is refused
        self.settings = settings
        self.clock = clock
        self.engine = open_engine(settings.db_url)
        self.writer = Writer(self.engine, clock=clock)  # judges a clock step back by the rounds' own clock
        for target in settings.targets:
            self.writer.register_target(target, stale_after(settings))
        # a stored target this collector is not configured with: "not configured any more", not "down"
        for name in self.writer.retire_unconfigured([t.name for t in settings.targets], clock()):
            log.info("target %s is not configured any more: kept, listed %s more, never read (python -m app targets "
                     "drop %s removes it)", name, format_duration(settings.retired_shown_s), name)
        write_thresholds(self.engine, sweetspot_pairs(settings))
        self.rounds = RoundReader(settings, clock)
        self._shaped: set[str] = set()  # targets whose model shape was looked up (app/model_shapes.py)
        # Jobs run in scheduler threads; SQLite takes one writer at a time, so the collect, rollup and
        # retention jobs take turns on this lock (scrapes themselves happen outside it).
        self.write_lock = threading.Lock()
        from app.alerts.evaluator import Evaluator

        # Alerts are evaluated here, in the one writer process, never in the UI (docs/alerts.md).
        self.evaluator = Evaluator(self.engine, settings, clock, self.write_lock)
        from app.write_turn import WriteTurn

        self.turn = WriteTurn(self.engine, settings, clock, self.write_lock, self.evaluator.holder)
        self.collected = threading.Event()  # set once a round was stored: alerts wait for it
        # An evaluation and a notification run also right after a round that found a target down (or
        # back): the scheduled job and that one never run at once (each loads and saves every state).
        self._evaluating, self._notifying = threading.Lock(), threading.Lock()
        self._up: dict[str, bool] = {}  # target → whether its last stored round's vLLM scrape succeeded
        # set by a round that found a target down, or back up: the stamp (unix s) the evaluation must reach
        self._urgent = 0.0
        self.stored = threading.Event()  # set once this process wrote a round (not a standby round)
        self.history_filling = threading.Event()  # set while the demo's week is written behind the live rounds
        from app.notify.notifier import Notifier

        # silences and mute windows hold notifications back; the lease holder alone delivers
        self.notifier = Notifier(self.engine, settings, clock, self._muted, self.write_lock, self._leading)
        self._silences: tuple[float, list[Any]] = (math.nan, [])
        from app.telemetry import Telemetry

        self.telemetry = Telemetry(clock)
        self.prometheus = _prometheus_jobs(settings, self.writer, self.engine, self.write_lock, clock, self.telemetry.observe_round)
        self.telemetry.read_at_scrape(self.writer.rows_written, self.notifier.delivered, lambda: self.evaluator.derived,
                                      self._backlog)  # fmt: skip

    def collect_once(self, describe: bool = True) -> list[str]:
        """One round for every target, each written in its own transaction; returns what was stored
        (one line per target, in the targets' order), or nothing when ``describe`` is False."""
        if not self.turn.take():  # another collector writes to this database (said once)
            return [self.turn.standby_line()] if describe else []
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
            self.telemetry.observe_round(round_)
            self._note_health(round_.target, round_.vllm_status.ok, round_.ts)
            self._shape(round_)
            if describe:
                lines[round_.target] = describe_round(round_)
        if failure is not None:
            raise failure
        return [lines[target.name] for target in self.settings.targets if target.name in lines]

    def _shape(self, round_: Any) -> None:
        """Once per target, when a page first names its model: fill the ceiling inputs its settings
        leave unset from the model's shape (app/model_shapes.py) and store where they came from."""
        if round_.target in self._shaped or round_.vllm is None or not round_.vllm.models:
            return
        self._shaped.add(round_.target)
        target = next((t for t in self.settings.targets if t.name == round_.target), None)
        if target is None:
            return
        from app.model_shapes import shaped

        filled, shape = shaped(target, next(iter(round_.vllm.models)), self.settings.hf_cache_dir)
        if shape is not None:
            with self.write_lock:
                self.writer.register_target(filled, stale_after(self.settings), shape_source=shape.source)

    def rollup(self) -> str:
        from db.rollup import rollup, written_text

        if not self.turn.holding:
            return "rollup: another collector writes to this database"
        with self.write_lock:
            return f"rollups written: {written_text(rollup(self.engine, self.clock()))}"

    def retention(self) -> str:
        from db.rollup import apply_retention

        if not self.turn.holding:
            return "retention: another collector writes to this database"
        if self.history_filling.is_set():  # its days are rolled up from raw rows older than raw_retention_s
            return "retention: waits for the simulated history to be written (app/history_fill.py)"
        with self.write_lock:
            return str(apply_retention(self.engine, self.clock(), self.settings))

    def jobs(self) -> list[scheduler.Job]:
        return [
            scheduler.Job("collect", self._collect_logged, self.settings.interval_s),
            scheduler.Job("rollup", self.rollup, ROLLUP_EVERY_S),
            scheduler.Job("retention", self.retention, RETENTION_EVERY_S),
            scheduler.Job("alerts", self.evaluate, self.settings.alerts.evaluate_every_s),
            scheduler.Job("notify", self.notify, NOTIFY_EVERY_S),
            scheduler.Job("digest", self.digest, DIGEST_EVERY_S),
            *(scheduler.Job(f"prometheus {job.source.name}", self._while_writing(job.run), self.settings.interval_s)
              for job in self.prometheus),
        ]

    def notify(self) -> str:
        """Queue and send the alert e-mails the stored states call for (app/notify); never raises for SMTP."""
        with self._notifying:  # two plans over the same group logs at once would send an e-mail twice
            return self.notifier.run_once()

    def digest(self) -> str:
        from app.notify.notifier import digest_once

        return digest_once(self.notifier) if self._leading() else "another process holds the lease and sends the digest"

    def _muted(self, state: AlertState, now: float) -> bool:
        from app.alerts.silences import active_silences, is_silenced

        if self._silences[0] != now:  # the notifier asks for every alert with one `now`: one read per run
            self._silences = (now, active_silences(self.engine, now))
        return is_silenced(state, now, self._silences[1], self.settings.alerts.mute_windows)

    def _leading(self) -> bool:
        from app.alerts import lease

        held = lease.current_holder(self.engine, lease.EVALUATOR)
        return held is not None and held.holder == self.evaluator.holder and held.expires_at > self.clock()

    def _note_health(self, target: str, up: bool, ts: float) -> None:
        if not up or self._up.get(target, True) != up:
            # rows are stamped to the nearest whole second, evaluations at the whole second before
            # their clock: the evaluation must not run before the second this round is stamped with
            self._urgent = max(self._urgent or 0.0, float(round(ts)))
        self._up[target] = up

    def _collect_logged(self) -> None:
        # The description is formatted only when someone reads it (-v): this runs every interval.
        try:
            for line in self.collect_once(describe=log.isEnabledFor(logging.DEBUG)):
                log.debug("%s", line)
        finally:
            self.collected.set()
            if self.turn.holding:
                self.stored.set()
        if self._urgent:
            self.judge_now(self._urgent)

    def judge_now(self, stamped: float = 0.0) -> None:
        """Evaluate now, and send what that fires, instead of at the jobs' next turns: a round found a
        target down (or back). ``target_down`` fires on the round that takes its spell of failed
        scrapes past ``for``; waiting for the 15-s evaluation and the 5-s notification turns would
        cost up to 20 s of the 30 s between the last good scrape and the e-mail (docs/alerts.md)."""
        self._urgent = 0.0
        time.sleep(max(0.0, stamped - self.clock()))  # half a second at most: see _note_health
        log.debug("%s", self.evaluate())
        # in a thread of its own: an SMTP server that hangs holds its delivery up to its timeout, never the rounds
        threading.Thread(target=self._notify_logged, name="sweetspot-notify-now", daemon=True).start()

    def _notify_logged(self) -> None:
        try:
            log.debug("%s", self.notify())
        except Exception:  # the scheduled job tries again within NOTIFY_EVERY_S
            log.exception("sending the notifications after a round failed")

    def evaluate(self) -> str:
        """The alerts job: evaluates once this process's first round is in, so a start does not store
        a "never scraped" no_data spell for every rule (the jobs all start at once)."""
        if not self.collected.is_set():
            return "alert evaluator: waiting for the first round"
        with self._evaluating:
            self.evaluator.last_duration_s = None
            # Until this process writes, it takes the lease from nobody: after a takeover, evaluating before
            # its first round would judge the handover's gap as a stale target and reset pending timers.
            line = self.evaluator.run(take=self.stored.is_set())
        if self.evaluator.last_duration_s is not None:
            self.telemetry.observe_evaluation(self.evaluator.last_duration_s)
        return line

    def _backlog(self) -> list[tuple[str, int, float | None]]:
        from app.notify.outbox import backlog

        with self.engine.connect() as conn:
            return backlog(conn, self.notifier.channels())

    def run_forever(self, stop: threading.Event | None = None) -> None:
        """Run every job until stopped, serving the process's own /metrics meanwhile (telemetry.port)."""
        stop_serving = self.telemetry.serve(self.settings.telemetry)
        try:
            scheduler.run_until_stopped(self.jobs(), stop, self.telemetry)
        finally:
            stop_serving()

    def _while_writing(self, run: Callable[[], list[str]]) -> Callable[[], list[str]]:
        return lambda: run() if self.turn.take() else []

    def close(self) -> None:
        self.turn.release()
        self.evaluator.release()
        self.notifier.close()
        for job in self.prometheus:
            job.source.close()
        self.rounds.close()
        self.writer.close()
        self.engine.dispose()
