"""Start and stop the live simulator in process: ``start_simulator(SimOptions()) -> RunningSim``.

Everything binds to 127.0.0.1. Port 0 picks a free port; ``RunningSim.urls`` is the same dict the
command prints as its first stdout line.
"""

from __future__ import annotations

import itertools
import logging
import random
import socket
import threading
import time
from typing import Any

from core.engines import NAMES as ENGINE_NAMES
from simulator.dcgm import DcgmReading, dcgm_reading
from simulator.gateway import Gateway
from simulator.live import RATE_WINDOW_S, LiveEngine, RealClock
from simulator.loadgen import ClosedLoopLoad
from simulator.options import SimOptions
from simulator.pattern import DailyPattern
from simulator.server import Handler, SimHTTPServer, request_rng

log = logging.getLogger("simulator")
HOST = "127.0.0.1"


class RunningSim:
    """A started simulator. ``urls``: openai_base, vllm_metrics, gateway_base, gateway_metrics, dcgm_metrics."""

    def __init__(self, options: SimOptions) -> None:
        if options.vllm_version not in ("v1", "v0"):
            raise ValueError(f"vllm_version must be v1 or v0, not {options.vllm_version!r}")
        if options.engine not in ENGINE_NAMES:
            raise ValueError(f"engine must be one of {', '.join(ENGINE_NAMES)}, not {options.engine!r}")
        self.options = options
        self.stopping = threading.Event()
        self.live = LiveEngine(options.engine_config(), RealClock(options.speed), options.vllm_version, options.engine,
                               options.api_servers, keep_s=max(RATE_WINDOW_S, 2 * options.dcgm_interval_s))
        self.gateway = Gateway(options.gateway_limit, self.live.clock.now)
        self.load: ClosedLoopLoad | None = None
        self._numbers = itertools.count()
        self._numbers_lock = threading.Lock()
        self.created = int(time.time())
        self._server = SimHTTPServer((HOST, options.port), Handler)
        self._server.sim = self
        port = self._server.server_address[1]
        base = f"http://{HOST}:{port}"
        self.urls: dict[str, str] = {
            "openai_base": f"{base}/v1",
            "vllm_metrics": f"{base}/metrics",
            "gateway_base": f"{base}/gateway/v1",
            "gateway_metrics": f"{base}/gateway/metrics",
            "dcgm_metrics": f"{base}/dcgm/metrics",
        }
        self._threads: list[threading.Thread] = []
        self._dcgm_lock = threading.Lock()
        self._dcgm: DcgmReading | None = None

    def _start(self) -> None:
        self.live.start()
        self._spawn(self._server.serve_forever, "sim-http")
        options = self.options
        if options.load or options.load_pattern:
            pattern = None
            if options.load_pattern == "daily":
                pattern = DailyPattern(options.seed, float(options.load or 28))
            self.load = ClosedLoopLoad(self.live, self.gateway, options.load, options.seed, pattern)
            self.load.start()
        if options.restart_every_s:
            self._spawn(self._restart_loop, "sim-restarts")

    def _spawn(self, target: Any, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _restart_loop(self) -> None:
        assert self.options.restart_every_s
        while not self.stopping.wait(self.options.restart_every_s / self.options.speed):
            self.restart()

    def request_rng(self) -> tuple[random.Random, int]:
        """A deterministic random source for the next API request, and its number."""
        with self._numbers_lock:
            number = next(self._numbers)
        return request_rng(self.options.seed, number), number

    def dcgm_page(self) -> bytes:
        """dcgm-exporter's page: the GPUs as read at most ``dcgm_interval_s`` simulated seconds ago."""
        with self._dcgm_lock:
            self._dcgm = dcgm_reading(self.live, self.options.params, self._dcgm, self.options.dcgm_interval_s,
                                      self.options.seed, socket.gethostname())
            return self._dcgm.page

    def models_body(self) -> dict[str, Any]:
        model = self.options.model
        card = {"id": model, "object": "model", "created": self.created, "owned_by": "vllm", "root": model,
                "parent": None, "max_model_len": self.live.config.max_model_len}
        return {"object": "list", "data": [card]}

    def restart(self) -> None:
        """Restart vLLM as a process restart would: counters reset, new start time, streams cut."""
        self.live.restart()

    def stop(self) -> None:
        """Stop load, engine and server; returns when the port is closed."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        if self.load is not None:
            self.load.stop()
        self.live.stop()
        self._server.shutdown()
        self._server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        log.info("simulator stopped")

    def __enter__(self) -> RunningSim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_simulator(options: SimOptions | None = None) -> RunningSim:
    """Start the engine, the HTTP server and (if asked) the built-in load; returns at once."""
    sim = RunningSim(options or SimOptions())
    sim._start()
    log.info("simulator serving %s", sim.urls["openai_base"])
    return sim
