"""The demo's simulated week, written behind the live dashboard (``make run`` on a fresh machine).

The dashboard starts first. Then the last hour of the week (the Overview's default range) is
written, rolled up and judged before the live collection's first round, so no default chart is
blank; the days before it fill in behind the live rounds, oldest first, a day at a time, through the
normal ingestion path (app/backfill.py: the same parsers and the same Writer code as a live scrape),
each day rolled up and its minutes judged (app/alerts/replay.py) before the next, so every page reads
whole days. Progress is stored (db/history_fill.py) for the pages' "history filling, N of 7 days"
line and printed on the terminal, with an ETA from the pace of the day just done (each day is the same
work), first given after the second day: the first shares the machine with the dashboard's start.

The last hour is written by a plain Writer before anything else, and the live Writer, which starts
after it, reads that hour (its latest round, its counter states) as its past. The days before it are
written by a Writer in history mode (db/writer.py): rounds older than what the database holds, in a
span nothing else writes, that starts afresh (no stored latest round, counter state or epoch) and
saves no counter state, so it and the live Writer never read each other's rows as their own past. Every transaction takes the
collector's write lock.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

from app.backfill import rounds_from_history
from core.durations import format_duration
from db import epochs, history_fill
from db.history_fill import FillProgress
from db.writer import Writer

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from app.collection import CollectionService
    from collectors.records import ScrapeRound
    from core.settings import TargetSettings

log = logging.getLogger(__name__)
DAY_S = 86400
TAIL_S = 3600.0  # written first, before any live round: the Overview's default range (1 h) is never blank
BATCH_ROUNDS = 240  # two hours of 30-s steps a transaction: the live rounds wait at most that long for the lock


class HistoryFill:
    """Write ``target``'s simulated history over [start_ts, end_ts] (unix s) one day at a time."""

    def __init__(self, service: CollectionService, target: TargetSettings, start_ts: float, end_ts: float,
                 step_s: float, seed: int = 0, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.time, day_s: float = DAY_S) -> None:  # fmt: skip
        self.service, self.target, self.step_s, self.seed = service, target, step_s, seed
        self.start_ts, self.end_ts = start_ts, end_ts
        self.stream = stream or sys.stdout
        self.clock = clock
        self.writer = Writer(service.engine, history=True)  # its own counter states and latest round: see the module's docstring
        self.day_s = day_s  # the unit of progress and of the ETA (tests scale it)
        self.tail_ts = max(start_ts, end_ts - min(TAIL_S, day_s))  # the last hour, written first
        self.days = max(1, math.ceil((self.tail_ts - start_ts) / day_s))
        self.progress = FillProgress(target.name, int(start_ts), int(end_ts), self.days, 0, clock(), clock())
        self.thread: threading.Thread | None = None
        self._rounds: Iterator[ScrapeRound] | None = None

    def begin(self) -> None:
        """Write the last hour of the history (the Overview's default range), rolled up and judged,
        before the live collector's first round (see the module's docstring); :meth:`start` then
        writes the days before it in a thread."""
        from simulator import generate_history
        from simulator.history import profiles

        # retention waits: each day is rolled up from its raw rows, which are older than raw_retention_s
        self.service.history_filling.set()
        profiles()  # built once (about a second): the days after this are each the same work
        self.progress = FillProgress(self.target.name, int(self.start_ts), int(self.end_ts), self.days, 0,
                                     self.clock(), self.clock())  # fmt: skip
        history_fill.save(self.service.engine, self.progress)
        # The last hour comes from a history of its own (its engine "started" an hour ago: the days before
        # it end in a seam the charts do not draw, an epoch of kind "first"); the days from another.
        tail = rounds_from_history(self.target, generate_history(self.tail_ts, self.end_ts, self.step_s, self.seed))
        # A plain Writer: nothing is stored for the target yet, and the counter states it saves are the
        # live Writer's past (its first round counts from the live engine's start, not as a baseline)
        self._write(list(tail), Writer(self.service.engine))
        with self.service.write_lock:  # the live engine is the one this hour describes: no restart at the seam
            epochs.forget_start(self.service.engine, self.target.name)
        self._settle(self.tail_ts, self.end_ts)
        days = generate_history(self.start_ts, self.tail_ts - self.step_s, self.step_s, self.seed)
        self._rounds = rounds_from_history(self.target, days)

    def start(self) -> threading.Thread:
        self.thread = threading.Thread(target=self._run_logged, name="sweetspot-history-fill", daemon=True)
        self.thread.start()
        return self.thread

    def _run_logged(self) -> None:
        try:
            self.run()
        except Exception:  # the live collection goes on; the pages say the history stopped where it did
            log.exception("writing the simulated history failed after %d of %d days", self.progress.days_done, self.days)
            self._save(finished_at=self.clock())
        finally:
            self.service.history_filling.clear()

    def run(self) -> None:
        """Write, roll up and judge each day in turn, saving and printing the progress after each."""
        assert self._rounds is not None, "begin() first"
        began = self.progress.started_at
        rounds = self._rounds
        day_began = self.clock()
        for day in range(self.days):
            day_start = self.start_ts + day * self.day_s
            day_end = min(self.tail_ts, day_start + self.day_s)
            batch: list[ScrapeRound] = []
            for round_ in rounds:
                if round_.ts >= day_end and day < self.days - 1:
                    rounds = itertools.chain([round_], rounds)  # the next day's first
                    break
                batch.append(round_)
                if len(batch) >= BATCH_ROUNDS:
                    self._write(batch)
                    batch = []
            self._write(batch)
            self._settle(day_start, day_end)
            done, now = day + 1, self.clock()
            spent, day_s, day_began = now - began, now - day_began, now
            self._save(days_done=done, eta_at=self._eta(done, day_s, now), finished_at=self.clock() if done == self.days else None)
            self._say(done, spent)
        self.service.history_filling.clear()  # every day is rolled up: retention may run again

    def _eta(self, done: int, day_s: float, now: float) -> float | None:
        """When the fill should end (unix s): the days left at the pace of the day just done, each day
        being the same work. None while the first day is the only one timed (it shares the machine
        with the dashboard's start and first page: 36 % slow at load 30) and once it has ended; a fill
        of two days or fewer takes its pace from its first day."""
        if done == self.days or (done < 2 < self.days):
            return None
        return now + day_s * (self.days - done)

    def _write(self, batch: list[ScrapeRound], writer: Writer | None = None) -> None:
        if batch:
            with self.service.write_lock:
                (writer or self.writer).write_rounds(batch, batch=len(batch))

    def _settle(self, day_start: float, day_end: float) -> None:
        """Roll the day up and judge its minutes, so the pages read it whole (rollups from the day's
        first hour: the hour it shares with the day before is folded again, as rollup() allows)."""
        from app.alerts.replay import judge_history
        from db.rollup import GRACE_S, rollup

        # every minute up to the day's end is written: fold them all (a later day folds the one its start
        # cuts again, whole), but never one the live rounds may still add to
        with self.service.write_lock:
            rollup(self.service.engine, min(day_end + GRACE_S, self.clock()), since=int(day_start))
        # the minute a day boundary cuts is judged with the later day, once it is whole; the one the
        # last hour's start cuts, with the last day
        judged_from = day_start if day_start in (self.start_ts, self.tail_ts) else day_start // 60 * 60
        judged_to = day_end + 60 if day_end == self.tail_ts and day_start < self.tail_ts else day_end
        with self.service.write_lock:
            judge_history(self.service.engine, self.service.settings, self.target.name, judged_from, judged_to)

    def _save(self, **changes: object) -> None:
        self.progress = dataclasses.replace(self.progress, updated_at=self.clock(), **changes)  # type: ignore[arg-type]
        with self.service.write_lock:
            history_fill.save(self.service.engine, self.progress)

    def _say(self, done: int, spent: float) -> None:
        if done == self.days:
            days = f"{self.days} day{'s' if self.days > 1 else ''}"
            line = f"history: {days} of simulated history written, rolled up and judged in {spent:.1f} s"
        else:
            line = f"{self.progress.notice(self.clock())}; the dashboard shows the live minutes meanwhile"
        self.stream.write(line + "\n")
        self.stream.flush()


def interrupted(engine: Engine, target: str, now: float) -> None:
    """A fill that a stop cut short (the history has what it wrote, no more): marked ended, so the
    pages stop saying it fills; its days_done says how far it came."""
    with engine.connect() as conn:
        progress = history_fill.load(conn, target)
    if progress is not None and progress.filling:
        history_fill.save(engine, dataclasses.replace(progress, updated_at=now, eta_at=None, finished_at=now))
        log.warning("the simulated history of %s was cut short at %d of %d days by a stop; it stays so",
                    target, progress.days_done, progress.days_total)


def describe(span_s: float, step_s: float) -> str:
    """The first line the demo prints about its history."""
    return (f"first start: {format_duration(span_s)} of simulated history (one sample per {step_s:g} s) fills in "
            "behind the dashboard through the normal ingestion path, a day at a time")
