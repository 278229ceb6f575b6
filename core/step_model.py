"""The step model with both phases (docs/plan.md "The step model"): what one engine's output tok/s is
at c running requests, given its roofs (core/roofline.py, at 100 %) and three efficiencies fitted on
the target's own levels.

    decode step (s)        = max(bytes a GPU reads ÷ (η_bw × bandwidth), decode FLOPs a GPU ÷ (η_c × decode peak))
                             + overhead                                    (overhead: s a step, fixed)
    prefill (s per token)  = prompt tokens per output token × 2 × active params ÷ TP ÷ (η_c × prefill peak)
    output tok/s(c)        = c ÷ (decode step + c × prefill per output token)

bytes a GPU reads = (weights + c × context × KV bytes a token) ÷ TP; decode FLOPs a GPU = 2 × active
params × c ÷ TP (attention's FLOPs, ~2 % of a 70B token at 1,300 tokens of context, are left out). The
decode and prefill peaks differ where the kernels do: AWQ on sm70 decodes on the CUDA cores and
prefills dequantised on the tensor cores (core/roofline.py ``kernel_peaks``).

:func:`fit` finds the efficiencies: a grid of η_bw and η_c (2 % to 100 %), the overhead solved by
least squares at each, scored by the RMS relative error over the levels. Every parameter set within
:data:`TOLERANCE` of the best fit's error is kept (:attr:`Fit.members`): an efficiency the levels do
not pin down (a roof that never binds there) keeps a wide spread, and every prediction's range is the
lowest and highest of the members' predictions. Pure functions of numbers (numpy for the grid).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core import roofline as roofs
from core.mbu import GB

GRID = np.geomspace(0.02, 1.0, 160)  # efficiencies tried, 2 % to 100 %
TOLERANCE = 0.05  # members: parameter sets whose RMS relative error is within 5 points of the best's


@dataclass(frozen=True, slots=True)
class Efficiency:
    """Shares of the roofs a deployment's kernels reach (0-1) and the fixed time a decode step costs."""

    bandwidth: float
    compute: float
    overhead_s: float


@dataclass(frozen=True, slots=True)
class Terms:
    """One engine's work at c running requests: bytes and FLOPs per GPU a decode step, and prefill
    FLOPs per GPU per output token (0 where the active parameters or the mix are unknown)."""

    concurrency: float
    step_bytes: float
    step_flops: float
    prefill_flops_per_token: float


def terms(roof: roofs.Roofline, concurrency: float) -> Terms:
    """The work ``roof``'s engine does at ``concurrency`` running requests of its context and mix."""
    tp = max(roof.model.tensor_parallel, 1)
    flops = 2.0 * (roof.active_params or 0.0) / tp
    ratio = roof.prompt_per_output or 0.0
    return Terms(concurrency, roof.model.bytes_per_step(concurrency, roof.mean_context), flops * concurrency, flops * ratio)


def tokens_per_s(roof: roofs.Roofline, eff: Efficiency, concurrency: float) -> float:
    """Output tok/s of one engine of ``roof`` at ``concurrency`` running, with efficiencies ``eff``."""
    return float(_tok_s(roof, terms(roof, concurrency), np.array(eff.bandwidth), np.array(eff.compute),
                        np.array(eff.overhead_s)))  # fmt: skip


def step_parts(roof: roofs.Roofline, eff: Efficiency, concurrency: float) -> dict[str, float]:
    """Where one step's time goes (seconds): reading, decode compute, overhead, and prefill (per step)."""
    t = terms(roof, concurrency)
    decode_peak, prefill_peak = _peaks(roof)
    return {
        "read_s": t.step_bytes / (eff.bandwidth * roof.model.peak_gbps * GB),
        "decode_compute_s": t.step_flops / (eff.compute * decode_peak) if decode_peak else 0.0,
        "overhead_s": eff.overhead_s,
        "prefill_s": concurrency * t.prefill_flops_per_token / (eff.compute * prefill_peak) if prefill_peak else 0.0,
    }


def _peaks(roof: roofs.Roofline) -> tuple[float, float]:
    """Decode and prefill peak FLOP/s per GPU (0: unknown)."""
    decode = roof.compute.tflops * roofs.TFLOP if roof.compute is not None else 0.0
    prefill = roof.prefill_peak.tflops * roofs.TFLOP if roof.prefill_peak is not None else decode
    return decode, prefill


def _tok_s(roof: roofs.Roofline, t: Terms, bw: np.ndarray, compute: np.ndarray, overhead: np.ndarray) -> np.ndarray:
    """Output tok/s for arrays of efficiencies (broadcast)."""
    decode_peak, prefill_peak = _peaks(roof)
    read = t.step_bytes / (bw * roof.model.peak_gbps * GB)
    work = t.step_flops / (compute * decode_peak) if decode_peak and t.step_flops else 0.0 * read
    prefill = t.prefill_flops_per_token / (compute * prefill_peak) if prefill_peak and t.prefill_flops_per_token else 0.0 * read
    return t.concurrency / (np.maximum(read, work) + overhead + t.concurrency * prefill)


# --- Fitting on the target's levels ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Level:
    """One measured level of one engine: running requests, output tok/s, and the context and prompt
    tokens per output token its requests had (None: the roofline's own)."""

    concurrency: float
    tokens_per_s: float
    context: float | None = None
    prompt_per_output: float | None = None
    samples: int = 1


def at_level(roof: roofs.Roofline, level: Level) -> roofs.Roofline:
    """``roof`` with the level's own context and mix where it knows them."""
    context = roof.mean_context if level.context is None else level.context
    ratio = roof.prompt_per_output if level.prompt_per_output is None else level.prompt_per_output
    return dataclasses.replace(roof, mean_context=context, prompt_per_output=ratio)


@dataclass(frozen=True)
class Prediction:
    """Output tok/s predicted and its range (the lowest and highest the evidence allows)."""

    tokens_per_s: float
    low: float
    high: float

    def scaled(self, factor: float) -> Prediction:
        return Prediction(self.tokens_per_s * factor, self.low * factor, self.high * factor)

    def widened(self, margin: float) -> Prediction:
        """The range widened by ``margin`` (a share) each side: a transfer's measured error."""
        return Prediction(self.tokens_per_s, min(self.low, self.tokens_per_s * (1 - margin)),
                          max(self.high, self.tokens_per_s * (1 + margin)))  # fmt: skip


@dataclass(frozen=True)
class Fit:
    """The efficiencies that reproduce a target's levels: the best and every set within tolerance."""

    best: Efficiency
    members: tuple[Efficiency, ...]
    error: float  # the best fit's RMS relative error over the levels
    worst: float  # the best fit's largest relative error at one level
    levels: tuple[Level, ...]
    source: str = ""  # what it was fitted on ("1,234 production minutes", "the sweep of …")

    def spread(self, field: str) -> tuple[float, float]:
        """The lowest and highest value of one efficiency (``bandwidth``, ``compute``, ``overhead_s``)."""
        values = [getattr(m, field) for m in self.members]
        return min(values), max(values)

    def predict(self, roof: roofs.Roofline, concurrency: float) -> Prediction:
        """One engine of ``roof`` at ``concurrency``: the best fit, and the members' lowest and highest."""
        t = terms(roof, concurrency)
        arrays = [np.array([getattr(m, f) for m in self.members]) for f in ("bandwidth", "compute", "overhead_s")]
        every = _tok_s(roof, t, *arrays)
        best = float(_tok_s(roof, t, np.array(self.best.bandwidth), np.array(self.best.compute), np.array(self.best.overhead_s)))
        return Prediction(best, min(best, float(every.min())), max(best, float(every.max())))

    def words(self) -> str:
        """``bandwidth 31 % (24-45 %), compute 46 % (40-52 %), overhead 49 ms a step (41-55 ms)``."""
        return efficiency_words(self.best, self.spread("bandwidth"), self.spread("compute"), self.spread("overhead_s"))


def efficiency_words(eff: Efficiency, bw: tuple[float, float], compute: tuple[float, float],
                     overhead: tuple[float, float]) -> str:  # fmt: skip
    """The three efficiencies with their ranges, in words."""
    pct = lambda x: f"{x * 100:.3g} %"  # noqa: E731
    ms = lambda x: f"{x * 1000:.3g} ms"  # noqa: E731
    return (f"bandwidth {pct(eff.bandwidth)} ({pct(bw[0])}–{pct(bw[1])}), compute {pct(eff.compute)} "
            f"({pct(compute[0])}–{pct(compute[1])}), overhead {ms(eff.overhead_s)} a step ({ms(overhead[0])}–{ms(overhead[1])})")  # fmt: skip


def fit(roof: roofs.Roofline, levels: Sequence[Level], source: str = "") -> Fit | None:
    """The efficiencies of ``roof``'s engine that best reproduce ``levels`` (None without a usable
    level). The overhead is solved by weighted least squares of the relative error at each grid point."""
    usable = tuple(lv for lv in levels if lv.concurrency > 0 and lv.tokens_per_s > 0 and math.isfinite(lv.tokens_per_s))
    if not usable:
        return None
    bw, compute = (g.reshape(-1) for g in np.meshgrid(GRID, GRID, indexing="ij"))
    weights = np.array([float(lv.samples) for lv in usable])
    # time per output token without the overhead (g), and the overhead's share of it per second (u)
    g = np.stack([1.0 / _tok_s(at_level(roof, lv), terms(at_level(roof, lv), lv.concurrency), bw, compute, np.zeros(1))
                  for lv in usable])  # fmt: skip
    y = np.array([1.0 / lv.tokens_per_s for lv in usable])[:, None]
    c = np.array([lv.concurrency for lv in usable])[:, None]
    v, u = g / y - 1.0, 1.0 / (c * y)
    w = weights[:, None]
    overhead = np.maximum(-(w * u * v).sum(axis=0) / (w * u * u).sum(axis=0), 0.0)
    errors = v + overhead[None, :] * u  # predicted time ÷ measured − 1 at each level and grid point
    rms = np.sqrt((w * errors**2).sum(axis=0) / weights.sum())
    best = int(rms.argmin())
    keep = np.flatnonzero(rms <= rms[best] + TOLERANCE)
    members = tuple(Efficiency(float(bw[i]), float(compute[i]), float(overhead[i])) for i in keep)
    # the error in tok/s terms: measured ÷ predicted − 1 (time error inverted)
    worst = float(np.abs(1.0 / (1.0 + errors[:, best]) - 1.0).max())
    return Fit(Efficiency(float(bw[best]), float(compute[best]), float(overhead[best])), members, float(rms[best]),
               worst, usable, source)  # fmt: skip
