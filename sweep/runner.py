"""The closed-loop runner: at each level, N clients each send their next request as soon as the
previous one ends, through a warm-up and then a fixed window; then the level's figures are computed
from what they saw.

At the end of the window the clients send nothing more and the requests in flight run to their end
(the drain), so every measured request counts whole, as in ``vllm bench serve`` (see
``sweep.stats``). A request still running ``request_timeout_s`` after the window's end is cancelled
then: its stream is closed (vLLM aborts a request whose client went away) and it is kept as *in flight*.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from core import deadline
from core.progress import SweepProgress
from db.results import SweepLevel
from sweep.client import RequestRecord, request_body, stream_request
from sweep.engine import EngineLevel, engine_level, metrics_url, read_engine
from sweep.report import format_engine
from sweep.stats import level_stats, measured, rescale
from sweep.workload import RequestClass, client_rng, make_request

_TICK_S = 0.5  # progress refresh period
_CONNECT_TIMEOUT_S = 10.0

# tick(elapsed_s, requests_ended, errors, in_flight): progress of the running level.
Tick = Callable[[float, int, int, int], None]


@dataclass(frozen=True)
class SweepConfig:
    """What to send and for how long. Durations in seconds."""

    base_url: str  # e.g. http://127.0.0.1:8000/v1, no trailing slash
    model: str
    concurrencies: tuple[int, ...]
    duration_s: float  # measured window of each level
    mix: tuple[tuple[RequestClass, float], ...]
    api: str = "completions"  # or "chat"
    seed: int = 0
    request_timeout_s: float = 300.0  # longest silence on a stream before it counts as a timeout
    # A failed client waits this long before its next request, so a server answering 429 or a
    # refused connection is not hammered in a tight loop (production clients back off too).
    error_pause_s: float = 0.5
    warmup_s: float = 0.0  # run before each window, left out of the figures (see sweep.stats)
    # The server's clock runs this many times real time (the simulator's --speed): figures are
    # converted to its time before they are reported.
    server_speed: float = 1.0

    @property
    def level_s(self) -> float:
        """Wall-clock seconds of one level: warm-up plus window."""
        return self.warmup_s + self.duration_s


async def _client_loop(
    client: httpx.AsyncClient, config: SweepConfig, concurrency: int, index: int, t0: float, out: list[RequestRecord]
) -> None:
    rng = client_rng(config.seed, concurrency, index)
    while time.perf_counter() - t0 < config.level_s:  # the window's end: send nothing more
        spec = make_request(rng, config.mix)
        record = RequestRecord(spec.kind, time.perf_counter() - t0)
        out.append(record)  # before sending, so a request cut by the window's end is still counted
        await stream_request(
            client, config.base_url, config.api, request_body(config.api, config.model, spec), record, t0
        )
        if record.error is not None:
            await asyncio.sleep(config.error_pause_s)


async def _wait_until(
    tasks: Sequence[asyncio.Task[None]], records: list[RequestRecord], t0: float, until_s: float, tick: Tick | None
) -> None:
    """Wait until ``until_s`` after the level's start or until every client is done, whichever comes
    first, refreshing the progress; re-raise a client's unexpected failure."""
    while (elapsed := time.perf_counter() - t0) < until_s and not all(task.done() for task in tasks):
        await asyncio.wait(tasks, timeout=min(_TICK_S, until_s - elapsed))  # returns as soon as all are done
        for task in tasks:
            failure = task.exception() if task.done() and not task.cancelled() else None
            if failure is not None:
                raise failure  # a bug in the client: server failures are recorded, never raised
        if tick is not None:
            ended = [r for r in records if r.end_s is not None]
            errors = sum(1 for r in ended if r.error)
            tick(time.perf_counter() - t0, len(ended), errors, len(records) - len(ended))


async def run_level(
    client: httpx.AsyncClient, config: SweepConfig, concurrency: int, tick: Tick | None = None
) -> tuple[SweepLevel, list[RequestRecord], EngineLevel | None]:
    """Run one level of ``concurrency`` clients for ``config.level_s``, then drain it; return its
    figures (in the server's time), its records (in wall-clock seconds) and the engine's own figures
    over the same span (None where the server shows no vLLM metrics).
    ``tick(elapsed_s, requests_ended, errors, in_flight)`` is called about every half second."""
    records: list[RequestRecord] = []
    url = metrics_url(config.base_url)
    before = await read_engine(client, url) if config.warmup_s == 0 else None
    t0 = time.perf_counter()
    tasks = [asyncio.create_task(_client_loop(client, config, concurrency, i, t0, records)) for i in range(concurrency)]
    try:
        if config.warmup_s > 0:
            await _wait_until(tasks, records, t0, config.warmup_s, tick)
            before = await read_engine(client, url)
        # the drain: the requests in flight at the window's end finish, within the request timeout
        await _wait_until(tasks, records, t0, config.level_s + config.request_timeout_s, tick)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    after = await read_engine(client, url)
    level = level_stats(records, concurrency, config.duration_s, config.warmup_s)
    return rescale(level, config.server_speed), records, engine_level(concurrency, before, after, config.server_speed)


def make_client(config: SweepConfig) -> httpx.AsyncClient:
    """An HTTP client with one connection per concurrent stream (httpx's default pool holds only 100),
    and one more for reading the engine's metrics while every stream is open."""
    size = max(config.concurrencies) + 1
    return deadline.client(  # lookups in threads of their own, within the connect timeout (core/deadline.py)
        httpx.Timeout(config.request_timeout_s, connect=_CONNECT_TIMEOUT_S, pool=None),
        limits=httpx.Limits(max_connections=size, max_keepalive_connections=size), trust_env=True,
    )


async def run_sweep(
    config: SweepConfig,
    progress: SweepProgress | None = None,
    levels: list[SweepLevel] | None = None,
    engine: list[EngineLevel] | None = None,
) -> list[SweepLevel]:
    """Run every level in ascending concurrency order; return their figures in that order.
    Each finished level is also appended to ``levels`` when given, so an interrupted sweep keeps
    them, and the engine's figures of each level that has them to ``engine``."""
    levels = [] if levels is None else levels
    for index, concurrency in enumerate(sorted(config.concurrencies)):
        tick: Tick | None = None
        if progress is not None:
            progress.start_level(index, concurrency)
            tick = _ticker(progress, index, concurrency)
        # A fresh connection pool per level: a keep-alive connection left from the previous level
        # may have been closed by the server meanwhile, and would count as a disconnect here.
        async with make_client(config) as client:
            level, records, figures = await run_level(client, config, concurrency, tick)
        if progress is not None:
            counted = [r for r in measured(records, config.duration_s, config.warmup_s) if r.end_s is not None]
            warmup = [r for r in records if r.start_s < config.warmup_s]
            engine_line = format_engine(figures) if figures is not None else ""
            progress.finish_level(index, level, error_kinds(counted), engine_line, error_kinds(warmup))
        levels.append(level)
        if engine is not None and figures is not None:
            engine.append(figures)
    return levels


def error_kinds(records: Sequence[RequestRecord], top: int = 3) -> list[tuple[str, int]]:
    """The most frequent error texts of a level with their counts, most frequent first."""
    counts = Counter(r.error for r in records if r.error is not None)
    return counts.most_common(top)


def _ticker(progress: SweepProgress, index: int, concurrency: int) -> Tick:
    def tick(elapsed_s: float, requests: int, errors: int, in_flight: int) -> None:
        progress.update(index, concurrency, elapsed_s, requests, errors, in_flight)

    return tick
