"""A target's MBU over a window or per series step, from what the pipeline read (core/mbu.py does the
arithmetic; docs/ceiling.md says why each source ranks where it does).

Sources, best first: measured (the target's GPUs' own DRAM bandwidth share, NVML GPM or DCGM DRAM
active, averaged over its GPUs), engine (vLLM's byte counters per GPU ÷ peak; zero counters are
"not exposed": vLLM without --enable-mfu-metrics), modelled (the target's step model with the engine's
steps/s, the running requests and the mean context). Peak bandwidth per GPU: the ceiling's (config,
else NVML's formula), else the lowest peak a GPU row carries. Nothing is borrowed: a target without
a source has no MBU (None), and the efficiency rule is then not evaluated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from core import mbu as model
from core.settings import NO_CEILING
from db.results import CeilingInfo, GpuFigures


def peak_gbps(ceiling: CeilingInfo | None, gpus: Sequence[GpuFigures]) -> float | None:
    """Peak bandwidth per GPU: the ceiling's, else the slowest GPU's stored peak; None when unknown."""
    if ceiling is not None:
        return ceiling.bandwidth_gbps
    peaks = [g.peak_bw_gbps for g in gpus if g.peak_bw_gbps]
    return min(peaks) if peaks else None


# whether every GPU's reading is DCGM's → the measured source's name (GPM where any reads it)
MEASURED_BY_NAME = {True: model.MEASURED_DCGM, False: model.MEASURED_GPM}


def measured_source(gpus: Sequence[GpuFigures]) -> str:
    """The measured source's name of these GPUs (GPM where any reads it, else DCGM)."""
    return MEASURED_BY_NAME[{g.dram_bw_source for g in gpus if g.dram_bw_util_pct_avg is not None} == {"dcgm"}]


def gpu_share_pct(gpus: Sequence[GpuFigures]) -> float | None:
    """The GPUs' DRAM bandwidth share (0–100), averaged over the GPUs that read one."""
    values = [g.dram_bw_util_pct_avg for g in gpus if g.dram_bw_util_pct_avg is not None]
    return sum(values) / len(values) if values else None


def mbu_of(
    point: dict[str, Any], ceiling: CeilingInfo | None, peak: float | None, share_pct: float | None, source: str
) -> dict[str, Any]:
    """MBU of one window or step: ``point`` holds its figures (steps_per_s, running_avg,
    mean_context_tokens, engine bytes/s); ``share_pct`` the GPUs' bandwidth share (``source`` names it)."""
    measured = model.measured_mbu(share_pct, source)
    engine_bytes = _plus(point.get("engine_read_bytes_per_s"), point.get("engine_write_bytes_per_s"))
    engine = model.engine_mbu(engine_bytes, peak)
    step_model = ceiling.model() if ceiling is not None else None
    modelled = model.modelled_mbu(step_model, point.get("steps_per_s"), point.get("running_avg"),
                                  point.get("mean_context_tokens"))  # fmt: skip
    best = model.best_mbu(measured, engine, modelled)
    return {
        "mbu": None if best is None else best.value,
        "mbu_source": None if best is None else best.source,
        "mbu_measured": None if measured is None else measured.value,
        "mbu_engine": None if engine is None else engine.value,
        "mbu_modelled": None if modelled is None else modelled.value,
        "step_bound_breach": model.check_step_bound(step_model, point.get("steps_per_s")),
    }


def _plus(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return a if b is None else b
    return a + b


def missing_reason(ceiling: CeilingInfo | None, peak: float | None, steps_per_s: float | None,
                   no_ceiling: str = NO_CEILING) -> str:  # fmt: skip
    """Why a target has no MBU: each source and what it lacks (the efficiency rule's state says it)."""
    parts = ["no GPU bandwidth reading (NVML GPM on Hopper or newer, or dcgm-exporter's DRAM_ACTIVE)"]
    parts.append("no engine byte counters (vLLM ≥ 0.32 with --enable-mfu-metrics)" if peak is not None
                 else "no peak bandwidth for the engine's byte counters (targets[].ceiling.bandwidth_gbps)")  # fmt: skip
    if ceiling is None:
        parts.append(f"no step model ({no_ceiling})")
    elif steps_per_s is None or math.isnan(steps_per_s):
        parts.append("no engine step rate (vllm:iteration_tokens_total) for the step model")
    return "no MBU: " + "; ".join(parts)
