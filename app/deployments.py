"""What another deployment of the same model gives (docs/plan.md "Another deployment"): its roofs on its
GPUs, the efficiencies it takes and the evidence behind them, its knee and the tok/s a replica holds.

Each deployment keeps the step model's structure (core/step_model.py). Its efficiencies come from:

- today's fit, where its kernels are today's family (the same compute capability and the same kernel
  path: AWQ on sm70 decodes on CUDA cores wherever it runs); its range is the fit's members, widened
  by the error a transfer within the family was measured to make (0 on today's own GPU);
- else the measured priors for its GPU (core/efficiency_priors.json), widened the same way.

Its knee is the one knee rule (DOMAIN.md §3: the next doubling buys under +25 % tok/s) applied to its
predicted curve, and never above its running limit (``--max-num-seqs``) or what its KV cache holds.
Pure functions of numbers and the datasheet table.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from app.formatting import number
from core import efficiency_priors as priors
from core import roofline as roofs
from core import step_model as step
from core.errors import UsageError
from core.knee import MeasuredLevel, sweet_spot_of
from core.mbu import GB, StepModel

TP_SIZES = (1, 2, 4, 8)
MEMORY_SHARE = 0.9  # of a GPU's memory for weights and KV cache (vLLM's default gpu_memory_utilization)
KNEE_LEVELS = tuple(2**i for i in range(11))  # 1 … 1,024 running requests an engine


@dataclass(frozen=True)
class Deployment:
    """One replica: ``gpus`` GPUs of ``spec`` as ``gpus ÷ tp`` engines of tensor-parallel size ``tp``."""

    spec: roofs.GpuSpec
    gpus: int
    tp: int

    @property
    def engines(self) -> int:
        return max(self.gpus // self.tp, 1)

    @property
    def label(self) -> str:
        per = f", {self.engines} engines of TP {self.tp}" if self.engines > 1 else f", TP {self.tp}"
        return f"{self.gpus}× {self.spec.name}{per}"


def find_gpu(name: str) -> roofs.GpuSpec:
    """The datasheet row named ``name`` (its name, case-insensitive, or what its pattern matches)."""
    exact = next((s for s in roofs.gpu_specs() if s.name.lower() == name.strip().lower()), None)
    found = exact or roofs.match_gpu(name)
    if found is None or not found.memory_gbps:
        known = ", ".join(s.name for s in roofs.gpu_specs())
        raise UsageError(f"--gpu {name!r} is not a GPU of core/gpu_specs.json", f"Name one of: {known}")
    return found


def deployment(spec: roofs.GpuSpec, gpus: int | None, tp: int | None) -> Deployment:
    """``--gpu``/``--gpus``/``--tp`` as a deployment (TP defaults to the GPUs, the GPUs to TP)."""
    for value, flag in ((gpus, "--gpus"), (tp, "--tp")):
        if value is not None and value < 1:
            raise UsageError(f"{flag} {value} must be 1 or more", f"e.g. {flag} 2")
    tp = tp or gpus or 1
    gpus = gpus or tp
    if gpus % tp:
        raise UsageError(f"--gpus {gpus} is not a whole number of engines of --tp {tp}", "make --gpus a multiple of --tp")
    return Deployment(spec, gpus, tp)


def kv_room(model: StepModel, memory_gb: float | None, context: float | None) -> tuple[int | None, str]:
    """How many whole requests of ``context`` tokens one engine's KV cache holds beside its weights
    (None: unknown; a request's cache is not split, so the count is floored), and a note when the
    weights alone do not fit."""
    if not memory_gb:
        return None, ""
    free = memory_gb * GB * MEMORY_SHARE - model.weight_bytes_per_gpu
    if free <= 0:
        return 0, (f"does not fit: {number(model.weight_bytes_per_gpu / GB)} GB of weights a GPU over "
                   f"{number(memory_gb * MEMORY_SHARE)} GB usable ({MEMORY_SHARE:.0%} of {number(memory_gb)} GB)")
    if not model.kv_bytes_per_token or not context:
        return None, ""
    return math.floor(free / (context * model.kv_bytes_per_token / max(model.tensor_parallel, 1))), ""


def other_roof(today: roofs.Roofline, dep: Deployment, precision: str, quantization: str | None) -> roofs.Roofline:
    """The same model, context and mix on ``dep``'s GPUs (one engine of TP ``dep.tp``): its datasheet
    bandwidth and the datasheet peaks of its kernels."""
    model = StepModel(today.model.weight_gb, dep.tp, float(dep.spec.memory_gbps or 0.0), today.model.kv_bytes_per_token)
    decode, prefill = roofs.kernel_peaks(dep.spec, precision, quantization)
    return roofs.roofline(model, today.mean_context, decode, today.active_params, prefill, today.prompt_per_output)


def smallest_fit(spec: roofs.GpuSpec, today: roofs.Roofline, precision: str, quantization: str | None) -> Deployment:
    """``spec`` at the smallest TP whose memory holds the weights and one request's KV cache."""
    for tp in TP_SIZES:
        dep = Deployment(spec, tp, tp)
        room, _ = kv_room(other_roof(today, dep, precision, quantization).model, spec.memory_gb, today.mean_context)
        if room is None or room >= 1.0:
            return dep
    return Deployment(spec, TP_SIZES[-1], TP_SIZES[-1])


def kernel_family(spec: roofs.GpuSpec | None, roof: roofs.Roofline) -> tuple[str | None, str, str]:
    """What decides whether a fit carries over: the GPU's compute capability and the units decode and
    prefill run on (their datasheet columns)."""
    column = lambda peak: "" if peak is None else peak.source.split(", ")[-1].split(" ")[0]  # noqa: E731
    return (spec.arch if spec else None), column(roof.compute), column(roof.prefill_peak)


@dataclass(frozen=True)
class Evidence:
    """The efficiencies a deployment takes, where they came from, and the margin its range carries."""

    fit: step.Fit
    source: str
    margin: float  # the transfer's measured error (a share) the range is widened by


def evidence_for(today_fit: step.Fit, today_spec: roofs.GpuSpec | None, today_roof: roofs.Roofline,
                 spec: roofs.GpuSpec, roof: roofs.Roofline, layers: int | None) -> Evidence:  # fmt: skip
    """Today's fit where ``spec``'s kernels are today's family, else the measured priors for its GPU."""
    if today_spec is not None and kernel_family(today_spec, today_roof) == kernel_family(spec, roof):
        if today_spec.name == spec.name:
            return Evidence(today_fit, "today's fit (today's GPU)", 0.0)
        margin, where = priors.family_transfer_error(spec.arch)
        said = f"±{number(margin * 100)} % for the transfer ({where})" if where else "no transfer error measured yet"
        return Evidence(today_fit, f"today's fit (the same kernels: {spec.arch}), {said}", margin)
    prior = priors.prior_for(spec.arch)
    why = "other kernels than today's" if today_spec is not None else "today's GPU unknown"
    margin = prior.transfer_error or priors.family_transfer_error(spec.arch)[0]
    return Evidence(prior.as_fit(layers), f"priors for {spec.arch or spec.name} ({why}): {prior.label}", margin)


def predicted_curve(roof: roofs.Roofline, ev: Evidence, engines: int, up_to: float) -> list[tuple[int, step.Prediction]]:
    """The prediction per replica at 1, 2, 4 … running an engine, up to ``up_to``."""
    return [(c, ev.fit.predict(roof, c).widened(ev.margin).scaled(engines)) for c in KNEE_LEVELS if c <= max(up_to, 1)]


RULE = "the knee rule on its predicted curve (the next doubling buys under +25 %)"


def rule_knee(roof: roofs.Roofline, ev: Evidence) -> tuple[int, str]:
    """The one knee rule on the predicted curve at every level tried (1 … 1,024), whatever caps the
    engine: a cap may lower the rule's answer, never stand in for it (a curve cut at the cap may not
    flatten before it, and the cap would then read as the knee)."""
    found = knee_of([(c, step.tokens_per_s(roof, ev.fit.best, c)) for c in KNEE_LEVELS])
    if found is not None:
        return found, RULE
    return KNEE_LEVELS[-1], f"the highest level tried (the predicted curve never flattens up to {KNEE_LEVELS[-1]:,})"


def knee_at(roof: roofs.Roofline, ev: Evidence, cap: int | None,
            cap_why: str = "its running limit (--max-num-seqs)") -> tuple[int, str]:  # fmt: skip
    """The rule's knee (:func:`rule_knee`), lowered to ``cap`` (whole running requests) where the cap
    is under it; ``cap_why`` says what the cap is."""
    knee, note = rule_knee(roof, ev)
    if cap is None or cap >= knee:
        return knee, note
    return max(cap, 1), f"{cap_why}, under the knee rule's {knee}"


def knee_of(curve: Sequence[tuple[int, float]]) -> int | None:
    """The one knee rule (DOMAIN.md §3, core/knee.py ``sweet_spot_of``) on a predicted curve of
    (running, tok/s): the first level from which doubling buys under +25 %; None: it never flattens."""
    return sweet_spot_of([MeasuredLevel(c, t) for c, t in curve], None).knee


@dataclass(frozen=True)
class Option:
    """What one replica of a deployment gives: its roofs, evidence, knee and the replicas a demand needs."""

    label: str
    today: bool
    evidence: str  # where its efficiencies came from
    assumes: str  # what the row takes as given
    steps_bound_per_s: float  # one engine's decode steps/s at most (the weights' read)
    compute_tok_s: float | None  # per replica, prefill at the mix counted
    knee: float  # running requests per engine
    knee_note: str
    predicted: step.Prediction  # per replica at the knee: the one figure, and its range
    replicas: int | None  # None: it does not fit
    replicas_range: tuple[int, int] | None
    memory_note: str = ""
    measured_tok_s: float | None = None  # today's own curve at the sweet spot (per replica)
    running_limit: float | None = None

    @property
    def capacity(self) -> float:
        """tok/s one replica holds at its knee (the headline's and the table's one figure)."""
        return self.predicted.tokens_per_s


def replicas_for(demand: float, prediction: step.Prediction) -> tuple[int, tuple[int, int]]:
    """Replicas at the predicted tok/s each, and the range the prediction's range gives."""
    need = lambda per: max(1, math.ceil(demand / per - 1e-9)) if per > 0 else 0  # noqa: E731
    return need(prediction.tokens_per_s), (need(prediction.high), need(prediction.low))


def limit_of(running_limit: float | None, room: int | None, context: float | None) -> tuple[int | None, str]:
    """The lower of the running limit and the KV room, as whole requests, and which it is (in words)."""
    found = [(math.floor(v), why) for v, why in (
        (running_limit, "its running limit (--max-num-seqs {n})"),
        (room, "what its KV cache holds ({n} of " + number(context or 0.0) + " tokens)"),
    ) if v is not None and v >= 1]  # fmt: skip
    if not found:
        return None, ""
    cap, why = min(found, key=lambda f: f[0])
    return cap, why.format(n=f"{cap:,}" if why.startswith("its running") else f"{cap:,} request{'s' * (cap != 1)}")


def assumptions(roof: roofs.Roofline) -> str:
    """What a row takes as given beside today's model, context and mix: its bandwidth and peaks."""
    peaks = ", ".join(dict.fromkeys(f"{p.source.removeprefix('datasheet: ')} {number(p.tflops)} TFLOP/s"
                                    for p in (roof.compute, roof.prefill_peak) if p is not None)) or "no compute peak"  # fmt: skip
    return f"{number(roof.model.peak_gbps)} GB/s a GPU; {peaks}"


def option(roof: roofs.Roofline, ev: Evidence, dep: Deployment, demand: float,
           running_limit: float | None) -> Option:  # fmt: skip
    """``roof`` (one engine) as a replica of ``dep``: its knee, its predicted tok/s and replicas."""
    room, fit_note = kv_room(roof.model, dep.spec.memory_gb, roof.mean_context)
    cap, cap_why = limit_of(running_limit, room, roof.mean_context)
    fits = room is None or room >= 1
    knee, note = knee_at(roof, ev, cap, cap_why)
    prediction = ev.fit.predict(roof, knee).widened(ev.margin).scaled(dep.engines)
    replicas, spread = replicas_for(demand, prediction) if fits else (None, None)
    compute = roof.compute_tok_s
    return Option(
        label=dep.label, today=False, evidence=ev.source, assumes=assumptions(roof),
        steps_bound_per_s=roof.model.step_bound_per_s, compute_tok_s=None if compute is None else compute * dep.engines,
        knee=knee, knee_note=note, predicted=prediction, replicas=replicas, replicas_range=spread,
        memory_note=fit_note or ("" if fits else "its KV cache holds no request of this context beside the weights"),
        running_limit=running_limit,
    )  # fmt: skip


def same_hardware(dep: Deployment, today_spec: roofs.GpuSpec | None, today: roofs.Roofline, engines: int) -> bool:
    """Whether ``dep`` is today's deployment asked again: its GPU, TP and engines."""
    return (today_spec is not None and dep.spec.name == today_spec.name and dep.tp == today.model.tensor_parallel
            and dep.engines == engines)  # fmt: skip


def as_asked(today: Option, dep: Deployment) -> Option:
    """Today's row, relabelled as the deployment asked: the same hardware gives the same figures."""
    return dataclasses.replace(today, label=dep.label, today=False,
                               evidence="today's own curve and fit (the same hardware as today's)",
                               assumes="today's engine settings; its sweet spot measured there",
                               knee_note="today's sweet spot")  # fmt: skip


def candidates(names: Sequence[str], today: roofs.Roofline, precision: str, quantization: str | None) -> list[Deployment]:
    """Each named GPU at the smallest TP that holds the model."""
    return [smallest_fit(find_gpu(name), today, precision, quantization) for name in names]
