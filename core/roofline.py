"""The decode roofline with both roofs (docs/ceiling.md "The roofline"): aggregate decode tok/s at c
running requests is bounded by bandwidth (every step reads the weights and the KV cache, core/mbu.py)
and by compute (each token costs about 2 × active parameters FLOPs):

    bandwidth roof(c) = c × BW ÷ (W/TP + c × ctx × kv/TP)          tok/s
    compute roof      = peak dense FLOP/s per GPU × TP ÷ (2 × active parameters)   tok/s
    attainable(c)     = min(compute roof, bandwidth roof(c))

The crossover batch is where the two meet: below it a step is bound by memory, above it by compute.
Peak FLOP/s come from the configured value (``targets[].gpu.peak_tflops``), else the datasheet table
core/gpu_specs.json matched by the GPU name NVML or dcgm-exporter reports; an unknown name gives no
compute roof and a line saying which setting adds one, never a guess. Pure functions of numbers and
names; the table is read once.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from core.mbu import GB, StepModel

SPECS = Path(__file__).with_name("gpu_specs.json")
PRECISIONS = ("bf16_tensor", "fp16_tensor", "fp8_tensor", "fp16_cuda_core")
DEFAULT_PRECISION = "bf16_tensor"  # falls back to fp16_tensor where the GPU has no bf16 (V100, T4)
NO_PEAK = "compute roof unknown: set targets[].gpu.peak_tflops"
NO_PARAMS = "compute roof unknown: set targets[].ceiling.active_params_b"
TFLOP = 1e12


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One datasheet row: the name it is kept under and its peak dense TFLOP/s per precision."""

    name: str
    match: str
    memory_gbps: float | None
    tflops: dict[str, float | None]
    memory_gb: float | None = None  # memory per GPU (decimal GB): what weights and the KV cache must fit in


@cache
def gpu_specs() -> tuple[GpuSpec, ...]:
    """The datasheet table, in matching order."""
    rows = json.loads(SPECS.read_text())["gpus"]
    return tuple(GpuSpec(r["name"], r["match"], r.get("memory_gbps"), {p: r.get(p) for p in PRECISIONS}, r.get("memory_gb")) for r in rows)


def match_gpu(name: str | None) -> GpuSpec | None:
    """The first table row whose pattern is found in ``name`` (case-insensitive); None: unknown."""
    if not name:
        return None
    return next((s for s in gpu_specs() if re.search(s.match, name, re.IGNORECASE)), None)


@dataclass(frozen=True, slots=True)
class PeakCompute:
    """Peak dense TFLOP/s per GPU and where it came from ("config", or "datasheet: H200, bf16_tensor")."""

    tflops: float
    source: str


def peak_compute(configured: float | None, gpu_names: tuple[str | None, ...],
                 precision: str = DEFAULT_PRECISION) -> PeakCompute | None:  # fmt: skip
    """The configured peak, else the datasheet's for the target's GPUs (the slowest where they differ,
    None where any is unknown: a step waits for its slowest GPU). ``precision``: a key of
    :data:`PRECISIONS`; bf16 falls back to fp16 tensor on GPUs without bf16."""
    if configured is not None and configured > 0:
        return PeakCompute(configured, "config")
    specs = [match_gpu(n) for n in gpu_names]
    if not specs or any(s is None for s in specs):
        return None
    found = []
    for spec in specs:
        assert spec is not None
        key = precision if spec.tflops.get(precision) else ("fp16_tensor" if precision == "bf16_tensor" else precision)
        if not spec.tflops.get(key):
            return None
        found.append((spec.tflops[key], f"datasheet: {spec.name}, {key}"))
    tflops, source = min(found, key=lambda f: f[0] or math.inf)
    return PeakCompute(float(tflops or 0.0), source)


@dataclass(frozen=True, slots=True)
class Roofline:
    """Both roofs of one target. ``compute_tok_s`` None: unknown (``note`` says which setting adds it)."""

    model: StepModel
    mean_context: float | None
    compute: PeakCompute | None
    active_params: float | None  # parameters a token passes through (all of them, or an MoE's active ones)
    note: str = ""

    @property
    def compute_tok_s(self) -> float | None:
        """Peak FLOP/s × TP ÷ (2 × active parameters): the most tok/s compute allows at any batch."""
        if self.compute is None or not self.active_params:
            return None
        return self.compute.tflops * TFLOP * max(self.model.tensor_parallel, 1) / (2.0 * self.active_params)

    def bandwidth_tok_s(self, concurrency: float) -> float:
        return self.model.roofline_tokens_per_s(concurrency, self.mean_context)

    def attainable_tok_s(self, concurrency: float) -> float:
        """min(compute roof, bandwidth roof(c))."""
        roof = self.compute_tok_s
        bandwidth = self.bandwidth_tok_s(concurrency)
        return bandwidth if roof is None else min(roof, bandwidth)

    @property
    def crossover_batch(self) -> float | None:
        """The concurrency where the bandwidth roof meets the compute roof (None: unknown compute roof,
        or the KV cache's bytes keep the bandwidth roof under it at every batch)."""
        roof = self.compute_tok_s
        if roof is None:
            return None
        weights = self.model.weight_bytes_per_gpu
        kv = 0.0
        if self.model.kv_bytes_per_token is not None and self.mean_context is not None:
            kv = self.mean_context * self.model.kv_bytes_per_token / max(self.model.tensor_parallel, 1)
        # c × BW ÷ (W + c × kv) = R  →  c = R × W ÷ (BW − R × kv)
        room = self.model.peak_gbps * GB - roof * kv
        return None if room <= 0 else roof * weights / room


def roofline(model: StepModel, mean_context: float | None, compute: PeakCompute | None,
             active_params: float | None) -> Roofline:  # fmt: skip
    """The roofline of ``model``; its note says which input the compute roof lacks, if any."""
    note = NO_PEAK if compute is None else (NO_PARAMS if not active_params else "")
    return Roofline(model, mean_context, compute, active_params, note)
