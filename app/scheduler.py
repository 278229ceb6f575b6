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
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from types import FrameType

from apscheduler.schedulers.background import BackgroundScheduler

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    """A plain function and how often it runs."""

    name: str
    func: Callable[[], object]
    every_s: float


_running: dict[str, int] = {}  # job name → runs under way (named when a stop has to leave one behind)


def _guarded(job: Job) -> Callable[[], None]:
    # One failing run must never stop the schedule: log it and wait for the next period.
    def run() -> None:
        _running[job.name] = _running.get(job.name, 0) + 1
        try:
            job.func()
        except Exception:
            log.exception("job %s failed; it runs again in %g s", job.name, job.every_s)
        finally:
            _running[job.name] -= 1

    return run


def start(jobs: list[Job]) -> BackgroundScheduler:
    """Start every job now and then every ``every_s`` seconds, in background threads."""
    scheduler = BackgroundScheduler(timezone="UTC")
    for job in jobs:
        scheduler.add_job(
            _guarded(job),
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


def run_until_stopped(jobs: list[Job], stop: threading.Event | None = None, grace_s: float = STOP_GRACE_S) -> None:
    """Run the jobs until SIGTERM/SIGINT (or ``stop`` is set); the round in flight finishes first.

    A job still running ``grace_s`` after the stop is left behind: one line says which, and the
    process exits at once (status 1), as nothing else could end it.
    """
    stop = stop or threading.Event()
    install_signal_handlers(stop)
    scheduler = start(jobs)
    try:
        stop.wait()
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
