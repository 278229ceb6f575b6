"""The Operating point page's arithmetic: where the knee of a throughput curve is and why, and how far
the measured points sit under the roofline. Pure functions over records (no I/O, no Streamlit).

The knee the page shows is the one knee rule's (core/knee.py ``sweet_spot_of``), as the target's
sweet spot resolved it (app/sweet_spot.py): the page draws what every other surface shows.

The roofline is the step model's bound on aggregate decode tok/s at each concurrency
(core/mbu.py ``StepModel.roofline_tokens_per_s``, docs/ceiling.md); the gap between it and what the
engine delivers is what kernels, communication and scheduling cost, stated as a ratio.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from app.formatting import minute, number, percent
from core import roofline as roofs
from core.mbu import StepModel
from core.model_shape import ModelShape
from core.model_shape import resolve as resolve_shape
from db.results import BenchRun, SeriesPoint, SweepRun, TargetInfo, WindowFigures

# The reference deployment of DOMAIN.md §2: (concurrency, output tok/s, TTFT P95 s or None).
REFERENCE_LEVELS: tuple[tuple[int, float, float | None], ...] = ((8, 85.0, 1.5), (16, 126.0, None), (32, 145.0, 4.8))


def server(url: str | None) -> str:
    """``scheme://host:port`` of ``url``: what tells two URLs of one server apart from another's."""
    parts = urlsplit(url or "")
    return f"{parts.scheme}://{parts.netloc}"


def sweeps_of(info: TargetInfo | None, sweeps: Sequence[SweepRun]) -> tuple[list[SweepRun], list[SweepRun]]:
    """``sweeps`` split into those that measured ``info``'s server and the others.

    A run stored with its target belongs to that target; an older one (no target) to the target
    whose ``vllm_url`` has the run's scheme, host and port.
    """
    mine: list[SweepRun] = []
    others: list[SweepRun] = []
    for run in sweeps:
        ours = info is not None and (
            run.target == info.name or (run.target is None and server(run.url) == server(info.vllm_url))
        )
        (mine if ours else others).append(run)
    return mine, others


def bench_text(benches: Sequence[BenchRun]) -> str:
    """Each imported benchmark with its date, file and settings, and its levels' concurrency provenance:
    ``vllm bench serve of 2026-12-06 03:01 (c8.json; backend=vllm, max_concurrency=8): 1 level``."""
    parts = []
    for run in benches:
        when = minute(run.run_at)
        settings = ", ".join(f"{k}={v}" for k, v in sorted(run.settings.items(), key=str))
        sources = sorted({p.concurrency_source for p in run.points})
        parts.append(f"{run.tool} of {when} ({run.file_name}; {settings}): {len(run.points)} level(s), "
                     f"concurrency from {' and '.join(sources)}")  # fmt: skip
    return "; ".join(parts) + "."


# --- The roofline ----------------------------------------------------------------------------------

ROOFLINE_POINTS = 48  # enough for a smooth curve on a half-page chart
# Steps whose average running is under half a request decoded (almost) nothing: no concurrency to judge.
IDLE_RUNNING = 0.5
GAP_CAUSES = "the rest goes to compute, communication and scheduling"
# with both roofs known, the gap is what neither roof explains: kernels under their peaks and overheads
ATTAINABLE_CAUSES = ("the lower of the bandwidth roof and the compute roof with prefill at the mix; the rest is kernels "
                     "reaching less than their peaks and fixed costs a step (launches, all-reduce, scheduling)")


def roofline_curve(model: StepModel, mean_context: float | None, up_to: float,
                   points: int = ROOFLINE_POINTS) -> list[tuple[float, float]]:  # fmt: skip
    """(concurrency, tok/s) of the roofline at ``points`` evenly spaced concurrencies from 1 to ``up_to``."""
    top = max(up_to, 1.0)
    concurrencies = [1.0 + (top - 1.0) * i / max(points - 1, 1) for i in range(points)]
    return [(c, model.roofline_tokens_per_s(c, mean_context)) for c in concurrencies]


@dataclass(frozen=True)
class Level:
    """Measured steps grouped at one concurrency: their mean aggregate tok/s and how many steps they are."""

    concurrency: int
    tokens_per_s: float
    steps: int


def measured_levels(points: Iterable[SeriesPoint]) -> list[Level]:
    """Steps with tok/s and running, grouped by running rounded to a whole request (idle steps left out)."""
    groups: dict[int, list[float]] = {}
    for p in points:
        if p.tokens_per_s is not None and p.running_avg is not None and p.running_avg >= IDLE_RUNNING:
            groups.setdefault(round(p.running_avg), []).append(p.tokens_per_s)
    return [Level(c, sum(v) / len(v), len(v)) for c, v in sorted(groups.items())]


@dataclass(frozen=True)
class RooflineGap:
    """What the engine delivered at one concurrency against the roofline there."""

    concurrency: int
    tokens_per_s: float
    roofline_tokens_per_s: float
    steps: int

    @property
    def share(self) -> float:
        """Measured ÷ roofline (0–1 when the model's inputs are right)."""
        return self.tokens_per_s / self.roofline_tokens_per_s


def roofline_gaps(model: StepModel, mean_context: float | None, levels: Sequence[Level],
                  both: roofs.Roofline | None = None) -> list[RooflineGap]:  # fmt: skip
    """Each measured level against the roofline at its concurrency: the attainable (the lower of the
    bandwidth roof and the compute roof with prefill) where ``both`` knows the compute roof, else the
    bandwidth roof alone."""
    bound = both.attainable_tok_s if both is not None and both.compute_tok_s is not None else \
        (lambda c: model.roofline_tokens_per_s(c, mean_context))  # fmt: skip
    return [RooflineGap(lv.concurrency, lv.tokens_per_s, bound(lv.concurrency), lv.steps) for lv in levels]


def gap_text(gaps: Sequence[RooflineGap], attainable: bool = False) -> str:
    """``the engine delivers 4 % of the roofline at 32: the rest goes to compute, communication and
    scheduling`` (the bandwidth roof alone) or ``… 15 % of the attainable at 32 …`` (both roofs) at the
    concurrency it ran at most, then the other levels (``; 6 % at 16, 9 % at 8``)."""
    if not gaps:
        return ""
    main = max(gaps, key=lambda g: (g.steps, g.concurrency))
    others = sorted((g for g in gaps if g is not main), key=lambda g: -g.steps)[:4]
    what, causes = ("the attainable", ATTAINABLE_CAUSES) if attainable else ("the roofline", GAP_CAUSES)
    text = f"the engine delivers {_share(main.share)} of {what} at {main.concurrency}: {causes}"
    if others:
        text += "; " + ", ".join(f"{_share(g.share)} at {g.concurrency}" for g in others)
    return text


def _share(fraction: float) -> str:
    # a share under 1 % still reads as a share, not "0 %"
    return f"{number(fraction * 100)} %" if fraction < 0.01 else percent(fraction)


def roofline_inputs_text(model: StepModel, mean_context: float | None) -> str:
    """The model's inputs, as the roofline uses them: ``c × 900 GB/s ÷ (40 GB ÷ TP 8 + c × 1,234 tokens ×
    327,680 B ÷ TP 8)``, or, without a KV size or a context, what the curve leaves out."""
    weights = f"{number(model.weight_gb)} GB ÷ TP {model.tensor_parallel}"
    if model.kv_bytes_per_token is None or mean_context is None:
        missing = "KV bytes per token" if model.kv_bytes_per_token is None else "the mean context"
        return (f"c × {number(model.peak_gbps)} GB/s ÷ ({weights}); {missing} unknown, so the KV cache each "
                "step reads is left out and the curve is a straight line (higher than the true bound)")
    return (f"c × {number(model.peak_gbps)} GB/s ÷ ({weights} + c × {number(mean_context)} tokens × "
            f"{number(model.kv_bytes_per_token)} B ÷ TP {model.tensor_parallel})")


# --- Both roofs: compute and bandwidth --------------------------------------------------------------


def context_per_request(figures: WindowFigures) -> float | None:
    """The context one running request holds: the KV tokens resident ÷ the running requests (the
    cache itself), else the request-length histograms' mean context; None without either."""
    resident, running = figures.kv_resident_tokens_avg, figures.running_avg
    if resident is not None and running:
        return resident / running
    return figures.mean_context_tokens


def prompt_per_output(figures: WindowFigures) -> float | None:
    """Prompt tokens prefilled per output token over the window (None: no output, or no prompt count)."""
    tok, prompt = figures.tokens_per_s, figures.prompt_tokens_per_s
    return prompt / tok if tok and prompt is not None and tok > 0 else None


def served_shape(figures: WindowFigures, models: Sequence[str] = ()) -> ModelShape | None:
    """The served model's shape from the table of well-known architectures, by the window's model name
    or the first of ``models`` (the target's served names) that it knows; None: unknown."""
    if figures.ceiling is None:
        return None
    for name in (figures.model, *models):
        found = resolve_shape(name, figures.ceiling.tensor_parallel, None, None)[0] if name else None
        if found is not None:
            return found
    return None


def at_mix(roof: roofs.Roofline | None, prompt_per_output: float | None) -> roofs.Roofline | None:
    """``roof`` with its compute roof's prefill at ``prompt_per_output`` (the one mix the Plan page and
    `plan` read, app/traffic_mix.py), in place of the window's own."""
    return dataclasses.replace(roof, prompt_per_output=prompt_per_output) if roof else roof


def target_roofline(figures: WindowFigures, shape: ModelShape | None = None) -> roofs.Roofline | None:
    """The roofline of a window's target with its compute roof, prefill at the window's mix: peaks
    configured (targets[].gpu.peak_tflops) or the datasheet's for the GPUs' kernels (AWQ on sm70:
    decode on CUDA cores, prefill on tensor cores; core/roofline.py ``kernel_peaks``); active
    parameters configured, else the served model's shape (``shape``, else the table by its name);
    None without a step model."""
    c = figures.ceiling
    if c is None:
        return None
    shape = shape or served_shape(figures)
    quant = shape.quantization if shape is not None else None
    decode, prefill = roofs.target_peaks(c.peak_tflops, tuple(g.name for g in figures.gpus),
                                         c.compute_precision or roofs.DEFAULT_PRECISION, quant)  # fmt: skip
    params = c.active_params_b * 1e9 if c.active_params_b is not None else (shape.active_params if shape else None)
    model = c.model()
    if model.kv_bytes_per_token is None and shape is not None:
        model = dataclasses.replace(model, kv_bytes_per_token=shape.kv_bytes_per_token)
    return roofs.roofline(model, context_per_request(figures), decode, params, prefill, prompt_per_output(figures))


def roofline_json(roof: roofs.Roofline | None, figures: WindowFigures) -> dict[str, Any] | None:
    """``status --json``'s ``roofline``: both roofs, the crossover batch and the measured point at the
    window's concurrency (running requests, average) against the attainable tok/s there."""
    if roof is None:
        return None
    c = figures.running_avg
    attainable = None if c is None or c <= 0 else roof.attainable_tok_s(c)
    tok = figures.tokens_per_s
    return {
        "compute_tflops": None if roof.compute is None else roof.compute.tflops,
        "compute_source": None if roof.compute is None else roof.compute.source,
        "active_params": roof.active_params,
        "compute_tok_s": roof.compute_tok_s,
        "decode_compute_tok_s": roof.decode_compute_tok_s,
        "prefill_tflops": None if roof.prefill_peak is None else roof.prefill_peak.tflops,
        "prefill_source": None if roof.prefill_peak is None else roof.prefill_peak.source,
        "prompt_per_output": roof.prompt_per_output,
        "bandwidth_gbps": roof.model.peak_gbps,
        "bandwidth_tok_s": None if c is None or c <= 0 else roof.bandwidth_tok_s(c),
        "crossover_batch": roof.crossover_batch,
        "concurrency": c,
        "attainable_tok_s": attainable,
        "measured_tok_s": tok,
        "measured_share_of_attainable": None if tok is None or not attainable else tok / attainable,
        "note": roof.note or None,
    }


def roofline_text(roof: roofs.Roofline | None, figures: WindowFigures, mix_from: str = "") -> str:
    """``compute roof 1,794 tok/s (datasheet: V100 SXM2, fp16_cuda_core, 31.4 TFLOP/s) · bandwidth roof
    4,321 tok/s at 32 running · attainable 1,794 · crossover at 11.1 running · measured 145 tok/s: 8.1 %
    of attainable``; or the line that says which setting adds the compute roof. ``mix_from``: where the
    prompt:output mix was read (app/traffic_mix.py), said beside it."""
    if roof is None:
        return NO_ROOFLINE
    data = roofline_json(roof, figures) or {}
    if roof.compute_tok_s is None:
        compute = roof.note
    else:
        assert roof.compute is not None
        compute = f"compute roof {number(roof.compute_tok_s)} tok/s ({roof.compute.source}, {number(roof.compute.tflops)} TFLOP/s"
        if roof.prefill_peak is not None and roof.prefill_peak != roof.compute:
            compute += f"; prefill {roof.prefill_peak.source}, {number(roof.prefill_peak.tflops)} TFLOP/s"
        said = f" ({mix_from})" if mix_from else ""
        compute += (f"; prefill at {number(roof.prompt_per_output)} prompt tokens an output token{said}, decode alone "
                    f"{number(roof.decode_compute_tok_s)})" if roof.prompt_per_output else "; decode only: no prompt count)")
    parts = [compute]
    if data.get("concurrency"):
        parts.append(f"bandwidth roof {number(data['bandwidth_tok_s'])} tok/s at {number(data['concurrency'])} running")
        parts.append(f"attainable {number(data['attainable_tok_s'])} tok/s")
    if roof.crossover_batch is not None:
        parts.append(f"the roofs cross at {number(roof.crossover_batch)} running")
    if data.get("measured_share_of_attainable") is not None:
        parts.append(f"measured {number(data['measured_tok_s'])} tok/s: {_share(data['measured_share_of_attainable'])} of attainable")
    return " · ".join(parts)


# --- Per-request decode speed ---------------------------------------------------------------------


@dataclass(frozen=True)
class RequestSpeed:
    """One step's decode speed per request: aggregate tok/s ÷ running, and 1 ÷ ITL P95 (the slow end)."""

    ts: float
    running: float
    per_request_tokens_per_s: float | None
    itl_tokens_per_s: float | None


def request_speeds(points: Iterable[SeriesPoint]) -> list[RequestSpeed]:
    """Steps with running requests, each with its per-request speeds (None where a figure is missing)."""
    out = []
    for p in points:
        if p.running_avg is None or p.running_avg < IDLE_RUNNING:
            continue
        # the figure's own: never above steps/s, where the step idled part of the time (db/derived.py)
        per_request = p.decode_tok_s_per_request if p.decode_tok_s_per_request is not None or p.tokens_per_s is None \
            else p.tokens_per_s / p.running_avg
        itl = None if not p.itl_p95_s else 1.0 / p.itl_p95_s
        if per_request is not None or itl is not None:
            out.append(RequestSpeed(p.ts, p.running_avg, per_request, itl))
    return out


# --- What the page shows ----------------------------------------------------------------------------

NO_ROOFLINE = (
    "No roofline: this target has no ceiling inputs. Set targets[].ceiling.weight_gb and tensor_parallel "
    "(and bandwidth_gbps where no NVML reading gives the peak) to draw it; kv_bytes_per_token where vLLM's "
    "cache_config_info does not give it."
)


@dataclass(frozen=True)
class Roofline:
    """The roofline of one target over a range: the curve, the measured levels against it, its inputs."""

    curve: list[tuple[float, float]]
    gaps: list[RooflineGap]
    single_request_tokens_per_s: float
    inputs: str
    attainable: bool = False  # the gaps are against both roofs (the compute roof known)

    def text(self) -> str:
        """What the page says of it: the gap as a ratio, or that no measured level was there to judge."""
        gap = gap_text(self.gaps, self.attainable)
        return (gap[0].upper() + gap[1:] + ".") if gap else "No measured step with running requests in this range."

    def caption(self) -> str:
        return (f"Pink line: the bandwidth roofline, the most aggregate decode tok/s each concurrency c allows if every "
                f"step read at peak bandwidth: {self.inputs}. The context is the range's KV tokens resident per running "
                "request (else the request-length histograms' mean). Grey dashes: the compute roof, each output token's "
                "decode FLOPs (2 × active parameters) plus its share of the prompts' prefill FLOPs at the range's mix, "
                "over peak FLOP/s × TP; the attainable tok/s is the lower of the two.")  # fmt: skip


def roofline(model: StepModel | None, mean_context: float | None, points: Sequence[SeriesPoint],
             up_to: float, both: roofs.Roofline | None = None) -> Roofline | None:  # fmt: skip
    """The roofline of ``model`` from 1 to ``up_to`` running requests with the measured ``points`` against
    it (against the attainable where ``both`` knows the compute roof); None without a model (no ceiling
    inputs: :data:`NO_ROOFLINE` says which setting adds it)."""
    if model is None:
        return None
    return Roofline(
        curve=roofline_curve(model, mean_context, up_to),
        gaps=roofline_gaps(model, mean_context, measured_levels(points), both),
        single_request_tokens_per_s=model.single_request_tokens_per_s(mean_context),
        inputs=roofline_inputs_text(model, mean_context),
        attainable=both is not None and both.compute_tok_s is not None,
    )


def concurrency_reach(points: Iterable[SeriesPoint], levels: Iterable[tuple[float, object, object]],
                      marks: Iterable[tuple[float, str]]) -> float:  # fmt: skip
    """The largest concurrency the page's chart shows: measured running, a level, or a mark."""
    seen = [p.running_avg for p in points if p.running_avg is not None]
    return max([*seen, *(c for c, *_ in levels), *(at for at, _ in marks), 1.0])


def per_request_text(speeds: Sequence[RequestSpeed], bound: float | None) -> str:
    """``One request decodes at most 179 tok/s (the roofline at 1); measured: 4.5 tok/s per request at 32
    running (tok/s ÷ running), 4 tok/s at the slow end (1 ÷ ITL P95)``: the busiest concurrency's medians."""
    head = (f"One request decodes at most {number(bound)} tok/s (the roofline at 1)" if bound
            else "No single-request bound (no ceiling inputs)")  # fmt: skip
    if not speeds:
        return head + "."
    counts: dict[int, list[RequestSpeed]] = {}
    for s in speeds:
        counts.setdefault(round(s.running), []).append(s)
    at, busiest = max(counts.items(), key=lambda kv: (len(kv[1]), kv[0]))
    per = _median([s.per_request_tokens_per_s for s in busiest])
    itl = _median([s.itl_tokens_per_s for s in busiest])
    return (f"{head}; measured at {at} running: {number(per)} tok/s per request (tok/s ÷ running), "
            f"{number(itl)} tok/s at the slow end (1 ÷ ITL P95).")


def _median(values: Sequence[float | None]) -> float | None:
    seen = sorted(v for v in values if v is not None)
    return seen[len(seen) // 2] if seen else None
