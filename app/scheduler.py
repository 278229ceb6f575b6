"""The one module that imports APScheduler: it schedules the plain job functions of app.jobs.

Every job can also run once from the CLI (``collect --once``, ``db rollup``, ``db prune``); here it
only gets a period. ``max_instances=1`` and ``coalesce=True``: a slow round never overlaps the next
one, and missed runs collapse into one instead of a catch-up burst.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from types import FrameType
from typing import Any, Protocol

from apscheduler.events import EVENT_JOB_EXECUTED, EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED
from apscheduler.schedulers.background import BackgroundScheduler

from core.errors import SweetspotError, refusal

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    """A plain function and how often it runs."""

    name: str
    func: Callable[[], object]
    every_s: float


class JobObserver(Protocol):
    """Told of every run (how late it started after its scheduled time, how long it took, in
    seconds) and of every run that did not happen (the previous one still running, or too late)."""

    def ran(self, job: str, lateness_s: float, duration_s: float) -> None: ...

    def missed(self, job: str) -> None: ...


_running: dict[str, int] = {}  # job name → runs under way (named when a stop has to leave one behind)


def _guarded(job: Job, started: dict[str, float]) -> Callable[[], None]:
    # One failing run must never stop the schedule: log it and wait for the next period.
    def run() -> None:
        started[job.name] = time.time()
        _running[job.name] = _running.get(job.name, 0) + 1
        try:
            job.func()
        except SweetspotError as exc:  # a known failure (storage, a source) says itself in one line
            log.warning("job %s failed: %s; it runs again in %g s", job.name, exc.one_line(), job.every_s)
        except Exception as exc:  # the job's error boundary: one line (core/errors.py refusal), the traceback at DEBUG
            log.error("job %s failed: %s; it runs again in %g s", job.name, refusal(exc, f"the {job.name} job"), job.every_s)
            log.debug("the traceback of job %s", job.name, exc_info=True)
        finally:
            _running[job.name] -= 1

    return run


def _watch(scheduler: BackgroundScheduler, observer: JobObserver, started: dict[str, float]) -> None:
    # APScheduler's events carry the scheduled time; the guarded run noted when it really began.
    def listen(event: Any) -> None:
        if event.code == EVENT_JOB_EXECUTED:
            began = started.get(event.job_id, time.time())
            observer.ran(event.job_id, max(0.0, began - event.scheduled_run_time.timestamp()), time.time() - began)
        else:
            observer.missed(event.job_id)

    scheduler.add_listener(listen, EVENT_JOB_EXECUTED | EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES)


def start(jobs: list[Job], observer: JobObserver | None = None) -> BackgroundScheduler:
    """Start every job now and then every ``every_s`` seconds, in background threads."""
    scheduler = BackgroundScheduler(timezone="UTC")
    started: dict[str, float] = {}
    if observer is not None:
        _watch(scheduler, observer, started)
    for job in jobs:
        scheduler.add_job(
            _guarded(job, started),
            "interval",
            seconds=job.every_s,
            id=job.name,
            name=job.name,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=max(1, int(job.every_s)),
            next_run_time=_now(),
        )
    scheduler.start()
    return scheduler


def _now() -> datetime:

    return datetime.now(UTC)


# How long a stop waits for the jobs in flight. Every source of a round has its deadline, so a round
# ends well within it; a job stuck past it (a call with no timeout of its own) must not keep the
# process from stopping: a SIGTERM always ends it.
STOP_GRACE_S = 60.0
# Seconds: how often the main thread wakes while it waits for a stop, so that a signal is handled
SIGNAL_POLL_S = 0.5


def run_until_stopped(jobs: list[Job], stop: threading.Event | None = None, observer: JobObserver | None = None,
                      grace_s: float = STOP_GRACE_S) -> None:
    """Run the jobs until SIGTERM/SIGINT (or ``stop`` is set); the round in flight finishes first.

    A job still running ``grace_s`` after the stop is left behind: one line says which, and the
    process exits at once (status 1), as nothing else could end it.
    """
    stop = stop or threading.Event()
    install_signal_handlers(stop)
    scheduler = start(jobs, observer)
    try:
        # A timed wait, in a loop: a process-directed SIGTERM may be delivered to any thread (a worker
        # blocked in a database call took it under load), and Python runs its handler only when the
        # main thread next executes bytecode; an untimed wait would never wake to run it (seen: a
        # collector that ignored SIGTERM until killed, leaving its write turn held).
        while not stop.wait(SIGNAL_POLL_S):
            pass
    finally:
        # wait=True: a round in flight completes its one transaction, so nothing partial is written.
        stopping = threading.Thread(target=scheduler.shutdown, kwargs={"wait": True}, name="sweetspot-stop", daemon=True)
        stopping.start()
        stopping.join(grace_s)
        if stopping.is_alive():
            running = ", ".join(sorted(name for name, runs in _running.items() if runs)) or "?"
            log.error("job %s still running %g s after the stop signal; exiting without waiting for it", running, grace_s)
            logging.shutdown()
            os._exit(1)
        log.info("scheduler stopped cleanly")


def install_signal_handlers(stop: threading.Event) -> None:
    """SIGTERM and SIGINT set ``stop`` instead of raising, so the caller stops in order."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handle(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s, stopping after the round in flight", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
