"""The gateway in front of vLLM: at most ``limit`` requests in flight, the rest wait in a FIFO queue.

Admission is callback based so that HTTP handlers (which block on an Event) and the built-in load
(which never blocks) share one queue in arrival order. Each admitted request's wait (0 when a seat
was free) is observed in a histogram shaped as LiteLLM's ``litellm_request_queue_time_seconds``
(its buckets, seconds, on the simulator's clock): the gateway's own wait metric.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from simulator.expo import GatewayView
from simulator.stats import Hist

# LiteLLM's latency buckets (litellm/types/integrations/prometheus.py LATENCY_BUCKETS), +Inf implied
WAIT_BOUNDS = (0.005, 0.00625, 0.0125, 0.025, 0.05, 0.1, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0,
               6.5, 7.0, 7.5, 8.0, 8.5, 9.0, 9.5, 10.0, 15.0, 20.0, 25.0, 30.0, 60.0, 120.0, 180.0, 240.0, 300.0)


class _Ticket:
    __slots__ = ("asked", "on_admit")

    def __init__(self, on_admit: Callable[[], None], asked: float) -> None:
        self.on_admit = on_admit
        self.asked = asked


class Gateway:
    """A concurrency limit with a FIFO queue; thread-safe."""

    def __init__(self, limit: int, clock: Callable[[], float] = time.time) -> None:
        self.limit = limit
        self.started_at = time.time()
        self._clock = clock  # the waits' clock: the simulator's, whose seconds its clients measure in
        self._waits = Hist(WAIT_BOUNDS)
        self._lock = threading.Lock()
        self._queue: deque[_Ticket] = deque()
        self._in_flight = 0
        self._requests: dict[str, float] = {"ok": 0.0, "error": 0.0, "cancelled": 0.0}

    def enter(self, on_admit: Callable[[], None]) -> _Ticket:
        """Ask for a seat; ``on_admit`` runs (in this or another thread) when the request may go to vLLM."""
        ticket = _Ticket(on_admit, self._clock())
        with self._lock:
            admit = self._in_flight < self.limit and not self._queue
            if admit:
                self._in_flight += 1
                self._waits.observe(0.0)
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
            now = self._clock() if self._queue else 0.0
            while self._queue and self._in_flight < self.limit:
                ticket = self._queue.popleft()
                admitted.append(ticket)
                self._in_flight += 1
                self._waits.observe(max(0.0, now - ticket.asked))
        for ticket in admitted:
            ticket.on_admit()

    def view(self) -> GatewayView:
        with self._lock:
            waits = Hist(self._waits.bounds, list(self._waits.counts), self._waits.total)
            return GatewayView(len(self._queue), self._in_flight, self.limit, self.started_at, dict(self._requests),
                               waits)
