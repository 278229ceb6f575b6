"""Simulated scrape history for the demo's backfill: what the three endpoints showed at each step.

Running the engine step by step for 7 days would take minutes, so history advances as a fluid: the
engine is profiled once per concurrency level in virtual time (1 … 32 clients behind the gateway, and
the storm configuration), and each history step adds ``rate × step`` to every counter and histogram
bucket, with the rates interpolated at the step's concurrency and a little noise. Counters stay
monotonic (cumulative floats floored to integers), reset at the pattern's restarts, and the
gateway queue, incidents and GPU figures follow the same daily pattern as the live load.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from core.engines import DEFAULT as DEFAULT_ENGINE
from simulator.engine import Engine, Sequence
from simulator.expo import (
    GatewayView,
    ValueSink,
    VllmView,
    dcgm_text,
    gateway_families,
    gateway_layout,
    vllm_families,
    vllm_layout,
)
from simulator.fasttext import Template
from simulator.gpus import Load, gpu_views
from simulator.params import EngineConfig
from simulator.pattern import STORM_CLIENTS, STORM_LIMIT, DailyPattern
from simulator.stats import HISTOGRAM_BOUNDS, EngineStats, Hist
from simulator.workload import SHORT_SHARE, answer_length, sample_request

LEVELS = (1, 2, 4, 8, 12, 16, 24, 32)
PROFILE_WARMUP_S = 60.0
PROFILE_S = 300.0
HIST_KEYS = tuple(HISTOGRAM_BOUNDS)
# Vector layout of a profile: per-second rates of these counters, time-averaged gauges, then per
# histogram its per-second bucket counts and per-second sum.
COUNTERS = ("generation_tokens", "prompt_tokens", "preemptions", "stop", "length", "read_bytes", "write_bytes")
GAUGES = ("running", "waiting", "kv_usage", "busy")


@dataclass(frozen=True)
class HistorySample:
    """One scrape instant: unix seconds and the three exposition texts."""

    ts: float
    vllm: str
    gateway: str
    dcgm: str


def _profile(clients: int, config: EngineConfig, seed: int, short_share: float = SHORT_SHARE) -> list[float]:
    """Steady-state rates of ``clients`` closed-loop clients, as a flat vector (see COUNTERS/GAUGES);
    ``short_share``: the request mix's share of short requests (the rest are long summaries)."""
    engine = Engine(config, started_at=0.0)
    rng = random.Random(f"profile:{seed}:{clients}")

    def finished(seq: Sequence, reason: str, now: float) -> None:
        submit(now)

    def submit(now: float) -> None:
        spec = sample_request(rng, short_share)
        target, reason = answer_length(rng, spec.max_tokens)
        engine.submit(Sequence("p", spec.prompt_tokens, target, reason, now, None, finished))

    for i in range(clients):
        submit(i * 0.1)
    now, areas, start = 0.0, [0.0] * 4, None
    while now < PROFILE_WARMUP_S + PROFILE_S:
        if start is None and now >= PROFILE_WARMUP_S:
            start = _snapshot(engine.stats)
        plan = engine.plan_step(now)
        step = plan.duration if plan else 0.01
        if start is not None:
            for i, value in enumerate((len(engine.running), len(engine.waiting), engine.usage(), float(bool(plan)))):
                areas[i] += value * step
        now += step
        if plan:
            engine.commit(plan, now)
    end = _snapshot(engine.stats)
    assert start is not None
    rates = [(b - a) / PROFILE_S for a, b in zip(start, end, strict=True)]
    return rates[: len(COUNTERS)] + [a / PROFILE_S for a in areas] + rates[len(COUNTERS):]


def _snapshot(stats: EngineStats) -> list[float]:
    out = [stats.generation_tokens, stats.prompt_tokens, stats.preemptions, stats.success["stop"],
           stats.success["length"], stats.read_bytes, stats.write_bytes]
    for key in HIST_KEYS:
        out += stats.hists[key].counts
        out.append(stats.hists[key].total)
    return out


def profiles(config: EngineConfig | None = None) -> tuple[dict[int, list[float]], list[float]]:
    """Profiles per level (behind the gateway) and of the storm (64 clients, max-num-seqs 64); ~1 s once."""
    return _profiles(config or EngineConfig(), 1)


@lru_cache(maxsize=4)
def _profiles(config: EngineConfig, seed: int) -> tuple[dict[int, list[float]], list[float]]:
    by_level = {level: _profile(level, config, seed) for level in LEVELS}
    storm_config = EngineConfig(config.model, STORM_LIMIT, config.max_model_len, config.params)
    return by_level, _profile(STORM_CLIENTS, storm_config, seed)


def _interpolate(by_level: dict[int, list[float]], clients: float) -> list[float]:
    levels = sorted(by_level)  # the profiled levels (the scenarios profile two more, simulator/scenario.py)
    if clients <= levels[0]:
        return [v * max(0.0, clients) / levels[0] for v in by_level[levels[0]]]
    if clients >= levels[-1]:
        return by_level[levels[-1]]
    i = bisect.bisect_right(levels, clients)
    low, high = levels[i - 1], levels[i]
    w = (clients - low) / (high - low)
    return [a + (b - a) * w for a, b in zip(by_level[low], by_level[high], strict=True)]


class _Accumulator:
    """Cumulative counters of one engine process (float accumulators; exposed floored)."""

    def __init__(self, started_at: float) -> None:
        self.started_at = started_at
        self.values = [0.0] * (len(COUNTERS) + sum(len(b) + 2 for b in HISTOGRAM_BOUNDS.values()))

    def add(self, rates: list[float], seconds: float) -> None:
        counters = rates[: len(COUNTERS)] + rates[len(COUNTERS) + len(GAUGES):]
        self.values = [v + r * seconds for v, r in zip(self.values, counters, strict=True)]

    def stats(self) -> EngineStats:
        v = self.values
        hists, pos = {}, len(COUNTERS)
        for key, bounds in HISTOGRAM_BOUNDS.items():
            raw = v[pos: pos + len(bounds) + 1]
            cumulative = [math.floor(x) for x in _running_sum(raw)]
            counts = [float(b - a) for a, b in zip([0, *cumulative[:-1]], cumulative, strict=True)]
            hists[key] = Hist(bounds, counts, v[pos + len(bounds) + 1])
            pos += len(bounds) + 2
        success = {"stop": float(math.floor(v[3])), "length": float(math.floor(v[4])), "abort": 0.0}
        return EngineStats(self.started_at, float(math.floor(v[1])), float(math.floor(v[0])), float(math.floor(v[2])),
                           success, hists, read_bytes=float(math.floor(v[5])), write_bytes=float(math.floor(v[6])))


def _running_sum(values: list[float]) -> list[float]:
    out, total = [], 0.0
    for value in values:
        total += value
        out.append(total)
    return out


def generate_history(start_ts: float, end_ts: float, step_s: float = 30.0, seed: int = 0, pattern: str = "daily",
                     *, vllm_version: str = "v1", engine: str = DEFAULT_ENGINE.name, config: EngineConfig | None = None,
                     gateway_limit: int = 16,
                     peak_clients: float = 28.0, hostname: str = "sim-v100-node",
                     slowdown: float = 0.0, slowdown_from: float | None = None,
                     growth_per_day: float = 0.0) -> Iterator[HistorySample]:
    """Samples at ``start_ts``, ``start_ts + step_s``, … up to ``end_ts`` (unix seconds), as scraped.

    Counters are monotonic except at the pattern's restarts (new ``process_start_time_seconds`` and
    ``*_created``, counters from zero). Deterministic for a seed. The fault knob: from ``slowdown_from``
    (default: the start) the GPUs do ``slowdown`` less work per second (profiled again with every
    step that much longer, so latencies follow too). The growth knob: demand (the pattern's clients)
    × (1 + ``growth_per_day``) per day since ``start_ts``, compounded continuously (0.03: +3 % a day).
    """
    if pattern != "daily":
        raise ValueError(f"unknown pattern {pattern!r} (only 'daily')")
    config = config or EngineConfig()
    by_level, storm = profiles(config)
    slow_config = dataclasses.replace(config, params=dataclasses.replace(config.params, slowdown=slowdown))
    slow = profiles(slow_config) if slowdown else (by_level, storm)
    slow_from = start_ts if slowdown_from is None else slowdown_from
    daily = DailyPattern(seed, peak_clients, growth_per_day, start_ts)
    rng = random.Random(f"history:{seed}")
    acc = _Accumulator(start_ts - step_s)
    gateway_start, served = start_ts - 86400.0, 0.0
    templates: dict[str, Template] = {}
    ts, prev = start_ts, start_ts - step_s
    while ts <= end_ts:
        state = daily.state(ts)
        limit = STORM_LIMIT if state.storm else gateway_limit
        running_clients = min(state.clients, limit)
        levels, storm_rates = slow if ts >= slow_from else (by_level, storm)
        rates = storm_rates if state.storm else _interpolate(levels, running_clients)
        noise = rng.lognormvariate(0.0, 0.06)
        # the noise is the counters' (work done varies); the gauges stay physical: no more running than
        # the gateway admits, whatever the noise (issue 37: 17 running behind a limit of 16 fired `concurrency`)
        # The KV cache's usage varies as the counters do (the view clips it at 1: a storm's cache reads
        # full); running and waiting are counts the gateway bounds, never scaled.
        gauges = rates[len(COUNTERS):]
        gauges[0] = min(gauges[0], float(limit))
        gauges[2] *= noise
        rates = [r * noise for r in rates[:len(COUNTERS)]] + gauges
        restarts = daily.restarts_between(prev, ts)
        if restarts:
            acc = _Accumulator(restarts[-1])
        acc.add(rates, min(step_s, ts - acc.started_at))
        served += (rates[3] + rates[4]) * step_s
        queue = max(0, round(state.clients - limit))
        view = _vllm_view(config, acc.stats(), rates, vllm_version, engine)
        gateway = GatewayView(queue, round(running_clients), limit, gateway_start, {"ok": float(math.floor(served))})
        moved = rates[COUNTERS.index("read_bytes")] + rates[COUNTERS.index("write_bytes")]
        gpus = gpu_views(config.params, Load(moved, rates[len(COUNTERS) + 3]), seed=seed)
        yield HistorySample(ts, _render(templates, "vllm", view), _render(templates, "gateway", gateway),
                            dcgm_text(gpus, hostname))
        prev, ts = ts, ts + step_s


def _vllm_view(config: EngineConfig, stats: EngineStats, rates: list[float], version: str, engine: str) -> VllmView:
    running, waiting, kv = (rates[len(COUNTERS) + i] for i in range(3))
    params = config.params
    return VllmView(config.model, stats, round(running), round(waiting), min(1.0, kv), params.num_gpu_blocks(),
                    params.block_size, params.gpu_memory_utilization, version, engine,
                    kv_bytes_per_token_per_gpu=params.kv_bytes_per_token_per_gpu)


def _render(templates: dict[str, Template], kind: str, view: VllmView | GatewayView) -> str:
    """Exposition text through a cached template (the layout never changes within one history)."""
    sink = ValueSink()
    if isinstance(view, VllmView):
        vllm_layout(view, sink)
        if kind not in templates:
            templates[kind] = Template(vllm_families(view))
    else:
        gateway_layout(view, sink)
        if kind not in templates:
            templates[kind] = Template(gateway_families(view))
    return templates[kind].render(sink.values)
