"""Scrape history of a scenario: the deployment's conditions changing step by step, in virtual time.

The daily history (simulator/history.py) follows one pattern; a scenario of the library
(app/scenarios/library.py, docs/scenarios.md) says at each instant what the deployment does, as
:class:`Conditions`: the demand, the gateway's limit, vLLM's ``--max-num-seqs``, a slowdown of the
GPUs or of one tensor-parallel rank, prefix caching, the request mix, requests ending in an error,
an engine up but serving nothing, a ``/metrics`` that does not answer, a restart. The engine is
profiled once per distinct configuration (the same closed-loop profiles as the daily history, ~1 s
each), and each step adds ``rate × step`` to the counters, so weeks run in seconds.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache

from core.engines import DEFAULT as DEFAULT_ENGINE
from simulator.expo import GatewayView, dcgm_text
from simulator.fasttext import Template
from simulator.gpus import Load, gpu_views
from simulator.history import COUNTERS, HistorySample, _Accumulator, _interpolate, _profile, _render, _vllm_view
from simulator.params import EngineConfig
from simulator.workload import SHORT_SHARE

# Closed-loop client counts profiled (behind the gateway's limit): the daily history's levels and
# two beyond, for demand that bypasses the gateway.
LEVELS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)
DOWN_ERROR = "connection refused (the simulated engine is down)"


@dataclass(frozen=True)
class Conditions:
    """What the deployment does over one step. ``clients``: closed-loop demand (users with a request
    in the system); ``gateway_limit``: requests the gateway lets into vLLM at once (64: no gateway
    limit); ``slowdown``: every GPU this share slower; ``rank_slowdown``: one tensor-parallel rank this
    share slower; ``prefix_hit_share``: share of prompt tokens served by prefix caching (0: off);
    ``short_share``: share of short requests in the mix (the rest long summaries); ``error_per_s``:
    requests ended with ``finished_reason="error"`` per second; ``serving`` False: up, requests
    admitted, none run; ``up`` False: ``/metrics`` does not answer (down or unreachable);
    ``restart``: the engine process started anew in this step (counters from zero)."""

    clients: float = 12.0
    gateway_limit: int = 16
    max_num_seqs: int = 32
    slowdown: float = 0.0
    rank_slowdown: float = 0.0
    prefix_hit_share: float = 0.0
    short_share: float = SHORT_SHARE
    error_per_s: float = 0.0
    serving: bool = True
    up: bool = True
    restart: bool = False

    def engine_config(self) -> EngineConfig:
        base = EngineConfig()
        params = dataclasses.replace(base.params, slowdown=self.slowdown, rank_slowdown=self.rank_slowdown,
                                     prefix_hit_share=self.prefix_hit_share)
        return dataclasses.replace(base, max_num_seqs=self.max_num_seqs, params=params)


@dataclass(frozen=True)
class ScenarioSample:
    """One scrape instant: the three texts, or ``sample`` None when ``/metrics`` did not answer."""

    ts: float
    sample: HistorySample | None
    error: str = ""


@lru_cache(maxsize=32)
def _levels(config: EngineConfig, short_share: float, seed: int) -> dict[int, list[float]]:
    return {level: _profile(level, config, seed, short_share) for level in LEVELS}


def scenario_history(conditions_at: Callable[[float], Conditions], start_ts: float, end_ts: float,
                     step_s: float = 30.0, seed: int = 0, hostname: str = "sim-v100-node") -> Iterator[ScenarioSample]:
    """Samples at ``start_ts``, ``start_ts + step_s``, … up to ``end_ts`` (unix seconds), each what a
    scrape at that instant read under ``conditions_at(ts)``. Deterministic for a seed."""
    rng = random.Random(f"scenario:{seed}")
    acc, errors = _Accumulator(start_ts - step_s), 0.0
    gateway_start, served = start_ts - 86400.0, 0.0
    templates: dict[str, Template] = {}
    ts, was_up, seqs = start_ts, True, None
    while ts <= end_ts:
        c = conditions_at(ts)
        redeployed = seqs is not None and c.max_num_seqs != seqs  # a changed flag takes a restart
        if c.restart or redeployed or (c.up and not was_up):
            acc, errors = _Accumulator(ts - step_s / 2), 0.0  # a process started since the last step
        was_up, seqs = c.up, c.max_num_seqs
        running_clients = min(c.clients, c.gateway_limit)
        config = c.engine_config()
        rates = _rates(config, c, running_clients, rng.lognormvariate(0.0, 0.06), seed)
        if not c.up:
            yield ScenarioSample(ts, None, DOWN_ERROR)
            ts += step_s
            continue
        seconds = min(step_s, ts - acc.started_at)
        acc.add(rates, seconds)
        errors += c.error_per_s * seconds
        served += (rates[3] + rates[4]) * step_s
        stats = acc.stats()
        stats.success["error"] = float(math.floor(errors))
        view = _vllm_view(config, stats, rates, "v1", DEFAULT_ENGINE.name)
        queue = max(0, round(c.clients - c.gateway_limit))
        gateway = GatewayView(queue, round(running_clients), c.gateway_limit, gateway_start, {"ok": float(math.floor(served))})
        moved = rates[COUNTERS.index("read_bytes")] + rates[COUNTERS.index("write_bytes")]
        gpus = gpu_views(config.params, Load(moved, rates[len(COUNTERS) + 3]), seed=seed)
        yield ScenarioSample(ts, HistorySample(ts, _render(templates, "vllm", view), _render(templates, "gateway", gateway),
                                               dcgm_text(gpus, hostname)))
        ts += step_s


def _rates(config: EngineConfig, c: Conditions, running_clients: float, noise: float, seed: int) -> list[float]:
    """The profile's rates at ``running_clients`` (with noise); an engine not serving runs nothing and
    holds every admitted request waiting."""
    profiled = _interpolate(_levels(config, c.short_share, seed), running_clients)
    # as the daily history: the noise is the counters' (work done varies), the gauges stay physical
    # (no more running than the gateway admits)
    rates = [r * noise for r in profiled[: len(COUNTERS)]] + profiled[len(COUNTERS):]
    rates[len(COUNTERS)] = min(rates[len(COUNTERS)], float(c.gateway_limit))
    if c.serving:
        return rates
    gauges = len(COUNTERS)
    stalled = [0.0] * len(rates)
    stalled[gauges + 1] = running_clients  # waiting
    stalled[gauges + 2] = rates[gauges + 2]  # the KV cache keeps what it held
    return stalled
