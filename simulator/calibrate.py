"""Virtual-time closed-loop runs straight into the engine, and the calibration against the field report.

A level's figures use the sweep tool's key names (every field of ``db.results.SweepLevel``:
``concurrency``, ``duration_s``, ``requests``, ``errors``, ``tokens_per_s``, ``qps``, ``ttft_p50_s``,
... ``error_rate``) plus ``preemptions`` and ``kv_usage_max``.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Any

from simulator.engine import Engine, Sequence
from simulator.params import EngineConfig
from simulator.workload import answer_length, sample_request

# The sweep's own percentile: calibration levels and sweep levels are the same figures.
from sweep.stats import percentile

# DOMAIN.md §2 (None: the report gives no number; "between" the neighbours).
REFERENCE: list[dict[str, Any]] = [
    {"concurrency": 8, "tokens_per_s": 85.0, "ttft_p95_s": 1.5, "e2e_mean_s": 32.8, "qps": 0.28},
    {"concurrency": 16, "tokens_per_s": 126.0, "ttft_p95_s": None, "e2e_mean_s": None, "qps": None},
    {"concurrency": 32, "tokens_per_s": 145.0, "ttft_p95_s": 4.8, "e2e_mean_s": 67.4, "qps": 0.48},
]
# Relative tolerances the calibration must meet (issue 3).
RAMP_S = 5.0  # clients start spread over this many simulated seconds
WARMUP_S = 60.0  # figures are taken after this warm-up, over the level's duration
TOLERANCE = {"tokens_per_s": 0.10, "ttft_p95_s": 0.20, "e2e_mean_s": 0.15, "qps": 0.15}


@dataclass
class _Observed:
    ttft: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)
    tokens: int = 0
    kv_max: float = 0.0


def run_closed_loop(
    clients: int, duration_s: float, seed: int = 0, config: EngineConfig | None = None, warmup_s: float = 0.0
) -> dict[str, Any]:
    """Run ``clients`` closed-loop clients (no think time) for ``duration_s`` simulated seconds.

    Figures cover the window [warmup_s, warmup_s + duration_s]: tokens emitted, requests completed
    (QPS, E2E) and first tokens / token gaps of requests that arrived inside it (TTFT, ITL). Returns the level's figures (seconds, tokens/s).
    """
    engine = Engine(config or EngineConfig(), started_at=0.0)
    rng = random.Random(seed)
    obs = _Observed()
    end = warmup_s + duration_s
    counter = iter(range(10**12))

    def submit(now: float) -> None:
        spec = sample_request(rng)
        target, reason = answer_length(rng, spec.max_tokens)
        seq = Sequence(f"r{next(counter)}", spec.prompt_tokens, target, reason, now, on_tokens, on_finish)
        engine.submit(seq)

    def on_tokens(seq: Sequence, n: int, now: float) -> None:
        if warmup_s <= now <= end:
            obs.tokens += n
            if seq.arrival >= warmup_s:
                if seq.generated == 1:
                    obs.ttft.append(now - seq.arrival)
                elif seq.extra.get("last") is not None:
                    obs.itl.append(now - float(seq.extra["last"]))  # type: ignore[arg-type]
        seq.extra["last"] = now

    def on_finish(seq: Sequence, reason: str, now: float) -> None:
        if now <= end:
            if now >= warmup_s:
                obs.e2e.append(now - seq.arrival)
            submit(now)

    # Clients start one after another over the first seconds, as a load tool ramps up.
    starts = sorted(rng.uniform(0.0, RAMP_S) for _ in range(clients))
    now = 0.0
    for start in starts:
        now = _drive(engine, now, start, obs)
        submit(start)
    now = _drive(engine, now, warmup_s, obs)
    preempt_start = engine.stats.preemptions
    _drive(engine, now, end, obs)
    return _figures(clients, duration_s, obs, engine.stats.preemptions - preempt_start)


def _drive(engine: Engine, now: float, until: float, obs: _Observed) -> float:
    """Advance the engine in virtual time from ``now`` up to ``until``; returns the time reached."""
    while now < until:
        plan = engine.plan_step(now)
        if plan is None:
            now += 0.01
            continue
        now += plan.duration
        engine.commit(plan, now)
        obs.kv_max = max(obs.kv_max, engine.usage())
    return now


def _figures(clients: int, duration_s: float, obs: _Observed, preemptions: float) -> dict[str, Any]:
    def rounded(value: float | None, digits: int = 3) -> float | None:
        return None if value is None else round(value, digits)

    mean = sum(obs.e2e) / len(obs.e2e) if obs.e2e else None
    return {
        "concurrency": clients,
        "duration_s": duration_s,
        "requests": len(obs.e2e),
        "errors": 0,
        "tokens_per_s": rounded(obs.tokens / duration_s, 1),
        "qps": rounded(len(obs.e2e) / duration_s),
        "ttft_p50_s": rounded(percentile(obs.ttft, 0.50)),
        "ttft_p95_s": rounded(percentile(obs.ttft, 0.95)),
        "ttft_p99_s": rounded(percentile(obs.ttft, 0.99)),
        "itl_p95_s": rounded(percentile(obs.itl, 0.95)),
        "e2e_mean_s": rounded(mean, 2),
        "e2e_p95_s": rounded(percentile(obs.e2e, 0.95), 2),
        "error_rate": 0.0,
        "preemptions": int(preemptions),
        "kv_usage_max": rounded(obs.kv_max),
    }


def calibrate(
    levels: Seq[int] = (8, 16, 32), duration_s: float = 600.0, seed: int = 0, config: EngineConfig | None = None
) -> dict[str, Any]:
    """The calibration sweep: one closed-loop run per level; ``{"levels": [...], "reference": [...]}``."""
    results = [run_closed_loop(c, duration_s, seed + c, config, WARMUP_S) for c in levels]
    return {"levels": results, "reference": REFERENCE, "config": _describe(config or EngineConfig())}


def _describe(config: EngineConfig) -> dict[str, Any]:
    params = dataclasses.asdict(config.params)
    return {
        "max_num_seqs": config.max_num_seqs,
        "max_model_len": config.max_model_len,
        "num_gpu_blocks": config.params.num_gpu_blocks(),
        "params": params,
    }


def misses(result: dict[str, Any]) -> list[str]:
    """Reference figures the levels miss by more than the tolerance (empty list: calibrated)."""
    out = []
    by_level = {level["concurrency"]: level for level in result["levels"]}
    for ref in REFERENCE:
        got = by_level.get(ref["concurrency"])
        if got is None:
            continue
        for key, tol in TOLERANCE.items():
            want = ref.get(key)
            if want is not None and (got[key] is None or abs(got[key] - want) > tol * want):
                out.append(f"c={ref['concurrency']} {key}: {got[key]} vs {want} ±{tol:.0%}")
        if got["preemptions"]:
            out.append(f"c={ref['concurrency']}: {got['preemptions']} preemptions")
    return out
