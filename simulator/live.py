"""The engine in real time: one thread runs steps, sleeping each step's duration ÷ speed.

Simulated time runs ``speed`` times faster than the wall clock; latencies in the metrics are in
simulated seconds. One re-entrant lock guards the engine: request callbacks (token delivery, the
gateway releasing a seat, the built-in load submitting its next request) run under it.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import threading
import time
from collections import deque

from core.engines import DEFAULT as DEFAULT_ENGINE
from simulator.engine import Engine, Sequence, StepPlan
from simulator.expo import VllmView
from simulator.gpus import Load
from simulator.params import EngineConfig

log = logging.getLogger("simulator.engine")
RATE_WINDOW_S = 20.0  # simulated seconds over which the GPU figures are measured, unless asked otherwise
IDLE_TICK_S = 0.1  # an idle engine looks for work this often (wall seconds live, simulated in virtual time)


class RealClock:
    """Simulated unix time that starts at the wall clock and runs ``speed`` times faster."""

    def __init__(self, speed: float = 1.0) -> None:
        self.speed = speed
        self._mono0 = time.monotonic()
        self._wall0 = time.time()

    def now(self) -> float:
        return self._wall0 + (time.monotonic() - self._mono0) * self.speed


class VirtualClock:
    """Simulated unix time that moves only when the engine's steps move it (:meth:`LiveEngine.run_until`)."""

    speed = 1.0

    def __init__(self, start: float) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds


class LiveEngine:
    """Runs an :class:`Engine` on a :class:`RealClock` in a background thread, or on a
    :class:`VirtualClock` in the caller's thread (:meth:`run_until`)."""

    def __init__(self, config: EngineConfig, clock: RealClock | VirtualClock, version: str = "v1",
                 engine_kind: str = DEFAULT_ENGINE.name, api_servers: int = 1, keep_s: float = RATE_WINDOW_S) -> None:
        self.config = config
        self.clock = clock
        self.version = version
        self.engine_kind = engine_kind
        self.api_servers = api_servers
        self.sleep_level = 0  # 0 awake, 1 weights offloaded, 2 weights and KV discarded
        self.lock = threading.RLock()
        self._wake = threading.Condition(self.lock)
        self._stop = threading.Event()
        self.engine = Engine(config, started_at=clock.now())
        # (sim time, busy seconds, bytes per GPU) since this object started, restarts included, at each
        # step's end and idle tick: kept for ``keep_s`` simulated seconds, for load().
        self._history: deque[tuple[float, float, float]] = deque()
        self._totals = (0.0, 0.0)  # busy seconds, bytes per GPU
        self.keep_s = keep_s
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

    def slow_down(self, fraction: float) -> None:
        """The fault knob, mid-run: from the next step on, the GPUs do ``fraction`` less work per second (0: none)."""
        if not 0.0 <= fraction < 1.0:
            raise ValueError(f"slowdown must be ≥ 0 and < 1, not {fraction!r}")
        with self.lock:
            config = self.config
        self.reconfigure(dataclasses.replace(config, params=dataclasses.replace(config.params, slowdown=fraction)))

    def restart(self) -> None:
        """Start a new engine process: counters reset, new start time; in-flight requests are cut off."""
        with self.lock:
            old = self.engine
            # the simulator's clock, as the first start's: the wall clock here lagged it by the time the
            # first engine took to build × speed, and a restart could read as the same start (< 1 s apart)
            started = max(self.clock.now(), old.stats.started_at + 0.001)
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
                            self.api_servers, self.sleep_level, self.config.params.kv_bytes_per_token_per_gpu)

    def sleep(self, level: int) -> None:
        """vLLM's POST /sleep?level=1|2: steps stop (requests wait) until wake_up()."""
        with self.lock:
            self.sleep_level = level
            self._wake.notify_all()

    def wake_up(self) -> None:
        with self.lock:
            self.sleep_level = 0
            self._wake.notify_all()

    def load(self, since: float | None = None) -> Load:
        """What the engine did from ``since`` (simulated unix seconds; default: RATE_WINDOW_S ago) until
        now, as rates. Exact over that interval: a step counts when it ends, as the engine's counters do."""
        with self.lock:
            now = self.clock.now()
            start = now - RATE_WINDOW_S if since is None else since
            i = bisect.bisect_right(self._history, start, key=lambda record: record[0])
            if not self._history or now <= start:
                return Load(0.0, 0.0)
            if i == 0:  # younger than the interval: since the first record
                start = self._history[0][0]
            base = self._history[max(i - 1, 0)]
            span = max(now - start, 1e-9)
            busy, moved = (total - old for total, old in zip(self._totals, base[1:], strict=True))
            return Load(moved / span, min(1.0, busy / span))

    def run_until(self, until: float) -> None:
        """Run steps in the calling thread, in virtual time, until the clock (a :class:`VirtualClock`,
        the engine thread not started) reaches ``until``; the last step may end a little after it."""
        assert isinstance(self.clock, VirtualClock), "run_until needs a VirtualClock"
        while self.clock.now() < until:
            with self.lock:
                engine = self.engine
                plan = None if self.sleep_level else engine.plan_step(self.clock.now())
                if plan is None:
                    self.clock.advance(min(IDLE_TICK_S, until - self.clock.now()))
                    self._record(None)
                    continue
                self.clock.advance(plan.duration)
                self._commit(engine, plan)

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self.lock:
                engine = self.engine
                plan = None if self.sleep_level else engine.plan_step(self.clock.now())
                if plan is None:
                    self._record(None)
                    self._wake.wait(timeout=IDLE_TICK_S)
                    continue
            if self._stop.wait(plan.duration / self.clock.speed):
                return
            with self.lock:
                self._commit(engine, plan)

    def _commit(self, engine: Engine, plan: StepPlan) -> None:
        if self.engine is engine:  # a restart drops the step that was running
            engine.commit(plan, self.clock.now())
            self._record(plan)

    def _record(self, plan: StepPlan | None) -> None:
        if plan is not None:
            busy, moved = self._totals
            self._totals = (busy + plan.duration, moved + plan.read_bytes + plan.write_bytes)
        now = self.clock.now()
        self._history.append((now, *self._totals))
        while len(self._history) > 2 and self._history[1][0] <= now - self.keep_s:
            self._history.popleft()
