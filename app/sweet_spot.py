"""Each target's own sweet spot and throughput curve, with where they came from.

Sources, best first (docs/alerts.md): ``configured`` (``targets[].sweet_spot`` or a
``sweetspot.concurrency``); the measured ones, the newest first: the target's latest stored load
``sweep`` (the sweet spot it printed and stored) and its latest imported ``benchmark`` runs
(``bench import``), ranked by the date they measured; ``learned`` from its own traffic
(core/learner.py over its stored minutes); else unknown (None): never another deployment's number.
The demo's simulator of the reference deployment gets the report's, source ``reference``. Every
measured source's number is the one knee rule's (core/knee.py ``sweet_spot_of``).

The curve the ``under_delivering`` rule judges against comes from the same source: its fitted curve,
else the learned fit, else (the demo only) the report's curve.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from app.operating_point import REFERENCE_LEVELS, sweeps_of
from core.knee import MeasuredLevel, sweet_spot_of
from core.knee import SweetSpot as Found
from core.learner import Learned, Limits, Sample, StepSlo, expected_at, learn
from core.settings import LearnerSettings, Settings, SweetSpotSettings, effective_sweetspot, is_reference
from db.queries import Reader
from db.results import BenchRun, SweepRun
from sweep.verdict import measured_levels

CONFIGURED, SWEEP, BENCHMARK, LEARNED, REFERENCE = "configured", "sweep", "benchmark", "learned", "reference"
SOURCES = (CONFIGURED, SWEEP, BENCHMARK, LEARNED, REFERENCE)
# Every way to get a sweet spot, said wherever it is unknown (the learner's own clause follows).
NO_SWEET_SPOT = ("not evaluated: no sweet spot yet (run a load sweep: `python -m app sweep --target NAME`; import "
                 "benchmark results: `python -m app bench import FILE --target NAME`; set targets[].sweet_spot; ")
REFERENCE_SLO_S = 3.0  # the report's SLO, which its knee of 16 was measured against (DOMAIN.md §2)
REFERENCE_REPORT = "the reference report (8× V100, 70B AWQ, TP 8)"
# Imported benchmark runs of one tool and model within a day of the latest are one curve (vllm bench
# serve writes one file per concurrency: four files at 2, 4, 8 and 16 are one curve of four levels).
BENCH_SERIES_S = 86400.0
# The TTFT the knee is capped by is the clients' (db/derived.py: the engine's plus the gateway's wait;
# the engine's own where no gateway queue is read): a knee whose clients wait past the SLO is no sweet spot.
# The share parts prove a step within or outside the SLO from the bucket bounds (core/histogram_slo.py).
SHARE = "client_ttft_slo_attainment"
LEARN_FIELDS = ("running_avg", "tokens_per_s", "client_ttft_p95_s", "up_ratio", "requests_started_per_s",
                "requests_per_s", SHARE, *(SHARE + p for p in ("_lower_le", "_lower_share", "_upper_le", "_upper_share")))
# Minutes whose stored verdict held one of these rules are a fault, not the target's curve: the
# learner leaves them out (docs/alerts.md: a degraded period must not teach a lower curve).
FAULT_RULES = ("under_delivering", "target_down", "not_serving", "sleeping", "requests_failing")


@dataclass(frozen=True)
class SweetSpot:
    """A target's sweet-spot concurrency (None: unknown) and own curve, each with its source."""

    value: int | None
    source: str | None  # configured, sweep, benchmark, learned, reference, or None
    detail: str  # where it came from, one clause
    curve: tuple[tuple[float, float], ...] = ()  # (concurrency, output tok/s) of its own curve
    curve_source: str = ""  # sweep, benchmark, learned, reference, or "" (no curve)
    learned: Learned | None = None  # what the learner found (also when it refused)
    found: Found | None = None  # the one knee rule's finding behind a measured value (its knee, its reason)
    as_of: float | None = None  # unix seconds it was resolved at (the learner's progress line's age)

    @property
    def text(self) -> str:
        """``16 (learned)`` / ``unknown``: the sweet spot as every surface writes it."""
        return "unknown" if self.value is None else f"{self.value} ({self.source})"

    def line(self) -> str:
        """``16 (learned: 90 % of its plateau … from 1,440 minutes at 31 concurrency levels)`` / ``unknown: …``."""
        if self.value is None:
            return "unknown: " + self.missing().removeprefix("not evaluated: ")
        return f"{self.value} ({self.source}: {self.detail})" if self.detail != self.source else f"{self.value} ({self.source})"

    def missing(self) -> str:
        """The ``concurrency`` rule's "not evaluated" line when the sweet spot is unknown: every way to
        get a number, and the learner's progress with its age."""
        hours = max(self.learned.more_hours, 0.1) if self.learned and self.learned.more_hours else 2.0
        learn = f"or let it learn from {hours:.1f}".removesuffix(".0") + " more hours at higher load"
        return f"{NO_SWEET_SPOT}{learn}){self._progress()}"

    def _progress(self) -> str:
        """`` (the learner, 7 min ago: 45 busy minutes, …)``: its progress line and how old it is."""
        if self.learned is None:
            return ""
        age = ""
        if self.learned.learned_at is not None and self.as_of is not None:
            age = f", {max(0, round((self.as_of - self.learned.learned_at) / 60))} min ago"
        return f" (the learner{age}: {self.learned.reason})"

    def curve_missing(self) -> str:
        """The ``under_delivering`` rule's "not evaluated" line when there is no curve."""
        why = f" (the learner: {self.learned.reason})" if self.learned and self.learned.knee is None else ""
        return f"not evaluated: no curve yet (run `python -m app sweep`, or let it learn from its traffic){why}"

    def expected(self, running: float | None) -> float | None:
        """Output tok/s the own curve gives at ``running`` requests (None: no curve or no running)."""
        return None if running is None else expected_at(self.curve, running)

    def thresholds(self, sweetspot: SweetSpotSettings) -> SweetSpotSettings:
        """``sweetspot`` with this sweet spot as its ``concurrency`` (None when unknown)."""
        return sweetspot if sweetspot.concurrency == self.value else dataclasses.replace(sweetspot, concurrency=self.value)

    def names(self) -> dict[str, object]:
        """The rules' names this adds (app/alerts/names.py): sources and why a figure is missing."""
        return {"sweet_spot_source": self.source or "", "sweet_spot_missing": "" if self.value else self.missing(),
                "curve_source": self.curve_source, "curve_missing": "" if self.curve else self.curve_missing()}

    def as_json(self) -> dict[str, object]:
        found = self.found
        return {"sweet_spot": self.value, "sweet_spot_source": self.source, "sweet_spot_detail": self.detail,
                "curve_source": self.curve_source or None,
                "knee": None if found is None else found.knee, "slo_limit": None if found is None else found.slo_limit}


@dataclass(frozen=True)
class OwnCurves:
    """What the Operating point page draws as its curves: the report's on the demo (labelled as the
    report's), else the target's own fitted curve with its levels, else nothing."""

    tokens: tuple[tuple[float, float], ...]
    ttft: tuple[tuple[float, float], ...]
    label: str
    caption: str


def own_curves(spot: SweetSpot, report_tokens: Sequence[tuple[float, float]],
               report_ttft: Sequence[tuple[float, float]]) -> OwnCurves:  # fmt: skip
    """The curves of ``spot`` to draw (``report_*``: the report's, drawn on the demo only)."""
    if spot.source == REFERENCE:
        return OwnCurves(tuple(report_tokens), tuple(report_ttft), "reference (V100 report)",
                         f"the reference curve of {REFERENCE_REPORT}, this demo's")  # fmt: skip
    learned = spot.learned
    if learned is not None and learned.knee is not None:
        ttft = tuple((float(lv.concurrency), lv.ttft_p95_s) for lv in learned.levels if lv.ttft_p95_s is not None)
        return OwnCurves(learned.curve, ttft, "fitted (learned from its traffic)",
                         f"its own fitted curve, learned from {learned.rests_on} (median TTFT P95 per level)")
    why = learned.reason if learned is not None else "no history read"
    return OwnCurves((), (), "", f"none: no fitted curve of its own yet ({why})")


def resolve(reader: Reader, settings: Settings, target: str, now: float, *, learn_now: bool = False) -> SweetSpot:
    """``target``'s sweet spot and curve at ``now``, from the settings, its stored sweeps, imported
    benchmarks and history.

    The learned source is what the alert evaluator last learned and stored (db/learned.py), when it
    is under :data:`STORED_FRESH_S` old and was judged by the same SLO; else (no evaluator ran, an
    older database, a backtest at another time) it is learned here. ``learn_now``: learn it from the
    history whatever is stored (the evaluator, which stores it). A read that fails (a database
    without sweeps, say) costs that source only: the next one is tried.
    """
    sweetspot = effective_sweetspot(settings, target)
    if is_reference(settings, target) and sweetspot.concurrency is None:
        return reference_spot(now)
    sweep, bench, learned = _stored(reader, settings.learner, target, now, sweetspot.ttft_p95_slo_s, learn_now)
    measured = sorted((m for m in (_sweep_source(sweep), _bench_source(bench, sweetspot.ttft_p95_slo_s)) if m is not None),
                      key=lambda m: -m[0])  # the newest measurement first  # fmt: skip
    curve, curve_source = _curve(measured, learned)
    if sweetspot.concurrency is not None:
        return SweetSpot(sweetspot.concurrency, CONFIGURED, "configured", curve, curve_source, learned, as_of=now)
    for _, source, found, detail in measured:
        if found.sweet_spot is not None:
            return SweetSpot(found.sweet_spot, source, detail, curve, curve_source, learned, found, now)
    if learned is not None and learned.knee is not None:
        return SweetSpot(learned.knee, LEARNED, f"learned: {learned.reason}, from {learned.rests_on}", curve,
                         curve_source, learned, learned.found, now)  # fmt: skip
    return SweetSpot(None, None, "unknown", curve, curve_source, learned, as_of=now)


def reference_spot(now: float | None = None) -> SweetSpot:
    """The demo's: the one rule over the report's three points at the report's SLO (16)."""
    found = sweet_spot_of([MeasuredLevel(c, t, q) for c, t, q in REFERENCE_LEVELS], REFERENCE_SLO_S)
    curve = tuple((float(c), t) for c, t, _ in REFERENCE_LEVELS)
    return SweetSpot(found.sweet_spot, REFERENCE, f"the knee of {REFERENCE_REPORT}", curve, REFERENCE, None, found, now)


REFERENCE_KNEE = reference_spot().value  # 16: the report's, by the one rule (the demo's gateway limit)


def _sweep_source(sweep: SweepRun | None) -> tuple[float, str, Found, str] | None:
    """The sweep's sweet spot as it printed and stored it (``sweet_spot_concurrency``); the one rule
    over its levels and SLO for a run stored without one (an older layout)."""
    if sweep is None:
        return None
    found = sweet_spot_of(measured_levels(sweep.levels), sweep.ttft_slo_s)
    stored = sweep.recommendation.get("sweet_spot_concurrency", found.sweet_spot)
    if stored != found.sweet_spot:
        found = dataclasses.replace(found, sweet_spot=stored if isinstance(stored, int) else None)
    what = "the knee" if found.bound_by == "the knee" else f"the sweet spot ({found.bound_by})"
    return sweep.started_at, SWEEP, found, f"{what} of the sweep of {_day(sweep.started_at)}"


def bench_levels(runs: Sequence[BenchRun]) -> list[MeasuredLevel]:
    """The levels of the latest imported curve: runs of the latest run's tool and model within
    :data:`BENCH_SERIES_S` of it, the latest point at each whole concurrency (per-request TTFT P95)."""
    if not runs:
        return []
    latest = max(runs, key=lambda r: r.run_at)
    series = sorted((r for r in runs if r.tool == latest.tool and r.model == latest.model
                     and latest.run_at - r.run_at <= BENCH_SERIES_S), key=lambda r: r.run_at)  # fmt: skip
    levels: dict[int, MeasuredLevel] = {}
    for run in series:
        for p in run.points:
            if p.concurrency >= 0.5 and math.isfinite(p.concurrency):
                ended = p.requests + p.failed
                levels[round(p.concurrency)] = MeasuredLevel(
                    round(p.concurrency), p.tokens_per_s, p.ttft_p95_s, requests=p.requests,
                    error_rate=p.failed / ended if ended else None, weight=max(float(p.requests), 1.0))
    return [levels[c] for c in sorted(levels)]


def _bench_source(runs: Sequence[BenchRun], slo_s: float) -> tuple[float, str, Found, str] | None:
    """The imported benchmarks' sweet spot by the one rule, judged by the target's SLO (a benchmark
    file carries none)."""
    levels = bench_levels(runs)
    if not levels:
        return None
    latest = max(runs, key=lambda r: r.run_at)
    found = sweet_spot_of(levels, slo_s)
    detail = f"the {latest.tool} runs of {_day(latest.run_at)} ({len(levels)} levels)"
    return latest.run_at, BENCHMARK, found, detail


def _latest_sweep(reader: Reader, target: str) -> SweepRun | None:
    try:
        info = next((t for t in reader.targets() if t.name == target), None)
        mine, _ = sweeps_of(info, reader.sweep_runs(20))
    except Exception:  # noqa: BLE001 - no sweep to read is no sweep: the next source is tried
        return None
    return next((run for run in mine if any(lv.tokens_per_s for lv in run.levels)), None)


def _benches(reader: Reader, target: str) -> list[BenchRun]:
    try:
        return list(reader.bench_runs(50, target))
    except Exception:  # noqa: BLE001 - no benchmark to read is none: the next source is tried
        return []


# (database, target, SLO, 10-minute slot) → its latest sweep and what the learner found: the Fleet
# resolves every target each refresh, and the learner reads a week of minutes; both move with hours.
_STORED: dict[tuple[str, LearnerSettings, str, float, int, bool],
              tuple[SweepRun | None, list[BenchRun], Learned | None]] = {}  # fmt: skip
STORED_SLOT_S = 600
STORED_FRESH_S = 2 * STORED_SLOT_S  # a stored learned result older than this is learned again on read


def _stored(reader: Reader, learner: LearnerSettings, target: str, now: float, slo_s: float,
            learn_now: bool = False) -> tuple[SweepRun | None, list[BenchRun], Learned | None]:  # fmt: skip
    key = (str(getattr(getattr(reader, "engine", None), "url", "")), learner, target, slo_s, int(now // STORED_SLOT_S),
           learn_now)  # fmt: skip
    if key not in _STORED:
        if len(_STORED) > 4096:
            _STORED.clear()
        learned = None if learn_now else stored_learned(reader, target, now, slo_s)
        if learned is None:
            learned = learn_from_history(reader, learner, target, now, slo_s)
        _STORED[key] = (_latest_sweep(reader, target), _benches(reader, target), learned)
    return _STORED[key]


def stored_learned(reader: Reader, target: str, now: float, slo_s: float) -> Learned | None:
    """What the evaluator last learned for ``target`` (db/learned.py), if fresh and judged by ``slo_s``."""
    try:
        found = reader.learned_sweet_spot(target, now)
    except Exception:  # noqa: BLE001 - a database without the table: learned on read
        return None
    if found is None:
        return None
    at, stored_slo, learned = found
    return dataclasses.replace(learned, learned_at=float(at)) if now - at <= STORED_FRESH_S and stored_slo == slo_s else None


def limits_of(learner: LearnerSettings) -> Limits:
    """The learner's minimums in minutes, from the ``[learner]`` settings."""
    return Limits(learner.min_busy_s / 60.0, learner.min_levels, learner.min_level_s / 60.0)


def learn_from_history(reader: Reader, learner: LearnerSettings, target: str, now: float, slo_s: float,
                       *, leave_out_faults: bool = True) -> Learned | None:  # fmt: skip
    """What the learner finds in ``target``'s stored history before ``now`` (None: unreadable).

    One sample per ``learner.step_s``, its TTFT P95 the one clients see (``client_ttft_p95_s``: behind
    a gateway, its wait added); left out (``leave_out_faults``): steps with a failed scrape
    (the target down or unreachable; a step without any scrape has no figures at all), steps within
    ``restart_settle_s`` of an engine restart or configuration change, and the minutes whose stored
    verdict held a fault rule (:data:`FAULT_RULES`: under-delivering against its own curve, down,
    not serving, asleep, failing requests), so a degraded period does not teach a lower curve.
    """
    start, step = now - learner.span_s, learner.step_s
    try:
        cols = reader.series_columns(target, start, now, step, fields=LEARN_FIELDS, ttft_slo_s=slo_s)
        faulty = _faulty_minutes(reader, target, start, now) if leave_out_faults else set()
        settling = _settling(reader, learner, target, start, now) if leave_out_faults else []
    except Exception:  # noqa: BLE001 - an unreadable history teaches nothing
        return None
    samples = []
    for i, (ts, r, t, q, up) in enumerate(zip(cols["ts"], cols["running_avg"], cols["tokens_per_s"],
                                              cols["client_ttft_p95_s"], cols["up_ratio"], strict=True)):  # fmt: skip
        if r is None or t is None or ts + step > now:  # a step not yet whole is not a sample
            continue
        if leave_out_faults and ((up is not None and up < 1.0) or _minute(ts, step) & faulty
                                 or any(a < ts + step and ts < b for a, b in settling)):  # fmt: skip
            continue
        samples.append(Sample(r, t, q, step / 60.0, step_slo(cols, i, step, slo_s)))
    return dataclasses.replace(learn(samples, slo_s, limits=limits_of(learner)), learned_at=now)


def step_slo(cols: dict[str, list[float | None]], i: int, step: float, slo_s: float) -> StepSlo | None:
    """Step ``i``'s clients' TTFT against the SLO from the buckets: the shares at the bounds either side
    of its threshold (both the share itself where a bound is the threshold, or where the gateway's own
    wait histogram was convolved), and the requests the histogram counted (its rate × the step)."""
    share = cols[SHARE][i]
    rate = cols["requests_started_per_s"][i]
    rate = cols["requests_per_s"][i] if rate is None else rate
    if share is None or rate is None or rate <= 0:
        return None
    lower_le, lower, upper_le, upper = (cols[SHARE + p][i] for p in ("_lower_le", "_lower_share", "_upper_le",
                                                                     "_upper_share"))  # fmt: skip
    if lower is None or upper is None or lower_le is None or upper_le is None:
        return StepSlo(rate * step, share, share, (slo_s, slo_s))
    return StepSlo(rate * step, lower, upper, (lower_le, upper_le))


def _faulty_minutes(reader: Reader, target: str, start: float, end: float) -> set[int]:
    return {v.ts for v in reader.verdicts(target, start, end) if any(rule in v.held for rule in FAULT_RULES)}


def _minute(ts: float, step: float) -> set[int]:
    """The minute starts a step overlaps (one for a step of a minute or less)."""
    first = int(ts) // 60 * 60
    return set(range(first, int(ts + step - 1) // 60 * 60 + 1, 60))


def _settling(reader: Reader, learner: LearnerSettings, target: str, start: float, end: float) -> list[tuple[float, float]]:
    """[from, to) spans after each restart or configuration change (not the first configuration seen)."""
    return [(e.ts, e.ts + learner.restart_settle_s) for e in reader.epochs(target, start, end)
            if e.kind != "first" and learner.restart_settle_s > 0]  # fmt: skip


def _curve(measured: Sequence[tuple[float, str, Found, str]],
           learned: Learned | None) -> tuple[tuple[tuple[float, float], ...], str]:  # fmt: skip
    """The newest measured source's fitted curve, else the learned one."""
    for _, source, found, _ in measured:
        if found.curve:
            return tuple((float(c), t) for c, t in found.curve), source
    if learned is not None and learned.knee is not None:
        return learned.curve, LEARNED
    return (), ""


def _day(ts: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))
