"""The built-in closed-loop load: N clients sending the report's mix through the gateway, in process.

Each client sends a request, waits for its last token, and sends the next (no think time). With the
daily pattern a controller thread follows the pattern's demand and incidents: it changes the number
of clients, lifts the gateway limit and max-num-seqs during a storm, and restarts vLLM on schedule.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
from itertools import count

from simulator.engine import Sequence
from simulator.gateway import Gateway
from simulator.live import LiveEngine
from simulator.pattern import STORM_LIMIT, DailyPattern
from simulator.workload import answer_length, sample_request

log = logging.getLogger("simulator.load")
CONTROL_PERIOD_S = 0.25  # wall seconds between pattern checks
# New clients join at most this many per control period: real demand ramps up rather than
# arriving in one instant. (A cold engine still shows a TTFT spike for its first minute or two:
# the first wave's long prompts prefill together, as on a real restart.)
RAMP_PER_PERIOD = 1


class ClosedLoopLoad:
    """Closed-loop clients through ``gateway`` into ``live``; optional daily pattern."""

    def __init__(self, live: LiveEngine, gateway: Gateway, clients: int, seed: int = 0,
                 pattern: DailyPattern | None = None) -> None:
        self.live = live
        self.gateway = gateway
        self.target = clients
        self.pattern = pattern
        self._rng = random.Random(f"load:{seed}")
        self._lock = threading.Lock()
        self._active = 0
        self._ids = count()
        self._stop = threading.Event()
        self._base_limit = gateway.limit
        self._base_config = live.config
        self._storm = False
        self._last_check = live.clock.now()
        self._thread = threading.Thread(target=self._control, name="sim-load", daemon=True)
        # what each client measured, as a load test's client does: (simulated time of its first token,
        # time to first token from the moment it asked the gateway); its wait in the gateway included
        self._asked: dict[str, float] = {}
        self.measured: list[tuple[float, float]] = []
        # and how that time split: (simulated time of its first token, its wait in the gateway, the
        # engine's TTFT from its admission), the ground truth a gateway wait estimate is judged by
        self.split: list[tuple[float, float, float]] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _control(self) -> None:
        while not self._stop.is_set():
            if self.pattern is not None:
                self._follow_pattern()
            with self._lock:
                missing = min(int(self.target) - self._active, RAMP_PER_PERIOD)
                self._active += max(0, missing)
            for _ in range(max(0, missing)):
                self._send()
            self._stop.wait(CONTROL_PERIOD_S)

    def _follow_pattern(self) -> None:
        assert self.pattern is not None
        now = self.live.clock.now()
        state = self.pattern.state(now)
        self.target = round(state.clients)
        if state.storm != self._storm:
            self._storm = state.storm
            log.info("incident: %s", "storm begins (gateway bypassed)" if state.storm else "storm ends")
            limit, seqs = (STORM_LIMIT, STORM_LIMIT) if state.storm else (self._base_limit, None)
            config = dataclasses.replace(self._base_config, max_num_seqs=seqs or self._base_config.max_num_seqs)
            self.live.reconfigure(config)
            self.gateway.set_limit(limit)
        for _ in self.pattern.restarts_between(self._last_check, now):
            self.live.restart()
        self._last_check = now

    def _send(self) -> None:
        if self._stop.is_set():
            return
        with self._lock:  # clients finish on the engine thread and start on the control thread
            spec = sample_request(self._rng)
            target, reason = answer_length(self._rng, spec.max_tokens)
            seq = Sequence(f"load-{next(self._ids)}", spec.prompt_tokens, target, reason, 0.0, self._token, self._finished)
            self._asked[seq.req_id] = self.live.clock.now()
        self.gateway.enter(lambda: self.live.submit(seq))

    def client_ttfts(self, start: float, end: float) -> list[float]:
        """The TTFTs the clients measured (gateway wait + engine, simulated seconds) of the requests whose
        first token came in [start, end) (simulated unix seconds)."""
        with self._lock:
            return [ttft for at, ttft in self.measured if start <= at < end]

    def client_split(self, start: float, end: float) -> list[tuple[float, float]]:
        """(gateway wait, engine TTFT) in simulated seconds of the requests whose first token came in
        [start, end) (simulated unix seconds): the two terms of :meth:`client_ttfts`."""
        with self._lock:
            return [(wait, engine) for at, wait, engine in self.split if start <= at < end]

    def _token(self, seq: Sequence, new: int, now: float) -> None:
        if seq.generated == 1:  # its first token: what the client has waited for since it asked
            with self._lock:
                asked = self._asked.pop(seq.req_id, None)
                if asked is not None:
                    self.measured.append((now, now - asked))
                    self.split.append((now, seq.arrival - asked, now - seq.arrival))

    def _finished(self, seq: Sequence, reason: str, now: float) -> None:
        with self._lock:
            self._asked.pop(seq.req_id, None)
        self.gateway.leave("ok" if reason in ("stop", "length") else "error")
        with self._lock:
            if self._active > self.target or self._stop.is_set():
                self._active -= 1
                return
        self._send()
