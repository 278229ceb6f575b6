"""The engine in real time: one thread runs steps, sleeping each step's duration ÷ speed.

Simulated time runs ``speed`` times faster than the wall clock; latencies in the metrics are in
simulated seconds. One re-entrant lock guards the engine: request callbacks (token delivery, the
gateway releasing a seat, the built-in load submitting its next request) run under it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

from simulator.engine import Engine, Sequence
from simulator.expo import VllmView
from simulator.params import EngineConfig

log = logging.getLogger("simulator.engine")
RATE_WINDOW_S = 20.0  # simulated seconds over which tok/s and busy fraction are measured (GPU figures)


class RealClock:
    """Simulated unix time that starts at the wall clock and runs ``speed`` times faster."""

    def __init__(self, speed: float = 1.0) -> None:
        self.speed = speed
        self._mono0 = time.monotonic()
        self._wall0 = time.time()

    def now(self) -> float:
        return self._wall0 + (time.monotonic() - self._mono0) * self.speed


class LiveEngine:
    """Runs an :class:`Engine` on a :class:`RealClock` in a background thread."""

    def __init__(self, config: EngineConfig, clock: RealClock, version: str = "v1", engine_kind: str = "vllm",
                 api_servers: int = 1) -> None:
        self.config = config
        self.clock = clock
        self.version = version
        self.engine_kind = engine_kind
        self.api_servers = api_servers
        self.sleep_level = 0  # 0 awake, 1 weights offloaded, 2 weights and KV discarded
        self.lock = threading.RLock()
        self._wake = threading.Condition(self.lock)
        self._stop = threading.Event()
        self.engine = Engine(config, started_at=time.time())
        self._history: deque[tuple[float, float, float]] = deque()  # (sim time, tokens, busy seconds)
        self._busy = 0.0
        self._thread = threading.Thread(target=self._loop, name="sim-engine", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self.lock:
            self._wake.notify_all()
        self._thread.join(timeout=5)

    def submit(self, seq: Sequence) -> None:
        """Queue ``seq`` now (its arrival time is set here)."""
        with self.lock:
            seq.arrival = self.clock.now()
            self.engine.submit(seq)
            self._wake.notify_all()

    def abort(self, seq: Sequence) -> None:
        with self.lock:
            self.engine.abort(seq, self.clock.now())

    def reconfigure(self, config: EngineConfig) -> None:
        with self.lock:
            self.config = config
            self.engine.reconfigure(config)
            self._wake.notify_all()

    def restart(self) -> None:
        """Start a new engine process: counters reset, new start time; in-flight requests are cut off."""
        with self.lock:
            old = self.engine
            started = max(time.time(), old.stats.started_at + 0.001)
            self.engine = Engine(self.config, started_at=started)
            log.info("engine restarted (process_start_time_seconds=%.3f)", started)
            now = self.clock.now()
            for seq in [*old.running, *old.waiting]:
                seq.done = True
                if seq.on_finish is not None:
                    seq.on_finish(seq, "restart", now)
            self._wake.notify_all()

    def view(self) -> VllmView:
        """A consistent copy of what /metrics shows."""
        with self.lock:
            engine = self.engine
            stats = engine.stats
            copy = type(stats)(started_at=stats.started_at, prompt_tokens=stats.prompt_tokens,
                               generation_tokens=stats.generation_tokens, preemptions=stats.preemptions,
                               success=dict(stats.success),
                               hists={k: type(h)(h.bounds, list(h.counts), h.total) for k, h in stats.hists.items()},
                               read_bytes=stats.read_bytes, write_bytes=stats.write_bytes)
            return VllmView(self.config.model, copy, len(engine.running), len(engine.waiting), engine.usage(),
                            engine.total_blocks, self.config.params.block_size,
                            self.config.params.gpu_memory_utilization, self.version, self.engine_kind,
                            self.api_servers, self.sleep_level)

    def sleep(self, level: int) -> None:
        """vLLM's POST /sleep?level=1|2: steps stop (requests wait) until wake_up()."""
        with self.lock:
            self.sleep_level = level
            self._wake.notify_all()

    def wake_up(self) -> None:
        with self.lock:
            self.sleep_level = 0
            self._wake.notify_all()

    def load(self) -> tuple[float, float]:
        """(output tokens/s, busy fraction 0–1) over the last RATE_WINDOW_S simulated seconds."""
        with self.lock:
            now = self.clock.now()
            tokens = self.engine.stats.generation_tokens
            if not self._history:
                return 0.0, 0.0
            t0, tok0, busy0 = self._history[0]
            span = max(now - t0, 1e-9)
            tok_delta = tokens - tok0 if tokens >= tok0 else tokens
            return max(0.0, tok_delta / span), min(1.0, (self._busy - busy0) / span)

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self.lock:
                engine = self.engine
                plan = None if self.sleep_level else engine.plan_step(self.clock.now())
                if plan is None:
                    self._record(0.0)
                    self._wake.wait(timeout=0.1)
                    continue
            if self._stop.wait(plan.duration / self.clock.speed):
                return
            with self.lock:
                if self.engine is engine:  # a restart drops the step that was running
                    engine.commit(plan, self.clock.now())
                    self._record(plan.duration)

    def _record(self, busy_s: float) -> None:
        now = self.clock.now()
        self._busy += busy_s
        self._history.append((now, self.engine.stats.generation_tokens, self._busy))
        while len(self._history) > 2 and self._history[0][0] < now - RATE_WINDOW_S:
            self._history.popleft()
