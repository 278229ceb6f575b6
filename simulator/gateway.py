"""The gateway in front of vLLM: at most ``limit`` requests in flight, the rest wait in a FIFO queue.

Admission is callback based so that HTTP handlers (which block on an Event) and the built-in load
(which never blocks) share one queue in arrival order.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from simulator.expo import GatewayView


class _Ticket:
    __slots__ = ("on_admit",)

    def __init__(self, on_admit: Callable[[], None]) -> None:
        self.on_admit = on_admit


class Gateway:
    """A concurrency limit with a FIFO queue; thread-safe."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.started_at = time.time()
        self._lock = threading.Lock()
        self._queue: deque[_Ticket] = deque()
        self._in_flight = 0
        self._requests: dict[str, float] = {"ok": 0.0, "error": 0.0, "cancelled": 0.0}

    def enter(self, on_admit: Callable[[], None]) -> _Ticket:
        """Ask for a seat; ``on_admit`` runs (in this or another thread) when the request may go to vLLM."""
        ticket = _Ticket(on_admit)
        with self._lock:
            admit = self._in_flight < self.limit and not self._queue
            if admit:
                self._in_flight += 1
            else:
                self._queue.append(ticket)
        if admit:
            on_admit()
        return ticket

    def cancel(self, ticket: _Ticket) -> bool:
        """Withdraw a queued request (its client left); False when it was already admitted."""
        with self._lock:
            try:
                self._queue.remove(ticket)
            except ValueError:
                return False
            self._requests["cancelled"] += 1
            return True

    def leave(self, outcome: str = "ok") -> None:
        """A forwarded request finished; admit the next queued ones."""
        with self._lock:
            self._in_flight -= 1
            self._requests[outcome] = self._requests.get(outcome, 0.0) + 1
        self._admit_waiting()

    def set_limit(self, limit: int) -> None:
        with self._lock:
            self.limit = limit
        self._admit_waiting()

    def _admit_waiting(self) -> None:
        admitted = []
        with self._lock:
            while self._queue and self._in_flight < self.limit:
                admitted.append(self._queue.popleft())
                self._in_flight += 1
        for ticket in admitted:
            ticket.on_admit()

    def view(self) -> GatewayView:
        with self._lock:
            return GatewayView(len(self._queue), self._in_flight, self.limit, self.started_at, dict(self._requests))
