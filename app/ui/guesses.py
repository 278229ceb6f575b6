"""A limit on password guesses, per client address, shared by every session of the dashboard process.

The first :data:`FREE_GUESSES` wrong passwords cost nothing (people mistype); after that the
address must wait :data:`LOCK_S` before its next try, doubled with each further wrong password up
to :data:`MAX_LOCK_S`. A try during the wait is refused without looking at the password, and does
not count. A right password clears the address's count; so do :data:`FORGET_S` without a wrong one.
Per address, not per session: a new browser tab or a cleared cookie is a new session.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

FREE_GUESSES = 5
LOCK_S = 60.0
MAX_LOCK_S = 900.0
FORGET_S = 3600.0


@dataclass
class _Record:
    wrong: int = 0
    last: float = 0.0


class Guesses:
    """Wrong passwords by client address; thread-safe (Streamlit runs each session on its own thread)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._by_client: dict[str, _Record] = {}

    def wait_s(self, client: str) -> float:
        """Seconds before ``client`` may try a password (0: now)."""
        with self._lock:
            record = self._current(client)
            if record is None or record.wrong < FREE_GUESSES:
                return 0.0
            return max(0.0, record.last + lock_s(record.wrong) - self._clock())

    def wrong(self, client: str) -> None:
        with self._lock:
            record = self._current(client) or self._by_client.setdefault(client, _Record())
            record.wrong, record.last = record.wrong + 1, self._clock()

    def right(self, client: str) -> None:
        with self._lock:
            self._by_client.pop(client, None)

    def _current(self, client: str) -> _Record | None:
        record = self._by_client.get(client)
        if record is not None and self._clock() - record.last > FORGET_S:
            del self._by_client[client]
            return None
        return record


def lock_s(wrong: int) -> float:
    """The wait after ``wrong`` wrong passwords in a row (0 for the free ones)."""
    if wrong < FREE_GUESSES:
        return 0.0
    return min(MAX_LOCK_S, LOCK_S * 2.0 ** (wrong - FREE_GUESSES))
