"""Capacity what-if (docs/plan.md "Capacity what-if"): how many replicas of today's deployment hold a
demand inside the sweet spot, and what another GPU or tensor-parallel size would give.

Every figure of another deployment is the roofline (core/roofline.py: the bandwidth roof of the step
model and the compute roof) scaled by this target's own measured ratio to its own roofline:

    ratio           = median over calibration samples of measured tok/s ÷ attainable tok/s(c, context)
    predicted(c)    = ratio × attainable tok/s(c) of the deployment asked about
    its range       = the lowest and highest per-level median ratio × attainable tok/s(c)

Calibration samples are the target's stored production minutes (running requests, output tok/s and the
context each request holds) or the levels of its latest stored load sweep. The knee of another
deployment moves with its roofs' crossover (the batch where a step stops riding free on the weight
read); its KV cache must hold the knee's requests beside the weights.

:func:`plan` reads through the query facade (db/queries.py Reader) and app/sweet_spot.py; the rest are
pure functions of numbers.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from app.formatting import number
from app.operating_point import sweeps_of, target_roofline
from app.sweet_spot import SweetSpot, resolve
from core import roofline as roofs
from core.errors import UsageError
from core.knee import MeasuredLevel, sweet_spot_of
from core.mbu import GB, StepModel
from core.settings import Settings, effective_sweetspot
from db.queries import Reader
from db.results import SweepRun, WindowFigures

SPAN_S = 7 * 86400.0  # the history read: the last 7 days
MINUTE_S, HOUR_S = 60.0, 3600.0
MIN_MINUTES = 30  # production minutes with running requests a calibration on minutes needs
IDLE_RUNNING = 0.5  # a minute with fewer running requests decoded (almost) nothing
MINUTES, SWEEP = "minutes", "sweep"
TP_SIZES = (1, 2, 4, 8)
# The deployments asked about when none is named: the same model on each, at the smallest TP that fits.
CANDIDATES = ("A100 80GB SXM", "H100 SXM", "H200", "B200")
MEMORY_SHARE = 0.9  # of a GPU's memory for weights and KV cache (vLLM's default gpu_memory_utilization)
CURVE_AT = (1, 2, 4, 8, 16, 32, 64, 128)
NO_CEILING_FIX = (
    "Set targets[].ceiling.weight_gb and tensor_parallel (and bandwidth_gbps where no NVML reading gives the "
    "peak), or targets[].model_config for the model's shape; active_params_b and gpu.peak_tflops add the compute roof"
)


# --- Calibration ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One measurement: running requests and output tok/s of one engine, and each request's context."""

    concurrency: float
    tokens_per_s: float
    context: float | None = None


@dataclass(frozen=True)
class LevelRatio:
    """The median measured ÷ attainable ratio of the samples at one concurrency (rounded)."""

    concurrency: int
    ratio: float
    samples: int
    tokens_per_s: float | None = None  # the median measured tok/s of one engine there


@dataclass(frozen=True)
class Calibration:
    """This target's measured share of its own roofline, with its spread across levels."""

    kind: str  # minutes or sweep
    source: str  # "1,234 production minutes" / "the sweep of 2026-12-06 03:01"
    ratio: float
    levels: tuple[LevelRatio, ...]
    samples: int

    @property
    def low(self) -> float:
        return min(lv.ratio for lv in self.levels)

    @property
    def high(self) -> float:
        return max(lv.ratio for lv in self.levels)

    @property
    def span(self) -> tuple[int, int]:
        return self.levels[0].concurrency, self.levels[-1].concurrency

    def words(self) -> str:
        """``7.1 % of its roofline (median of 1,234 production minutes at 1–8 running; 6.5 % to 7.8 % across 8
        levels)``: the ratio and how far it moved, which is the uncertainty every prediction carries."""
        lo, hi = self.span
        at = f"{lo}" if lo == hi else f"{lo}–{hi}"
        spread = ("one level only: no spread measured" if len(self.levels) == 1
                  else f"{_pct(self.low)} to {_pct(self.high)} across {len(self.levels)} levels")  # fmt: skip
        return f"{_pct(self.ratio)} of its roofline (median of {self.source} at {at} running; {spread})"


def calibrate(roof: roofs.Roofline, samples: Iterable[Sample], kind: str, source: str,
              levels: tuple[float, float] | None = None) -> Calibration | None:  # fmt: skip
    """The ratio of ``samples`` (within ``levels``, inclusive) to ``roof``'s attainable tok/s at each
    one's concurrency and context; None without a usable sample."""
    by_level: dict[int, list[float]] = {}
    measured: dict[int, list[float]] = {}
    for s in samples:
        if s.concurrency < IDLE_RUNNING or not s.tokens_per_s > 0 or not math.isfinite(s.tokens_per_s):
            continue
        if levels is not None and not levels[0] <= s.concurrency <= levels[1]:
            continue
        at = roof if s.context is None else dataclasses.replace(roof, mean_context=s.context)
        attainable = at.attainable_tok_s(s.concurrency)
        if attainable > 0:
            by_level.setdefault(round(s.concurrency), []).append(s.tokens_per_s / attainable)
            measured.setdefault(round(s.concurrency), []).append(s.tokens_per_s)
    if not by_level:
        return None
    every = [r for ratios in by_level.values() for r in ratios]
    rows = tuple(LevelRatio(c, statistics.median(r), len(r), statistics.median(measured[c])) for c, r in sorted(by_level.items()))
    return Calibration(kind, source, statistics.median(every), rows, len(every))


@dataclass(frozen=True)
class Prediction:
    """tok/s predicted (the median ratio) and its range (the lowest and highest level's ratio)."""

    tokens_per_s: float
    low: float
    high: float


def predict(roof: roofs.Roofline, cal: Calibration, concurrency: float, engines: int = 1) -> Prediction:
    """What ``engines`` engines of ``roof`` deliver at ``concurrency`` running requests each, scaled by ``cal``."""
    attainable = roof.attainable_tok_s(concurrency) * engines
    return Prediction(cal.ratio * attainable, cal.low * attainable, cal.high * attainable)


def parse_levels(text: str | None) -> tuple[float, float] | None:
    """``1-8`` → (1, 8); None for None. A malformed range is a UsageError."""
    if text is None:
        return None
    lo, sep, hi = text.partition("-")
    try:
        bounds = (float(lo), float(hi if sep else lo))
    except ValueError:
        raise UsageError(f"--levels {text!r} is not a range of running requests", "write it like 1-8") from None
    if not all(math.isfinite(b) and b > 0 for b in bounds) or bounds[0] > bounds[1]:
        raise UsageError(f"--levels {text!r}: both ends must be above 0, the first the smaller", "write it like 1-8")
    return bounds


def mix_context(mix: str) -> float | None:
    """The context a running request of a sweep's mix holds on average: each class's prompt plus half its
    output, weighted by its share × its output (a request runs as long as it decodes)."""
    from sweep.workload import parse_mix

    try:
        classes = parse_mix(mix)
    except UsageError:
        return None
    weights = [(share * sum(c.max_tokens) / 2, sum(c.input_tokens) / 2 + sum(c.max_tokens) / 4) for c, share in classes]
    total = sum(w for w, _ in weights)
    return sum(w * ctx for w, ctx in weights) / total if total else None


# --- Demand ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Demand:
    """Output tok/s to hold, with the request rate and lengths behind it where known."""

    tokens_per_s: float
    requests_per_s: float | None
    prompt_tokens: float | None  # per request
    output_tokens: float | None  # per request
    source: str

    def text(self) -> str:
        rate = f"{number(self.requests_per_s)} req/s × {number(self.output_tokens)} output tokens = " if \
            self.requests_per_s and self.output_tokens else ""  # fmt: skip
        prompt = f" (prompts of {number(self.prompt_tokens)} tokens)" if self.prompt_tokens else ""
        return f"{rate}{number(self.tokens_per_s)} output tok/s{prompt}, {self.source}"


def positive(value: float | None, flag: str) -> float | None:
    """``value`` when it is a number above 0; a UsageError naming ``flag`` otherwise (0, negative, NaN)."""
    if value is None:
        return None
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{flag} {value:g} is not a demand: it must be a number above 0", f"For example {flag} 2.5")
    return value


@dataclass(frozen=True)
class Observed:
    """The last 7 days' traffic: its peak hour (output tok/s), and the mean request lengths."""

    peak_tokens_per_s: float | None
    peak_requests_per_s: float | None
    peak_at: float | None
    prompt_tokens: float | None
    output_tokens: float | None


def observed(hours: dict[str, list[Any]]) -> Observed:
    """The peak hour of hourly columns (``ts``, ``tokens_per_s``, ``requests_per_s``,
    ``prompt_tokens_per_s``) and the lengths of all their requests."""
    rows = [(ts, t, r, p) for ts, t, r, p in zip(hours["ts"], hours["tokens_per_s"], hours["requests_per_s"],
            hours["prompt_tokens_per_s"], strict=True) if t is not None and t > 0]  # fmt: skip
    if not rows:
        return Observed(None, None, None, None, None)
    ts, tok, req, _ = max(rows, key=lambda row: row[1])
    requests = sum(r or 0.0 for _, _, r, _ in rows)
    output = sum(t for _, t, r, _ in rows if r) / requests if requests else None
    prompt = sum(p or 0.0 for _, _, r, p in rows if r) / requests if requests else None
    return Observed(tok, req, ts, prompt, output)


def demand_of(seen: Observed, rps: float | None, tps: float | None) -> Demand:
    """The demand asked (``--demand-tps``, ``--demand-rps`` at the observed lengths), else the peak hour."""
    if tps is not None:
        return Demand(tps, tps / seen.output_tokens if seen.output_tokens else None, seen.prompt_tokens,
                      seen.output_tokens, "as asked (--demand-tps)")  # fmt: skip
    if rps is not None:
        if not seen.output_tokens:
            raise UsageError("--demand-rps needs the observed output length, and no finished request is stored "
                             "in the last 7 days", "Give --demand-tps (output tok/s) instead")  # fmt: skip
        return Demand(rps * seen.output_tokens, rps, seen.prompt_tokens, seen.output_tokens,
                      "as asked (--demand-rps, at the observed output length)")  # fmt: skip
    if seen.peak_tokens_per_s is None or seen.peak_at is None:
        raise UsageError("no traffic stored in the last 7 days to take a peak hour from",
                         "Give --demand-tps or --demand-rps, or let the collector store an hour of traffic")  # fmt: skip
    when = time.strftime("%Y-%m-%d %H:00", time.localtime(seen.peak_at))
    return Demand(seen.peak_tokens_per_s, seen.peak_requests_per_s, seen.prompt_tokens, seen.output_tokens,
                  f"the peak hour of the last 7 days ({when})")  # fmt: skip


# --- Deployments -----------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class Option:
    """What one deployment would give: its roofs, its knee and the replicas the demand needs."""

    label: str
    today: bool
    steps_bound_per_s: float  # one engine's decode steps/s at most (the weights' read)
    compute_tok_s: float | None  # per replica
    crossover: float | None  # running requests per engine where the roofs meet
    knee: float  # running requests per engine
    knee_note: str
    attainable_tok_s: float  # the roofline per replica at the knee
    predicted: Prediction  # per replica at the knee, scaled by the calibration
    replicas: int | None  # None: it does not fit
    replicas_range: tuple[int, int] | None
    memory_note: str = ""
    measured_tok_s: float | None = None  # today's own curve at the sweet spot (per replica)

    @property
    def capacity(self) -> float:
        """tok/s one replica holds at its knee: today's own curve where measured, else the prediction."""
        return self.measured_tok_s if self.measured_tok_s else self.predicted.tokens_per_s


def replicas_for(demand: float, prediction: Prediction, capacity: float) -> tuple[int, tuple[int, int]]:
    """Replicas at ``capacity`` tok/s each, and the range the calibration's spread gives."""
    need = lambda per: max(1, math.ceil(demand / per - 1e-9)) if per > 0 else 0  # noqa: E731
    return need(capacity), (need(prediction.high), need(prediction.low))


def kv_room(model: StepModel, memory_gb: float | None, context: float | None) -> tuple[float | None, str]:
    """How many requests of ``context`` tokens one engine's KV cache holds beside its weights (None:
    unknown), and a note when the weights alone do not fit."""
    if not memory_gb:
        return None, ""
    free = memory_gb * GB * MEMORY_SHARE - model.weight_bytes_per_gpu
    if free <= 0:
        return 0.0, (f"does not fit: {number(model.weight_bytes_per_gpu / GB)} GB of weights a GPU over "
                     f"{number(memory_gb * MEMORY_SHARE)} GB usable ({MEMORY_SHARE:.0%} of {number(memory_gb)} GB)")
    if not model.kv_bytes_per_token or not context:
        return None, ""
    return free / (context * model.kv_bytes_per_token / max(model.tensor_parallel, 1)), ""


def roofline_knee(roof: roofs.Roofline) -> int | None:
    """The knee of ``roof``'s attainable tok/s by the one knee rule (core/knee.py ``sweet_spot_of``) over
    1, 2, 4 … 4,096 running requests: the first from which doubling buys under +25 %; None: it never flattens."""
    found = sweet_spot_of([MeasuredLevel(c, roof.attainable_tok_s(c)) for c in (2**i for i in range(13))], None)
    return found.knee


def option(roof: roofs.Roofline, cal: Calibration, demand: float, knee_today: float, roof_knee_today: int | None,
           dep: Deployment | None = None, measured: float | None = None, engines: int = 1) -> Option:  # fmt: skip
    """``roof`` (one engine) as a replica of ``dep`` (None: today's deployment of ``engines`` engines,
    ``knee_today`` its sweet spot per engine, ``measured`` its own curve there): its knee, the roofline
    there, the prediction and the replicas ``demand`` needs. Another deployment's knee is today's moved
    as its roofline's knee moves (``roof_knee_today``: today's roofline's), then capped by its KV cache."""
    engines = engines if dep is None else dep.engines
    knee, note = knee_today, "the sweet spot"
    if dep is not None:
        alt = roofline_knee(roof)
        if alt is not None and roof_knee_today:
            knee = knee_today * alt / roof_knee_today
            note = f"today's sweet spot × {alt} ÷ {roof_knee_today} (its roofline's knee ÷ today's roofline's)"
        else:
            note = "today's sweet spot (a roofline knee missing to move it by)"
    room, fit_note = (None, "") if dep is None else kv_room(roof.model, dep.spec.memory_gb, roof.mean_context)
    if room is not None and 0 < room < knee:
        knee, note = room, f"what the KV cache holds ({number(room)} requests of {number(roof.mean_context)} tokens)"
    knee = max(knee, 1.0)
    prediction = predict(roof, cal, knee, engines)
    fits = room is None or room >= 1.0
    capacity = measured if measured else prediction.tokens_per_s
    replicas, spread = replicas_for(demand, prediction, capacity) if fits else (None, None)
    compute = roof.compute_tok_s
    return Option(
        label="today's deployment" if dep is None else dep.label,
        today=dep is None,
        steps_bound_per_s=roof.model.step_bound_per_s,
        compute_tok_s=None if compute is None else compute * engines,
        crossover=roof.crossover_batch,
        knee=knee,
        knee_note=note,
        attainable_tok_s=roof.attainable_tok_s(knee) * engines,
        predicted=prediction,
        replicas=replicas,
        replicas_range=spread,
        memory_note=fit_note or ("" if fits else "its KV cache holds no request of this context beside the weights"),
        measured_tok_s=measured,
    )


def other_roof(today: roofs.Roofline, dep: Deployment, precision: str) -> roofs.Roofline:
    """The same model on ``dep``'s GPUs (one engine of TP ``dep.tp``): its bandwidth, its datasheet peak."""
    model = StepModel(today.model.weight_gb, dep.tp, float(dep.spec.memory_gbps or 0.0), today.model.kv_bytes_per_token)
    return roofs.roofline(model, today.mean_context, spec_peak(dep.spec, precision), today.active_params)


def spec_peak(spec: roofs.GpuSpec, precision: str) -> roofs.PeakCompute | None:
    """``spec``'s datasheet peak at ``precision`` (today's), else its bf16 then fp16 tensor peak."""
    for key in dict.fromkeys((precision, "bf16_tensor", "fp16_tensor")):
        if spec.tflops.get(key):
            return roofs.PeakCompute(float(spec.tflops[key] or 0.0), f"datasheet: {spec.name}, {key}")
    return None


def smallest_fit(spec: roofs.GpuSpec, today: roofs.Roofline, precision: str) -> Deployment:
    """``spec`` at the smallest TP whose memory holds the weights and one request's KV cache."""
    for tp in TP_SIZES:
        dep = Deployment(spec, tp, tp)
        room, _ = kv_room(other_roof(today, dep, precision).model, spec.memory_gb, today.mean_context)
        if room is None or room >= 1.0:
            return dep
    return Deployment(spec, TP_SIZES[-1], TP_SIZES[-1])


# --- The plan --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """The what-if of one target: the demand, the calibration, today's deployment and the others."""

    target: str
    demand: Demand
    calibration: Calibration
    sweet_spot: str
    slo_s: float
    ttft_at_knee_s: float | None
    context: float | None
    engines: int
    today: Option
    others: tuple[Option, ...]
    curve: tuple[tuple[int, Prediction], ...]  # today's deployment (all engines) at CURVE_AT running each

    def uncertainty(self) -> str:
        """The uncertainty in words and numbers."""
        lo, hi = self.calibration.span
        return (f"Measured at {self.calibration.words()}. Each prediction's range is that spread; outside "
                f"{lo}–{hi} running it extrapolates the roofline's shape, and another GPU's row assumes its kernels "
                "reach the same share of their roofline as today's do (tensor cores, int4 paths and attention "
                "kernels differ between generations): read those as the roofline's scaling of today's "
                "efficiency, not a measurement. TTFT is measured only on today's deployment: another's knee is "
                "its roofline's, moved as today's sweet spot sits against today's roofline, within its KV cache.")

    def lines(self) -> list[str]:
        t = self.today
        ttft = f", TTFT P95 {number(self.ttft_at_knee_s)} s there" if self.ttft_at_knee_s is not None else ""
        held = "its own curve" if t.measured_tok_s else "the calibrated roofline"
        out = [
            f"{self.target}: demand {self.demand.text()}",
            f"sweet spot {self.sweet_spot}{ttft} (TTFT P95 SLO {number(self.slo_s)} s)",
            f"today: {_replicas(t)} of today's deployment hold it: {number(t.capacity)} tok/s a replica at "
            f"{number(t.knee * self.engines)} running ({held}); the roofline there {number(t.attainable_tok_s)} tok/s, "
            f"calibrated {_range(t.predicted)} tok/s",
            self.uncertainty(),
            "",
            f"{'deployment':<34} {'steps/s bound':>13} {'compute roof':>13} {'knee':>6} {'tok/s at knee':>22} {'replicas':>9}",
        ]
        for o in (t, *self.others):
            compute = "unknown" if o.compute_tok_s is None else number(o.compute_tok_s)
            reps = o.memory_note if o.replicas is None else _replicas(o)
            tok = _range(o.predicted)
            out.append(f"{o.label[:34]:<34} {number(o.steps_bound_per_s):>13} {compute:>13} {number(o.knee):>6} {tok:>22} {reps:>9}")
        notes = sorted({f"{o.label}: knee = {o.knee_note}" for o in self.others})
        out += ["", *notes] if notes else []
        return out

    def as_json(self) -> dict[str, Any]:
        def opt(o: Option) -> dict[str, Any]:
            d = dataclasses.asdict(o)
            d["capacity_tok_s"] = o.capacity
            return d

        return {
            "target": self.target,
            "demand": dataclasses.asdict(self.demand),
            "calibration": {**dataclasses.asdict(self.calibration), "low": self.calibration.low,
                            "high": self.calibration.high, "words": self.calibration.words()},  # fmt: skip
            "sweet_spot": self.sweet_spot,
            "ttft_p95_slo_s": self.slo_s,
            "ttft_at_knee_s": self.ttft_at_knee_s,
            "context_tokens": self.context,
            "engines": self.engines,
            "today": opt(self.today),
            "others": [opt(o) for o in self.others],
            "curve": [{"concurrency": c, **dataclasses.asdict(p)} for c, p in self.curve],
            "uncertainty": self.uncertainty(),
        }


def _pct(fraction: float) -> str:
    return f"{number(fraction * 100)} %"


def _range(p: Prediction) -> str:
    return f"{number(p.tokens_per_s)} ({number(p.low)}–{number(p.high)})"


def _replicas(o: Option) -> str:
    if o.replicas is None:
        return "—"
    lo, hi = o.replicas_range or (o.replicas, o.replicas)
    return str(o.replicas) if lo == hi == o.replicas else f"{o.replicas} ({min(lo, o.replicas)}–{max(hi, o.replicas)})"


Say = Callable[[str], None]


def plan(reader: Reader, settings: Settings, target: str, now: float, *, rps: float | None = None,
         tps: float | None = None, asked: Sequence[Deployment] = (), source: str | None = None,
         levels: tuple[float, float] | None = None, say: Say = lambda _: None) -> Plan:  # fmt: skip
    """The what-if of ``target`` at ``now``; ``asked``: the deployments named (none: :data:`CANDIDATES`).
    ``source``: calibrate on ``minutes`` or the ``sweep`` (None: minutes when there are enough).
    Every missing input is a UsageError naming its fix."""
    rps, tps = positive(rps, "--demand-rps"), positive(tps, "--demand-tps")
    if target not in {t.name for t in reader.targets()}:
        raise UsageError(f"no target {target!r} in the database", "`python -m app status --all` lists them")
    say(f"reading {target}'s last 7 days (its window, hourly peak and minutes)")
    figures = reader.window(target, now, SPAN_S, level=int(HOUR_S))
    roof = target_roofline(figures)
    if roof is None:
        raise UsageError(f"{target} has no ceiling inputs, so no roofline to scale", NO_CEILING_FIX)
    engines = max(int(figures.engines_max or 1), 1)
    cal, sweep = _calibration(reader, target, now, roof, figures, engines, source, levels, say)
    if roof.mean_context is None and sweep is not None:
        roof = dataclasses.replace(roof, mean_context=mix_context(sweep.mix))
    hours = reader.series_columns(target, now - SPAN_S, now, HOUR_S,
                                  fields=("tokens_per_s", "requests_per_s", "prompt_tokens_per_s"))  # fmt: skip
    demand = demand_of(observed(hours), rps, tps)
    say("resolving the sweet spot (its sweep, else what it learned from its minutes)")
    spot = resolve(reader, settings, target, now)
    slo = effective_sweetspot(settings, target).ttft_p95_slo_s
    knee_total, spot_text = _knee(spot, roof, engines)
    measured = spot.expected(knee_total) if spot.curve else None
    cross = roofline_knee(roof)
    today = option(roof, cal, demand.tokens_per_s, knee_total / engines, cross, None, measured, engines)
    precision = (figures.ceiling.compute_precision if figures.ceiling else None) or roofs.DEFAULT_PRECISION
    deps = list(asked) or [smallest_fit(find_gpu(name), roof, precision) for name in CANDIDATES]
    others = tuple(option(other_roof(roof, d, precision), cal, demand.tokens_per_s, today.knee, cross, d) for d in deps)
    curve = tuple((c, predict(roof, cal, c, 1)) for c in CURVE_AT)
    return Plan(target, demand, cal, spot_text, slo, _ttft_at(spot, sweep, knee_total), roof.mean_context, engines,
                today, others, curve)  # fmt: skip


def _calibration(reader: Reader, target: str, now: float, roof: roofs.Roofline, figures: WindowFigures, engines: int,
                 source: str | None, levels: tuple[float, float] | None, say: Say) -> tuple[Calibration, SweepRun | None]:  # fmt: skip
    sweep = _latest_sweep(reader, target)
    cal = None
    if source in (None, MINUTES):
        say(f"reading {target}'s production minutes")
        cols = reader.series_columns(target, now - SPAN_S, now, MINUTE_S,
                                     fields=("running_avg", "tokens_per_s", "kv_resident_tokens_avg", "mean_context_tokens"))  # fmt: skip
        samples = minute_samples(cols, engines, roof.mean_context)
        if len(samples) >= MIN_MINUTES or source == MINUTES:
            cal = calibrate(roof, samples, MINUTES, f"{len(samples):,} production minutes", levels)
    if cal is None and source in (None, SWEEP) and sweep is not None:
        context = mix_context(sweep.mix) or roof.mean_context  # the context its levels ran at
        samples = [Sample(lv.concurrency / engines, lv.tokens_per_s / engines, context) for lv in sweep.levels
                   if lv.tokens_per_s]  # fmt: skip
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(sweep.started_at))
        cal = calibrate(roof, samples, SWEEP, f"the sweep of {when}", levels)
    if cal is None:
        within = "" if levels is None else f" within --levels {number(levels[0])}-{number(levels[1])}"
        what = {MINUTES: f"fewer than {MIN_MINUTES} stored minutes with running requests in the last 7 days",
                SWEEP: "no stored load sweep of it",
                None: f"fewer than {MIN_MINUTES} stored minutes with running requests in the last 7 days and no stored load sweep"}  # fmt: skip
        raise UsageError(f"{target}: nothing to calibrate on{within}: {what[source]}",
                         f"Run `python -m app sweep --target {target} --concurrency 1,2,4,8,16,32 --duration 2m`, "
                         "or let the collector store an hour of traffic")  # fmt: skip
    return cal, sweep


def minute_samples(cols: dict[str, list[Any]], engines: int, context: float | None) -> list[Sample]:
    """Production minutes as samples of one engine: running and tok/s ÷ engines, each minute's context
    (KV tokens resident per running request, else the request lengths' mean, else the window's)."""
    out = []
    for running, tok, resident, mean in zip(cols["running_avg"], cols["tokens_per_s"], cols["kv_resident_tokens_avg"],
                                            cols["mean_context_tokens"], strict=True):  # fmt: skip
        if running is None or tok is None or running < IDLE_RUNNING:
            continue
        ctx = resident / running if resident is not None else (mean if mean is not None else context)
        out.append(Sample(running / engines, tok / engines, ctx))
    return out


def _latest_sweep(reader: Reader, target: str) -> SweepRun | None:
    info = next((t for t in reader.targets() if t.name == target), None)
    mine, _ = sweeps_of(info, reader.sweep_runs(20))
    return next((run for run in mine if any(lv.tokens_per_s for lv in run.levels)), None)


def _knee(spot: SweetSpot, roof: roofs.Roofline, engines: int) -> tuple[float, str]:
    """Today's knee (running requests, all engines) and how the plan says it."""
    if spot.value is not None:
        return float(spot.value), spot.line()
    cross = roof.crossover_batch
    if cross is not None:
        return max(cross, 1.0) * engines, f"unknown, so the roofs' crossover ({number(cross)} running an engine) stands in ({spot.line()})"
    raise UsageError("no sweet spot and no compute roof to stand in for it: " + spot.line().removeprefix("unknown: "),
                     "Run `python -m app sweep`, set targets[].sweet_spot, or set targets[].ceiling.active_params_b")  # fmt: skip


def _ttft_at(spot: SweetSpot, sweep: SweepRun | None, knee: float) -> float | None:
    """TTFT P95 measured at the knee: the sweep's level there, else the learned level's."""
    if sweep is not None:
        hit = next((lv.ttft_p95_s for lv in sweep.levels if lv.concurrency == round(knee)), None)
        if hit is not None:
            return hit
    if spot.learned is not None:
        return next((lv.ttft_p95_s for lv in spot.learned.levels if lv.concurrency == round(knee)), None)
    return None
