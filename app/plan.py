"""Capacity what-if (docs/plan.md "Capacity what-if"): how many replicas of today's deployment hold a
demand inside the sweet spot, and what another GPU or tensor-parallel size would give.

Every figure comes from the step model with both phases (core/step_model.py): a decode step costs
max(bytes ÷ bandwidth, decode FLOPs ÷ compute) plus a fixed overhead, and each output token its share
of the prompts' prefill FLOPs ÷ compute. Its three efficiencies (bandwidth, compute, overhead) are
fitted on this target's own levels: its stored production minutes (running requests, output tok/s,
the context each request holds and the prompt tokens per output token), else its latest stored load
sweep, else its imported benchmarks. Other deployments keep that structure (app/deployments.py).

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

from app import deployments as deps
from app.deployments import Deployment, Option, deployment, find_gpu  # noqa: F401 - the command's names
from app.formatting import number
from app.operating_point import served_shape, target_roofline
from app.sweet_spot import SweetSpot, resolve
from app.traffic_mix import Mix, latest_sweep, mix_context, mix_ratio, range_end, traffic_mix
from core import roofline as roofs
from core import step_model as step
from core.efficiency_priors import prior_for
from core.errors import UsageError
from core.model_shape import ModelShape
from core.settings import Settings, effective_sweetspot
from db.queries import Reader
from db.results import SweepRun, TargetInfo

SPAN_S = 7 * 86400.0  # the history read: the last 7 days
MINUTE_S, HOUR_S = 60.0, 3600.0
MIN_MINUTES = 30  # production minutes with running requests a calibration on minutes needs
IDLE_RUNNING = 0.5  # a minute with fewer running requests decoded (almost) nothing
MINUTES, SWEEP, BENCH = "minutes", "sweep", "bench"
# The deployments asked about when none is named: the same model on each, at the smallest TP that fits.
CANDIDATES = ("A100 80GB SXM", "H100 SXM", "H200", "B200")
CURVE_AT = (1, 2, 4, 8, 16, 32, 64, 128)
NO_CEILING_FIX = (
    "Set targets[].ceiling.weight_gb and tensor_parallel (and bandwidth_gbps where no NVML reading gives the "
    "peak), or targets[].model_config for the model's shape; active_params_b and gpu.peak_tflops add the compute roof"
)


# --- Calibration: the step model fitted on the target's levels -------------------------------------


@dataclass(frozen=True)
class Sample:
    """One measurement of one engine: running requests, output tok/s, each request's context and the
    prompt tokens prefilled per output token (None: the roofline's own)."""

    concurrency: float
    tokens_per_s: float
    context: float | None = None
    prompt_per_output: float | None = None


@dataclass(frozen=True)
class LevelFit:
    """One calibration level: the median measured tok/s of one engine and what the best fit gives there."""

    concurrency: int
    tokens_per_s: float
    predicted: float
    samples: int

    @property
    def error(self) -> float:
        """Predicted ÷ measured − 1."""
        return self.predicted / self.tokens_per_s - 1.0


@dataclass(frozen=True)
class Calibration:
    """The step model's efficiencies fitted on this target's levels, with their spread."""

    kind: str  # minutes, sweep or bench
    source: str  # "1,234 production minutes" / "the sweep of 2026-12-06 03:01"
    fit: step.Fit
    levels: tuple[LevelFit, ...]
    samples: int

    @property
    def span(self) -> tuple[int, int]:
        return self.levels[0].concurrency, self.levels[-1].concurrency

    def words(self) -> str:
        """``fitted on 1,234 production minutes at 1–40 running: bandwidth 31 % (…), compute …, overhead …;
        the fit is within 4 % of every level (RMS 2 %)``."""
        lo, hi = self.span
        at = f"{lo}" if lo == hi else f"{lo}–{hi}"
        worst = max(abs(lv.error) for lv in self.levels)
        return (f"fitted on {self.source} at {at} running ({len(self.levels)} levels): {self.fit.words()}; the fit is "
                f"within {_pct(worst)} of every level (RMS {_pct(self.fit.error)})")  # fmt: skip


def levels_of(samples: Iterable[Sample], within: tuple[float, float] | None = None) -> list[step.Level]:
    """Samples grouped by running requests rounded: the median tok/s, context and mix of each level."""
    groups: dict[int, list[Sample]] = {}
    for s in samples:
        if s.concurrency < IDLE_RUNNING or not s.tokens_per_s > 0 or not math.isfinite(s.tokens_per_s):
            continue
        if within is not None and not within[0] <= s.concurrency <= within[1]:
            continue
        groups.setdefault(round(s.concurrency), []).append(s)
    return [step.Level(float(c), statistics.median(s.tokens_per_s for s in group), _median(s.context for s in group),
                       _median(s.prompt_per_output for s in group), len(group)) for c, group in sorted(groups.items())]  # fmt: skip


def _median(values: Iterable[float | None]) -> float | None:
    seen = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(seen) if seen else None


def calibrate(roof: roofs.Roofline, samples: Iterable[Sample], kind: str, source: str,
              levels: tuple[float, float] | None = None) -> Calibration | None:  # fmt: skip
    """The step model's efficiencies fitted on ``samples`` (within ``levels``, inclusive); None without
    a usable sample."""
    found = levels_of(samples, levels)
    fit = step.fit(roof, found, source)
    if fit is None:
        return None
    rows = tuple(LevelFit(round(lv.concurrency), lv.tokens_per_s,
                          step.tokens_per_s(step.at_level(roof, lv), fit.best, lv.concurrency), lv.samples) for lv in found)  # fmt: skip
    return Calibration(kind, source, fit, rows, sum(lv.samples for lv in found))


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
    prompt_per_output: float | None
    engines: int
    today: Option
    others: tuple[Option, ...]
    curve: tuple[tuple[int, step.Prediction], ...]  # one engine of today's deployment at CURVE_AT running
    roofs_text: str  # today's roofs in words
    running_limit: str  # the running limit and where it came from, or why none
    priors_used: tuple[str, ...] = ()  # the full source of every prior a row took

    def uncertainty(self) -> str:
        """Where every range comes from, in words and numbers."""
        priors = f" Priors: {'; '.join(self.priors_used)}." if self.priors_used else ""
        return (f"Today's step model is {self.calibration.words()}. Each range holds every parameter set within 5 points "
                "of the best fit's error (a prior's: its low to high), widened on another GPU by the error a transfer "
                f"was measured to make; TTFT is measured only on today's deployment.{priors}")  # fmt: skip

    def answer(self) -> str:
        """The buyer's question in one line: which deployments hold the demand with one replica."""
        one = [f"{o.label} ({tok_s_text(o.predicted)} tok/s)" for o in self.others if o.replicas == 1]
        if not one:
            return "no other deployment asked holds it with one replica"
        sure = [o.label for o in self.others if o.replicas == 1 and o.replicas_range == (1, 1)]
        tail = f"; at the low end of its range too: {', '.join(sure)}" if sure else "; none at the low end of its range"
        return f"one replica holds it: {'; '.join(one)}{tail}"

    def lines(self) -> list[str]:
        t = self.today
        ttft = f", TTFT P95 {number(self.ttft_at_knee_s)} s there" if self.ttft_at_knee_s is not None else ""
        held = "its own curve" if t.measured_tok_s else "the fitted step model"
        out = [
            f"{self.target}: demand {self.demand.text()}",
            f"sweet spot {self.sweet_spot}{ttft} (TTFT P95 SLO {number(self.slo_s)} s); running limit {self.running_limit}",
            f"today: {replicas_text(t)} of today's deployment hold it: {tok_s_text(t.predicted)} tok/s a replica at "
            f"{number(t.knee * self.engines)} running ({held})",
            f"roofs: {self.roofs_text}",
            self.answer(),
            self.uncertainty(),
            "",
            f"{'deployment':<34} {'steps/s bound':>13} {'compute roof':>13} {'knee':>6} {'tok/s at knee':>22} {'replicas':>9}",
        ]
        for o in (t, *self.others):
            compute = "unknown" if o.compute_tok_s is None else number(o.compute_tok_s)
            reps = o.memory_note if o.replicas is None else replicas_text(o)
            out.append(f"{o.label[:34]:<34} {number(o.steps_bound_per_s):>13} {compute:>13} {number(o.knee):>6} "
                       f"{tok_s_text(o.predicted):>22} {reps:>9}")  # fmt: skip
        out += ["", "Each row: today's model, context and mix on its GPUs; its efficiencies, knee and GPUs:"]
        for o in self.others:
            out.append(f"{o.label}: {o.evidence}; knee = {o.knee_note}; {o.assumes}")
        return out

    def as_json(self) -> dict[str, Any]:
        def opt(o: Option) -> dict[str, Any]:
            d = dataclasses.asdict(o)
            d["capacity_tok_s"] = o.capacity
            return d

        cal = self.calibration
        return {
            "target": self.target,
            "demand": dataclasses.asdict(self.demand),
            "calibration": {"kind": cal.kind, "source": cal.source, "samples": cal.samples, "words": cal.words(),
                            "efficiency": dataclasses.asdict(cal.fit.best),
                            "spread": {f: cal.fit.spread(f) for f in ("bandwidth", "compute", "overhead_s")},
                            "rms_error": cal.fit.error, "levels": [dataclasses.asdict(lv) for lv in cal.levels]},  # fmt: skip
            "sweet_spot": self.sweet_spot,
            "ttft_p95_slo_s": self.slo_s,
            "ttft_at_knee_s": self.ttft_at_knee_s,
            "context_tokens": self.context,
            "prompt_per_output": self.prompt_per_output,
            "engines": self.engines,
            "roofs": self.roofs_text,
            "answer": self.answer(),
            "running_limit": self.running_limit,
            "today": opt(self.today),
            "others": [opt(o) for o in self.others],
            "curve": [{"concurrency": c, **dataclasses.asdict(p)} for c, p in self.curve],
            "uncertainty": self.uncertainty(),
        }


def _pct(fraction: float) -> str:
    return f"{number(fraction * 100)} %"


def tok_s_text(p: step.Prediction) -> str:
    """``126 (113–141)``: the one figure and its range."""
    return f"{number(p.tokens_per_s)} ({number(p.low)}–{number(p.high)})"


def replicas_text(o: Option) -> str:
    """``2 (1–2)``: the replicas and the range the figure's range gives."""
    if o.replicas is None:
        return "—"
    lo, hi = o.replicas_range or (o.replicas, o.replicas)
    return str(o.replicas) if lo == hi == o.replicas else f"{o.replicas} ({min(lo, o.replicas)}–{max(hi, o.replicas)})"


def roofs_text(roof: roofs.Roofline, mix_from: str = "") -> str:
    """``compute roof 935 tok/s an engine with prefill at 3.6 prompt tokens an output token (the 7 days
    to …) (decode alone 1,780; …)``; ``mix_from``: where the mix was read."""
    if roof.compute_tok_s is None:
        return f"{roof.note}; bandwidth roof {number(roof.bandwidth_tok_s(1))} tok/s at 1 running"
    assert roof.compute is not None
    peaks = " / ".join(dict.fromkeys(f"{p.source}, {number(p.tflops)} TFLOP/s" for p in (roof.compute, roof.prefill_peak) if p))
    mix = "no prefill counted (mix unknown)"
    if roof.prompt_per_output:
        mix = f"prefill at {number(roof.prompt_per_output)} prompt tokens an output token" + (f" ({mix_from})" if mix_from else "")
    cross = f"; the roofs cross at {number(roof.crossover_batch)} running" if roof.crossover_batch else ""
    return (f"compute roof {number(roof.compute_tok_s)} tok/s an engine with {mix} (decode alone "
            f"{number(roof.decode_compute_tok_s)}; {peaks}){cross}")


Say = Callable[[str], None]


def plan(reader: Reader, settings: Settings, target: str, now: float, *, rps: float | None = None,
         tps: float | None = None, asked: Sequence[Deployment] = (), source: str | None = None,
         levels: tuple[float, float] | None = None, say: Say = lambda _: None) -> Plan:  # fmt: skip
    """The what-if of ``target`` over the 7 days to ``now``'s last whole 10 minutes (app/traffic_mix.py
    ``range_end``); ``asked``: the deployments named (none: :data:`CANDIDATES`).
    ``source``: calibrate on ``minutes``, the ``sweep`` or imported benchmarks (``bench``; None: the
    first there is). Every missing input is a UsageError naming its fix."""
    rps, tps = positive(rps, "--demand-rps"), positive(tps, "--demand-tps")
    now = range_end(now)  # the 7 days to the last whole 10 minutes: the command and the pages read the same minutes
    info = next((t for t in reader.targets() if t.name == target), None)
    if info is None:
        raise UsageError(f"no target {target!r} in the database", "`python -m app status --all` lists them")
    say(f"reading {target}'s last 7 days (its window, hourly peak and minutes)")
    figures = reader.window(target, now, SPAN_S, level=int(HOUR_S))
    shape = served_shape(figures, info.models)
    roof = target_roofline(figures, shape)
    if roof is None:
        raise UsageError(f"{target} has no ceiling inputs, so no roofline to scale", NO_CEILING_FIX)
    engines = max(int(figures.engines_max or 1), 1)
    hours = reader.series_columns(target, now - SPAN_S, now, HOUR_S,
                                  fields=("tokens_per_s", "requests_per_s", "prompt_tokens_per_s"))  # fmt: skip
    seen = observed(hours)
    sweep = latest_sweep(reader, target)
    mix = traffic_mix(reader, target, now)
    roof = _with_mix(roof, mix, sweep)
    cal = _calibration(reader, target, now, roof, engines, source, levels, sweep, say)
    demand = demand_of(seen, rps, tps)
    say("resolving the sweet spot (its sweep, else what it learned from its minutes)")
    spot = resolve(reader, settings, target, now)
    slo = effective_sweetspot(settings, target).ttft_p95_slo_s
    limit, limit_text = _running_limit(settings, info)
    today_ev = deps.Evidence(cal.fit, "today's fit", 0.0)
    knee_total, spot_text = _knee(spot, roof, today_ev, engines, limit)
    today = _today(roof, cal, demand.tokens_per_s, knee_total, engines, spot.expected(knee_total) if spot.curve else None)
    precision = (figures.ceiling.compute_precision if figures.ceiling else None) or roofs.DEFAULT_PRECISION
    if precision == "fp16_cuda_core":  # today's kernels' column; another GPU's kernels follow kernel_peaks
        precision = roofs.DEFAULT_PRECISION
    quant = shape.quantization if shape else None
    today_spec = roofs.match_gpu(figures.gpus[0].name) if figures.gpus else None
    wanted = list(asked) or deps.candidates(CANDIDATES, roof, precision, quant)
    others = tuple(_other(d, roof, cal.fit, today, today_spec, engines, precision, shape, demand.tokens_per_s, limit)
                   for d in wanted)  # fmt: skip
    curve = tuple((c, cal.fit.predict(roof, c)) for c in CURVE_AT)
    used = tuple(dict.fromkeys(p.source for d, o in zip(wanted, others, strict=True) if o.evidence.startswith("priors")
                               for p in (prior_for(d.spec.arch),)))  # fmt: skip
    return Plan(target, demand, cal, spot_text, slo, _ttft_at(spot, sweep, knee_total), roof.mean_context,
                roof.prompt_per_output, engines, today, others, curve, roofs_text(roof, mix.source), limit_text, used)  # fmt: skip


def _with_mix(roof: roofs.Roofline, mix: Mix, sweep: SweepRun | None) -> roofs.Roofline:
    """``roof`` with the mix every surface reads (app/traffic_mix.py) and, where the window lacks it,
    the sweep's context."""
    context = roof.mean_context or (mix_context(sweep.mix) if sweep is not None else None)
    return dataclasses.replace(roof, prompt_per_output=mix.prompt_per_output, mean_context=context)


def _today(roof: roofs.Roofline, cal: Calibration, demand: float, knee_total: float, engines: int,
           measured: float | None) -> Option:  # fmt: skip
    """Today's row: the fitted step model at the sweet spot, its own curve there where measured."""
    predicted = cal.fit.predict(roof, knee_total / engines).scaled(engines)
    if measured:
        predicted = step.Prediction(measured, min(predicted.low, measured), max(predicted.high, measured))
    replicas, spread = deps.replicas_for(demand, predicted)
    compute = roof.compute_tok_s
    return Option(label="today's deployment", today=True, evidence="today's own curve" if measured else "today's fit",
                  assumes="", steps_bound_per_s=roof.model.step_bound_per_s,
                  compute_tok_s=None if compute is None else compute * engines, knee=knee_total / engines,
                  knee_note="the sweet spot", predicted=predicted, replicas=replicas, replicas_range=spread,
                  measured_tok_s=measured)  # fmt: skip


def _other(dep: Deployment, roof: roofs.Roofline, fit: step.Fit, today: Option, today_spec: roofs.GpuSpec | None,
           engines: int, precision: str, shape: ModelShape | None, demand: float, limit: float | None) -> Option:  # fmt: skip
    if deps.same_hardware(dep, today_spec, roof, engines):
        return deps.as_asked(today, dep)
    other = deps.other_roof(roof, dep, precision, shape.quantization if shape else None)
    ev = deps.evidence_for(fit, today_spec, roof, dep.spec, other, shape.layers if shape else None)
    return deps.option(other, ev, dep, demand, limit)


def _running_limit(settings: Settings, info: TargetInfo) -> tuple[float | None, str]:
    """The engine's running limit (``--max-num-seqs``): vLLM's /metrics does not expose it, so the
    setting (this configuration's, else the one stored when the collector registered the target)."""
    found = next((t.max_num_seqs for t in settings.targets if t.name == info.name and t.max_num_seqs), None)
    found = found or info.max_num_seqs
    if found:
        return float(found), f"{found} running (targets[].max_num_seqs)"
    return None, "unknown (vLLM does not expose --max-num-seqs: set targets[].max_num_seqs)"


def _calibration(reader: Reader, target: str, now: float, roof: roofs.Roofline, engines: int, source: str | None,
                 levels: tuple[float, float] | None, sweep: SweepRun | None, say: Say) -> Calibration:  # fmt: skip
    cal = None
    if source in (None, MINUTES):
        say(f"reading {target}'s production minutes")
        cols = reader.series_columns(target, now - SPAN_S, now, MINUTE_S,
                                     fields=("running_avg", "tokens_per_s", "kv_resident_tokens_avg", "mean_context_tokens",
                                             "prompt_tokens_per_s"))  # fmt: skip
        samples = minute_samples(cols, engines, roof.mean_context)
        if len(samples) >= MIN_MINUTES or source == MINUTES:
            cal = calibrate(roof, samples, MINUTES, f"{len(samples):,} production minutes", levels)
    if cal is None and source in (None, SWEEP) and sweep is not None:
        context, ratio = mix_context(sweep.mix) or roof.mean_context, mix_ratio(sweep.mix)  # what its levels ran at
        samples = [Sample(lv.concurrency / engines, lv.tokens_per_s / engines, context, ratio) for lv in sweep.levels
                   if lv.tokens_per_s]  # fmt: skip
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(sweep.started_at))
        cal = calibrate(roof, samples, SWEEP, f"the sweep of {when}", levels)
    if cal is None and source in (None, BENCH):
        runs = reader.bench_runs(20, target)
        samples = [Sample(p.concurrency / engines, p.tokens_per_s / engines) for run in runs for p in run.points]
        cal = calibrate(roof, samples, BENCH, f"{len(runs)} imported benchmark(s)", levels) if runs else None
    if cal is None:
        within = "" if levels is None else f" within --levels {number(levels[0])}-{number(levels[1])}"
        what = {MINUTES: f"fewer than {MIN_MINUTES} stored minutes with running requests in the last 7 days",
                SWEEP: "no stored load sweep of it", BENCH: "no imported benchmark of it",
                None: f"fewer than {MIN_MINUTES} stored minutes with running requests in the last 7 days, no stored "
                      "load sweep and no imported benchmark"}  # fmt: skip
        raise UsageError(f"{target}: nothing to calibrate on{within}: {what[source]}",
                         f"Run `python -m app sweep --target {target} --concurrency 1,2,4,8,16,32 --duration 2m`, "
                         "or let the collector store an hour of traffic")  # fmt: skip
    return cal


def minute_samples(cols: dict[str, list[Any]], engines: int, context: float | None) -> list[Sample]:
    """Production minutes as samples of one engine: running and tok/s ÷ engines, each minute's context
    (KV tokens resident per running request, else the request lengths' mean, else the window's) and
    its prompt tokens per output token."""
    out = []
    prompts = cols.get("prompt_tokens_per_s") or [None] * len(cols["running_avg"])
    for running, tok, resident, mean, prompt in zip(cols["running_avg"], cols["tokens_per_s"], cols["kv_resident_tokens_avg"],
                                                    cols["mean_context_tokens"], prompts, strict=True):  # fmt: skip
        if running is None or tok is None or running < IDLE_RUNNING:
            continue
        ctx = resident / running if resident is not None else (mean if mean is not None else context)
        ratio = prompt / tok if prompt is not None and tok > 0 else None
        out.append(Sample(running / engines, tok / engines, ctx, ratio))
    return out


def _knee(spot: SweetSpot, roof: roofs.Roofline, ev: deps.Evidence, engines: int,
          limit: float | None) -> tuple[float, str]:  # fmt: skip
    """Today's knee (running requests, all engines) and how the plan says it: the sweet spot, else the
    one knee rule on the fitted curve (within the running limit)."""
    if spot.value is not None:
        return float(spot.value), spot.line()
    cap, cap_why = deps.limit_of(limit, None, roof.mean_context)  # --max-num-seqs is each engine's, as on every row
    knee, note = deps.knee_at(roof, ev, cap, cap_why)
    return knee * engines, f"unknown, so {note} stands in: {number(knee * engines)} running ({spot.line()})"


def _ttft_at(spot: SweetSpot, sweep: SweepRun | None, knee: float) -> float | None:
    """TTFT P95 measured at the knee: the sweep's level there, else the learned level's."""
    if sweep is not None:
        hit = next((lv.ttft_p95_s for lv in sweep.levels if lv.concurrency == round(knee)), None)
        if hit is not None:
            return hit
    if spot.learned is not None:
        return next((lv.ttft_p95_s for lv in spot.learned.levels if lv.concurrency == round(knee)), None)
    return None
