"""The decode roofline with both roofs (docs/ceiling.md "The roofline"): aggregate decode tok/s at c
running requests is bounded by bandwidth (every step reads the weights and the KV cache, core/mbu.py)
and by compute (each token costs about 2 × active parameters FLOPs):

    bandwidth roof(c) = c × BW ÷ (W/TP + c × ctx × kv/TP)          tok/s
    compute roof      = TP ÷ (2 × active params × (1 ÷ decode peak + prompt÷output ÷ prefill peak))   tok/s
    attainable(c)     = min(compute roof, bandwidth roof(c))

The compute roof counts prefill: the same GPUs prefill every prompt, prompt ÷ output tokens of it for
each output token (~3.6 in the reference mix, which takes its CUDA-core roof from 1,794 to ~390 tok/s).
Decode and prefill may run on different units (:func:`kernel_peaks`): AWQ on sm70 (stock vLLM refuses
AWQ below sm75) decodes on the CUDA cores and prefills dequantised on the tensor cores.

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
    arch: str | None = None  # the compute capability ("sm70", "sm90"): kernel families follow it


@cache
def gpu_specs() -> tuple[GpuSpec, ...]:
    """The datasheet table, in matching order."""
    rows = json.loads(SPECS.read_text())["gpus"]
    return tuple(GpuSpec(r["name"], r["match"], r.get("memory_gbps"), {p: r.get(p) for p in PRECISIONS}, r.get("memory_gb"),
                         r.get("arch")) for r in rows)  # fmt: skip


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


# Weight-only int4 kernels (AWQ, GPTQ) below sm75 have no tensor-core path: they decode on the CUDA
# cores and prefill dequantised onto the tensor cores (stock vLLM refuses AWQ below sm75; a V100 build
# that serves it does so this way).
INT4_TENSOR_CORES_FROM = 75
INT4_METHODS = ("awq", "gptq", "awq_marlin", "gptq_marlin", "compressed-tensors")


def sm(spec: GpuSpec | None) -> int | None:
    """The compute capability of ``spec`` as a number (70 for "sm70"); None: unknown or not NVIDIA."""
    if spec is None or not spec.arch or not spec.arch.startswith("sm"):
        return None
    return int(spec.arch[2:])


def kernel_peaks(spec: GpuSpec, precision: str, quantization: str | None) -> tuple[PeakCompute | None, PeakCompute | None]:
    """The datasheet peaks decode and prefill run at on ``spec``: ``precision``'s column for both (bf16
    falls back to fp16 tensor), except int4 weights below sm75: decode on fp16 CUDA cores, prefill on
    fp16 tensor cores (dequantised)."""
    capability = sm(spec)
    if quantization in INT4_METHODS and capability is not None and capability < INT4_TENSOR_CORES_FROM:
        return _column(spec, "fp16_cuda_core", f"{quantization} on sm{capability}: decode on CUDA cores"), \
            _column(spec, "fp16_tensor", f"{quantization} on sm{capability}: prefill dequantised on tensor cores")  # fmt: skip
    key = precision if spec.tflops.get(precision) else ("fp16_tensor" if precision == "bf16_tensor" else precision)
    one = _column(spec, key, "")
    return one, one


def _column(spec: GpuSpec, key: str, why: str) -> PeakCompute | None:
    value = spec.tflops.get(key)
    if not value:
        return None
    return PeakCompute(float(value), f"datasheet: {spec.name}, {key}" + (f" ({why})" if why else ""))


def target_peaks(configured: float | None, gpu_names: tuple[str | None, ...], precision: str = DEFAULT_PRECISION,
                 quantization: str | None = None) -> tuple[PeakCompute | None, PeakCompute | None]:  # fmt: skip
    """Decode and prefill peaks of a target: the configured peak for both, else each GPU's datasheet
    peaks for its kernels (:func:`kernel_peaks`; the slowest GPU's: a step waits for it); (None, None)
    where any GPU is unknown."""
    if configured is not None and configured > 0:
        peak = PeakCompute(configured, "config")
        return peak, peak
    specs = [match_gpu(n) for n in gpu_names]
    if not specs or any(s is None for s in specs):
        return None, None
    found = [kernel_peaks(s, precision, quantization) for s in specs if s is not None]
    if any(d is None or p is None for d, p in found):
        return None, None
    return min(found, key=lambda f: f[0].tflops if f[0] else math.inf)


@dataclass(frozen=True, slots=True)
class Roofline:
    """Both roofs of one target. ``compute_tok_s`` None: unknown (``note`` says which setting adds it).
    ``compute``: the decode peak; ``prefill_peak``: the prefill's where it differs (None: the same);
    ``prompt_per_output``: prompt tokens prefilled per output token (None: unknown, decode only)."""

    model: StepModel
    mean_context: float | None
    compute: PeakCompute | None
    active_params: float | None  # parameters a token passes through (all of them, or an MoE's active ones)
    note: str = ""
    prefill_peak: PeakCompute | None = None
    prompt_per_output: float | None = None

    @property
    def decode_compute_tok_s(self) -> float | None:
        """Decode peak FLOP/s × TP ÷ (2 × active parameters): the roof were there no prefill."""
        if self.compute is None or not self.active_params:
            return None
        return self.compute.tflops * TFLOP * max(self.model.tensor_parallel, 1) / (2.0 * self.active_params)

    @property
    def compute_tok_s(self) -> float | None:
        """The most output tok/s compute allows at any batch, each output token paying its decode
        FLOPs and its share of the prompts' prefill FLOPs at the target's mix."""
        decode = self.decode_compute_tok_s
        if decode is None:
            return None
        ratio = self.prompt_per_output or 0.0
        prefill = (self.prefill_peak or self.compute)
        assert prefill is not None and self.active_params
        prefill_tok_s = prefill.tflops * TFLOP * max(self.model.tensor_parallel, 1) / (2.0 * self.active_params)
        return 1.0 / (1.0 / decode + ratio / prefill_tok_s)

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
             active_params: float | None, prefill_peak: PeakCompute | None = None,
             prompt_per_output: float | None = None) -> Roofline:  # fmt: skip
    """The roofline of ``model``; its note says which input the compute roof lacks, if any."""
    note = NO_PEAK if compute is None else (NO_PARAMS if not active_params else "")
    return Roofline(model, mean_context, compute, active_params, note, prefill_peak, prompt_per_output)
