"""The collector's lease: one process per database writes rounds, rollups and retention.

Two collectors on one database would each count a counter's increases from their own last reading
(every figure twice) and collide on the rounds they stamp in the same second. The second one stands
by: it logs one line when it starts standing by, scrapes nothing, and takes over within the lease
once the writer stops (a clean stop hands the lease back at once). The lease is the evaluator's
mechanism (``app.alerts.lease``) under another name.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy import Engine

from app.alerts import lease
from core.settings import Settings

log = logging.getLogger(__name__)

WRITER = "collector"


def lease_s(settings: Settings) -> float:
    """How long the writer's lease lasts: renewed every round, so longer than three intervals."""
    return max(settings.alerts.lease_s, 3 * settings.interval_s)


class WriteTurn:
    """Whether this process writes to the database now (:meth:`take` renews or takes the lease)."""

    def __init__(self, engine: Engine, settings: Settings, clock: Callable[[], float], lock: threading.Lock,
                 holder: str) -> None:  # fmt: skip
        self.engine, self.settings, self.clock, self.lock, self.holder = engine, settings, clock, lock, holder
        self.holding: bool | None = None  # None until the first take

    def take(self, say: bool = True) -> bool:
        """Take or renew the lease; False (said once per spell, unless ``say`` is False: the caller
        says it) while another process writes."""
        with self.lock:
            held = lease.acquire(self.engine, WRITER, self.holder, self.clock(), lease_s(self.settings))
        if not held and self.holding is not False and say:
            log.warning("%s", self.standby_line())
        elif held and self.holding is False:
            log.info("collector: the other writer stopped; this process (%s) writes to the database now", self.holder)
        self.holding = held
        return held

    def start_line(self, collecting: str) -> str:
        """A starting collector's first line: ``collecting`` when this process writes, else that it
        stands by (a second `make run` on a database another collector writes said "collecting demo")."""
        return collecting if self.take(say=False) else self.standby_line()

    def standby_line(self) -> str:
        other = lease.current_holder(self.engine, WRITER)
        return (f"collector: another collector ({other.holder if other else '?'}) writes to this database; this one "
                f"stands by and takes over within {lease_s(self.settings):g} s of it stopping. Run one collector "
                "per database (two would count every increase twice)")

    def release(self) -> None:
        """Hand the lease back (a clean stop): a standby takes over at its next round."""
        if self.holding:
            try:
                lease.release(self.engine, WRITER, self.holder)
            except Exception as exc:  # stopping anyway; the lease then expires on its own
                log.debug("collector: could not hand the lease back: %s", exc)
