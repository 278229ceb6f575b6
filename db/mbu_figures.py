"""A target's MBU over a window or per series step, from what the pipeline read (core/mbu.py does the
arithmetic; docs/ceiling.md says why each source ranks where it does).

MBU is the model's bytes, sources best first: engine (vLLM's byte counters per GPU ÷ peak; zero
counters are "not exposed": vLLM without --enable-mfu-metrics), modelled (the target's step model with
each engine's steps/s and the KV tokens resident in its cache, else running × the mean context).
Never the GPUs' DRAM reading: that is DRAM bandwidth utilisation (NVML GPM or DCGM DRAM active,
averaged over the target's GPUs), shown beside MBU with the overhead traffic between them. Peak bandwidth per GPU: the ceiling's (config,
else NVML's formula), else the lowest peak a GPU row carries. Nothing is borrowed: a target without
a source has no MBU (None), and the efficiency rule is then not evaluated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from core import mbu as model
from core.bandwidth import peak_bandwidth
from core.settings import NO_CEILING
from db.results import CeilingInfo, GpuFigures


def peak_gbps(ceiling: CeilingInfo | None, gpus: Sequence[GpuFigures], configured: float | None = None) -> float | None:
    """Peak bandwidth per GPU by the one rule (core/bandwidth.py ``peak_bandwidth``): the configured value
    (the ceiling's, else ``configured``: a target with no weights still has its bandwidth_gbps), else the
    GPUs' stored peaks (their own reading, or the value configured on their source), else the datasheet
    by their names; None when unknown."""
    found = peak_bandwidth(ceiling.bandwidth_gbps if ceiling is not None else configured,
                           [g.peak_bw_gbps for g in gpus], [g.name for g in gpus])  # fmt: skip
    return None if found is None else found.gbps


# whether every GPU's reading is DCGM's → the DRAM reading's source (GPM where any reads it)
DRAM_SOURCE_BY_NAME = {True: model.DRAM_DCGM, False: model.DRAM_GPM}
# where the step model's KV term came from
KV_RESIDENT = "KV cache resident (kv_cache_usage_perc × kv_cache_size_tokens)"
KV_ESTIMATE = "estimate: running × (mean prompt + half the mean output), request-length histograms"
KV_NONE = "weights only: no KV bytes per token or no KV tokens (a lower bound)"


def dram_source(gpus: Sequence[GpuFigures]) -> str:
    """The DRAM reading's source of these GPUs (GPM where any reads it, else DCGM)."""
    return DRAM_SOURCE_BY_NAME[{g.dram_bw_source for g in gpus if g.dram_bw_util_pct_avg is not None} == {"dcgm"}]


def gpu_share_pct(gpus: Sequence[GpuFigures]) -> float | None:
    """The GPUs' DRAM bandwidth share (0–100), averaged over the GPUs that read one."""
    values = [g.dram_bw_util_pct_avg for g in gpus if g.dram_bw_util_pct_avg is not None]
    return sum(values) / len(values) if values else None


def kv_term_source(point: dict[str, Any], ceiling: CeilingInfo | None) -> str:
    """Where the step model's KV term of ``point`` came from (KV_RESIDENT, KV_ESTIMATE or KV_NONE)."""
    if ceiling is None or ceiling.kv_bytes_per_token is None:
        return KV_NONE
    if _finite(point.get("kv_resident_tokens_avg")):
        return KV_RESIDENT
    return KV_ESTIMATE if _finite(point.get("mean_context_tokens")) else KV_NONE


def mbu_of(
    point: dict[str, Any], ceiling: CeilingInfo | None, peak: float | None, share_pct: float | None, source: str
) -> dict[str, Any]:
    """MBU of one window or step and the GPUs' DRAM figure beside it: ``point`` holds the step's
    figures (steps_per_s, running_avg, kv_resident_tokens_avg, mean_context_tokens, engines_max,
    engine bytes/s); ``share_pct`` the GPUs' DRAM bandwidth share (0–100, ``source`` names it)."""
    dram = model.dram_bw_util(share_pct, source)
    engine_bytes = _plus(point.get("engine_read_bytes_per_s"), point.get("engine_write_bytes_per_s"))
    engine = model.engine_mbu(engine_bytes, peak)
    step_model = ceiling.model() if ceiling is not None else None
    engines = point.get("engines_max")
    modelled = model.modelled_mbu(step_model, point.get("steps_per_s"), point.get("running_avg"),
                                  point.get("mean_context_tokens"), point.get("kv_resident_tokens_avg"), engines)  # fmt: skip
    best = model.best_mbu(engine, modelled)
    overhead = model.overhead_traffic(None if dram is None else dram.value, None if best is None else best.value, peak)
    return {
        "mbu": None if best is None else best.value,
        "mbu_source": None if best is None else best.source,
        "mbu_engine": None if engine is None else engine.value,
        "mbu_modelled": None if modelled is None else modelled.value,
        "mbu_kv_source": None if modelled is None else kv_term_source(point, ceiling),
        "dram_bw_util": None if dram is None else dram.value,
        "dram_bw_source": None if dram is None else dram.source,
        "overhead_traffic_gbps": None if overhead is None else overhead.gbps,
        "overhead_ratio": None if overhead is None else overhead.ratio,
        "step_bound_breach": model.check_step_bound(step_model, point.get("steps_per_s"), engines),
    }


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def _plus(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return a if b is None else b
    return a + b


def missing_reason(ceiling: CeilingInfo | None, peak: float | None, steps_per_s: float | None,
                   no_ceiling: str = NO_CEILING) -> str:  # fmt: skip
    """Why a target has no MBU: each source and what it lacks (the efficiency rule's state says it)."""
    parts = ["no engine byte counters (vLLM ≥ 0.32 with --enable-mfu-metrics)" if peak is not None
                 else "no peak bandwidth for the engine's byte counters (targets[].ceiling.bandwidth_gbps)"]  # fmt: skip
    if ceiling is None:
        parts.append(f"no step model ({no_ceiling})")
    elif steps_per_s is None or math.isnan(steps_per_s):
        parts.append("no engine step rate (vllm:iteration_tokens_total) for the step model")
    return "no MBU: " + "; ".join(parts)
