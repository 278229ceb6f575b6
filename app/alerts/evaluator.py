"""The alert evaluator: every rule for every target, from the stored figures, into stored states.

A plain job: :meth:`Evaluator.evaluate_once` evaluates and stores once (tests, the CLI);
:meth:`Evaluator.run` is what the collector schedules every ``alerts.evaluate_every_s``: it takes
or renews the lease first, so a second collector on the same database evaluates nothing and says
so in its log. The figures come from the query facade, read for every target at once (one window
per distinct rule window and one short queue series, :meth:`Evaluator._read_all`), never one query
per rule. States are loaded once and written in one transaction per evaluation, so a restart resumes exactly where the last
evaluation left off (a pending timer keeps its start, a firing alert is not announced again). Each
evaluation also stores every target's verdict of the current minute (db/verdicts.py):
the one judge the query views, the digest and the Overview's history read. Each evaluation writes the
minute's row again (an upsert), so the stored verdict is the minute's last evaluation's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Engine

from app.advice import has_reference_advice, like_reference, with_reference
from app.alerts import lease, store, sweep_hold
from app.alerts.down_clock import DownSpell, down_spell
from app.alerts.lifecycle import advance, new_state, transition
from app.alerts.model import ERROR, FIRING, INACTIVE, PENDING, RESOLVED, AlertState, Transition
from app.alerts.names import window_names
from app.alerts.rules import HOLDS, Names, Outcome, Rule, names_in, outcome, recommendation, rule_set
from app.notify.grouping import delivery_channels, delivery_line
from app.sweet_spot import SweetSpot, resolve
from app.verdict import judgement
from core.settings import Settings, effective_sweetspot, stale_after
from core.text import named
from db import delivery, learned, verdicts
from db.queries import Reader, points_from_columns
from db.results import SeriesPoint, SweepSpan, WindowFigures
from db.thresholds import thresholds_of

log = logging.getLogger(__name__)

QUEUE_NAMES = frozenset({"queue_growing", "queue_before", "queue_now"})
QUEUE_STEP_S = 30.0
SPOT_EVERY_S = 600  # the learned sweet spot and curve move with hours of traffic, not seconds


@dataclasses.dataclass(frozen=True)
class Derived:
    """What the last evaluation found for one whole target, for the collector's ``/metrics``: every
    name over its shortest rule window, the verdict (the banner's states, without the ``for`` timers:
    what db/verdicts.py stores for the minute), the rules that held, and how many of its alerts fire,
    by severity."""

    names: dict[str, Any]
    verdict: str  # in_sweet_spot, outside, cannot_tell or no_data
    firing: dict[str, int]
    held: dict[str, float | None] = dataclasses.field(default_factory=dict)  # whole-target rules that held → value
    not_judged: dict[str, str] = dataclasses.field(default_factory=dict)  # default rules not judged → why ("": the window)


@dataclasses.dataclass(frozen=True)
class _Batch:
    """What :meth:`Evaluator._read_all` read for every target at once."""

    windows: dict[tuple[float, str], WindowFigures]  # (window_s, target) → the whole target's window
    recent: dict[str, list[SeriesPoint]]  # target → its queue series over the global queue_growth_s
    growth_s: float


TARGET_REMOVED = "the target was removed from the configuration: its alerts end here"


class Evaluator:
    """Evaluates the effective rule set of every configured or discovered target (model "": the whole target)."""

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        clock: Callable[[], float] = time.time,
        lock: threading.Lock | None = None,
        holder: str | None = None,
    ) -> None:
        self.engine, self.settings, self.clock = engine, settings, clock
        self.reader = Reader(engine=engine)
        self.rules = {t.name: rule_set(settings, t.name) for t in settings.targets}
        self.lock = lock or threading.Lock()  # the collector's write lock: SQLite takes one writer
        self.holder = holder or lease.holder_id()
        self._leading: bool | None = None
        self.derived: dict[str, Derived] = {}  # target → the last evaluation's figures (replaced whole)
        self.last_duration_s: float | None = None  # of the last evaluate_once run by :meth:`run`
        self._names: dict[str, dict[str, Any]] = {}
        self._longest: dict[str, Names] = {}  # target → its names over its longest rule window (outage or blip)
        self._spots: dict[str, tuple[int, SweetSpot]] = {}  # target → (when resolved, its sweet spot and curve)
        self.names: dict[str, str] = {}  # setting → the flag the user gave it as (core.text.named)
        self._delivery = (delivery_line(settings.alerts.email, settings.alerts), delivery_channels(settings.alerts))
        self._urls = {t.name: t.vllm_url for t in settings.targets}  # a sweep stored without a target names its URL

    # -- the scheduled job ----------------------------------------------------------------------------
    def run(self, take: bool = True) -> str:
        """Take or renew the lease, then evaluate once; a line saying what happened. ``take=False``
        (this process has stored no round yet): say who holds the lease, take it from nobody."""
        now = self.clock()
        held = False
        if take:
            with self.lock:
                held = lease.acquire(self.engine, lease.EVALUATOR, self.holder, now, self.settings.alerts.lease_s)
        if not held:
            other = lease.current_holder(self.engine, lease.EVALUATOR)
            if not take and (other is None or other.holder == self.holder or other.expires_at <= now):
                return "alert evaluator: waiting for this process's first stored round"
            line = f"alert evaluator: another process holds the lease ({other.holder if other else '?'}); evaluating nothing"
            if self._leading is not False:
                log.info("%s", line)
            self._leading = False
            return line
        if self._leading is not True:
            log.info("alert evaluator: this process (%s) holds the lease and evaluates the rules", self.holder)
        self._leading = True
        began = time.perf_counter()
        transitions = self.evaluate_once(now)
        self.last_duration_s = time.perf_counter() - began
        for t in transitions:
            log.info("alert %s on %s: %s → %s (%s)", t.rule, t.target, t.from_state, t.to_state, t.summary)
        return f"alert evaluator: {len(transitions)} transition(s)"

    def release(self) -> None:
        """Hand the lease back (a clean stop): a standby collector takes over at its next run."""
        if self._leading:
            with contextlib.suppress(Exception):
                lease.release(self.engine, lease.EVALUATOR, self.holder)

    # -- one evaluation -------------------------------------------------------------------------------
    def evaluate_once(self, now: float | None = None) -> list[Transition]:
        """Evaluate every rule of every target at ``now`` (default: the clock), store the states and
        transitions, and return the transitions."""
        at = int(self.clock() if now is None else now)
        stored = store.load_states(self.engine)
        self._take_up_discovered()
        states: list[AlertState] = []
        transitions: list[Transition] = []
        batch = self._read_all(at)
        spans = self._sweeps(at)
        derived = {}
        like: dict[str, bool] = {}  # target → its GPUs are like the reference's (read once, when needed)
        for target, rules in self.rules.items():
            outcomes = self._outcomes(target, rules, at, batch)
            span = sweep_hold.sweep_of(spans, target, self._urls.get(target))
            outcomes = {key: (sweep_hold.held(out, span), text) if span and sweep_hold.holds(self._rule(target, key[0]), span, at)
                        else (out, text) for key, (out, text) in outcomes.items()}  # fmt: skip
            for (name, model), (out, text) in outcomes.items():
                rule = next(r for r in rules if r.name == name)
                prev = stored.get((name, target, model)) or new_state(rule, target, model, at)
                if out.status == HOLDS or prev.state in (PENDING, FIRING):  # the advice is read then only
                    text = named(self._advice(target, rule, text, like), self.names)
                spell = self._spell(target, at) if not rule.needs_data and out.status == HOLDS else None
                state, change = advance(prev, rule, out, at, text, spell)
                states.append(state)
                transitions += [change] if change else []
            derived[target] = self._derived(target, outcomes, states)
        states_, retired = self._retired(stored, at)
        states += states_
        transitions += retired
        minute = verdicts.minute_of(at)
        judged = [verdicts.StoredVerdict(t, minute, d.verdict, at, d.held, thresholds_of(effective_sweetspot(self.settings, t)),
                                         d.not_judged) for t, d in derived.items()]  # fmt: skip
        with self.lock, self.engine.begin() as conn:
            store.save(conn, states, stored, transitions)
            # where this process sends: status and the UI, run with other settings, show this row
            delivery.write(conn, self.holder, at, self._delivery[0], self._delivery[1])
            # the minute's verdict: its last evaluation's (an upsert each time), judged with the minute's
            # own data. The first evaluation's judged the window ending as the minute began: a restart's
            # one refused scrape at :00 made a healthy minute no data, and each fault's first minute read
            # fine (docs/scenarios.md, verdicts)
            verdicts.write(conn, judged)
        self.derived = derived
        return transitions

    def _rule(self, target: str, name: str) -> Rule:
        return next(r for r in self.rules[target] if r.name == name)

    def _sweeps(self, at: int) -> list[SweepSpan]:
        """The stored sweeps loading any target now, or within the longest rule window before now
        (app/alerts/sweep_hold.py); none when they cannot be read (the rules judge as always)."""
        if not any(r.load for rules in self.rules.values() for r in rules):
            return []
        longest = max(r.window_s for rules in self.rules.values() for r in rules)
        try:
            return self.reader.sweeps_loading(at, longest)
        except Exception as exc:  # noqa: BLE001 - no sweep read is no hold: every rule judges
            log.warning("alert evaluator: cannot read the sweeps in progress: %s", exc)
            return []

    def _spell(self, target: str, at: int) -> DownSpell | None:
        """The target's spell of failed scrapes: the clock of the rule that watches the data
        (app/alerts/down_clock.py); None when it cannot be read (the evaluations' clock then)."""
        try:
            return down_spell(self.engine, target, at, stale_after(self.settings))
        except Exception as exc:  # the rule is judged all the same, on the evaluations' clock
            log.warning("alert evaluator: cannot read the scrapes of %s: %s", target, exc)
            return None

    def _advice(self, target: str, rule: Rule, text: str, like: dict[str, bool]) -> str:
        """``text``, followed by the reference deployment's experience when the rule gives its default
        advice and the target's stored GPUs are like the reference's (app/advice.py); unknown GPUs,
        or GPUs that cannot be read, get the generic advice only."""
        if not has_reference_advice(rule):
            return text
        if target not in like:
            try:
                like[target] = like_reference(self.reader.latest_gpus(target))
            except Exception as exc:  # the generic advice all the same
                log.warning("alert evaluator: cannot read the GPUs of %s: %s", target, exc)
                like[target] = False
        return with_reference(text, rule.name, like[target])

    def _derived(self, target: str, outcomes: dict[tuple[str, str], tuple[Outcome, str]], states: list[AlertState]) -> Derived:
        names = self._names.get(target, {})
        held = {name: out.value for (name, m), (out, _) in outcomes.items() if not m and out.status == HOLDS}
        whole = {name: out for (name, m), (out, _) in outcomes.items() if not m}
        rules = self.rules[target]
        # the one aggregation the banner and status use (app/verdict.py), over the shortest rule window's names
        verdict, unjudged = judgement(rules, whole, Names(names, min((r.window_s for r in rules), default=None)),
                                      self._longest.get(target))
        # a rule held by a sweep reads clear for the state, and the minute says why it was not judged
        held_by_sweep = {name: out.summary for name, out in whole.items() if out.summary.startswith(sweep_hold.HELD + ":")}
        firing: dict[str, int] = {}
        for s in states:
            if s.target == target and s.state == FIRING:
                firing[s.severity] = firing.get(s.severity, 0) + 1
        return Derived(names, verdict, firing, held, {**{u.rule: u.reason for u in unjudged}, **held_by_sweep})

    def _take_up_discovered(self) -> None:
        """Targets a ``[[prometheus]]`` source found are judged by the same rules (the global
        thresholds: they have no ``[[targets]]`` entry of their own)."""
        from db.discovery import discovered_names

        try:
            names = discovered_names(self.engine)
        except Exception as exc:  # the configured targets are evaluated all the same
            log.warning("alert evaluator: cannot read the discovered targets: %s", exc)
            return
        for name in names:
            if name not in self.rules:
                self.rules[name] = rule_set(self.settings, name)

    def _read_all(self, at: int) -> _Batch:
        """Every target's whole-target windows (one per distinct rule window) and its queue series,
        read for all targets together (db/fleet.py: a few statements in all, instead of ~20 per target
        and window: 3.4 s of CPU every 15 s for 200 targets, docs/benchmarks.md). Empty when that read
        fails: each target then reads its own, and a failure costs that target's rules only."""
        windows = sorted({r.window_s for rules in self.rules.values() for r in rules})
        if not windows:
            return _Batch({}, {}, 0.0)
        growth_s = self.settings.sweetspot.queue_growth_s
        span = (at - growth_s - QUEUE_STEP_S, at, QUEUE_STEP_S)
        try:
            read = {w: self.reader.fleet(at, w, span if i == 0 else (at - 1, at, 1.0), ("queue_depth_max",))
                    for i, w in enumerate(windows)}  # fmt: skip
        except Exception as exc:
            log.warning("alert evaluator: cannot read every target at once (%s); reading them one by one", exc)
            return _Batch({}, {}, 0.0)
        first = read[windows[0]]
        recent = {name: points_from_columns(f.series) for name, f in first.items()}
        return _Batch({(w, name): f.window for w, by in read.items() for name, f in by.items()}, recent, growth_s)

    def _outcomes(self, target: str, rules: Sequence[Rule], at: int,
                  batch: _Batch | None = None) -> dict[tuple[str, str], tuple[Outcome, str]]:  # fmt: skip
        """Each (rule, model)'s outcome and recommendation for one target (model "": the whole target;
        a ``per_model`` rule also gets one per stored model); a failed read is every rule's error."""
        sweetspot = effective_sweetspot(self.settings, target)
        batch = batch or _Batch({}, {}, 0.0)
        try:
            if target in batch.recent and sweetspot.queue_growth_s == batch.growth_s:
                recent: Sequence[SeriesPoint] = batch.recent[target] if any(names_in(r) & QUEUE_NAMES for r in rules) else ()
            else:
                recent = self._recent(target, rules, at, sweetspot.queue_growth_s)
            models = self.reader.models(target) if any(r.per_model for r in rules) else []
            # the SLO shares are judged by this evaluator's own SLO (the ttft_p95 rule's threshold and its
            # bucket proof must name one figure): the batch read judges by the stored one, used only where equal
            slo = sweetspot.ttft_p95_slo_s
            windows = {
                (w, m): batch.windows[(w, target)] if not m and _same_slo(batch.windows.get((w, target)), slo)
                else self.reader.window(target, at, w, model=m or None, ttft_slo_s=slo)  # the GPUs too: the measured MBU
                for w in sorted({r.window_s for r in rules})
                for m in ["", *(models if any(r.per_model and r.window_s == w for r in rules) else [])]
            }
        except Exception as exc:  # one unreadable target costs its own rules, never the others
            log.warning("alert evaluator: cannot read %s: %s", target, exc)
            self._names.pop(target, None)  # its figures are not known now: /metrics shows none, and no data
            self._longest.pop(target, None)
            return {(r.name, ""): (Outcome(ERROR, summary=f"cannot read the figures: {exc}"), "") for r in rules}
        spot = self.sweet_spot(target, at)
        names = {key: Names(window_names(f, sweetspot, recent, spot), f.window_s) for key, f in windows.items()}
        self._names[target] = names[(min(w for w, _ in names), "")].names
        self._longest[target] = names[(max(w for w, _ in names), "")]
        return {
            (r.name, m): (outcome(r, names[(r.window_s, m)]), recommendation(r, names[(r.window_s, m)]))
            for r in rules
            for m in ["", *(models if r.per_model else [])]
        }

    def sweet_spot(self, target: str, at: int) -> SweetSpot:
        """``target``'s sweet spot and own curve (app/sweet_spot.py), resolved again every
        :data:`SPOT_EVERY_S` (the learner reads a week of minutes) or when the clock went back."""
        held = self._spots.get(target)
        if held is None or not 0 <= at - held[0] < SPOT_EVERY_S:
            held = (at, resolve(self.reader, self.settings, target, at, learn_now=True))
            self._spots[target] = held
            self._store_learned(target, at, held[1])
        return held[1]

    def _store_learned(self, target: str, at: int, spot: SweetSpot) -> None:
        """Store what the learner found (db/learned.py): every surface reads it back, the same number."""
        if spot.learned is None:
            return
        slo = effective_sweetspot(self.settings, target).ttft_p95_slo_s
        try:
            with self.lock, self.engine.begin() as conn:
                learned.write(conn, target, at, spot.learned, slo)
        except Exception:  # noqa: BLE001 - a database without the table yet: judged all the same, stored next time
            log.warning("could not store the learned sweet spot of %s", target, exc_info=True)

    def _recent(self, target: str, rules: Sequence[Rule], at: int, growth_s: float) -> Sequence[SeriesPoint]:
        if not any(names_in(r) & QUEUE_NAMES for r in rules):
            return ()
        fields = ("queue_depth_max",)
        return self.reader.series(target, at - growth_s - QUEUE_STEP_S, at, QUEUE_STEP_S, fields=fields)

    def _retired(self, stored: dict[store.Key, AlertState], at: int) -> tuple[list[AlertState], list[Transition]]:
        """Stored alerts whose rule is gone (disabled in the file) or whose target is (removed from the
        configuration, and not found by a ``[[prometheus]]`` source): a firing one resolves, which is
        its one notice (``[RESOLVED]``, saying why), any other goes inactive silently, once; neither is
        evaluated or sent again."""
        states, transitions = [], []
        for (rule, target, _model), s in stored.items():
            if target in self.rules and any(r.name == rule for r in self.rules[target]):
                continue
            if s.state in (INACTIVE, RESOLVED):
                continue
            to = RESOLVED if s.state == FIRING else INACTIVE
            why = "the rule is no longer configured" if target in self.rules else TARGET_REMOVED
            state = dataclasses.replace(
                s, state=to, pending_since=None, last_change_at=at, last_eval_at=at,
                resolved_at=at if to == RESOLVED else s.resolved_at, summary=why,
            )  # fmt: skip
            states.append(state)
            transitions.append(transition(s.state, state, at))
        return states, transitions


def _same_slo(f: WindowFigures | None, slo_s: float | None) -> bool:
    """Whether a batch-read window ``f`` judged its TTFT SLO shares by ``slo_s`` (s), the evaluator's own."""
    return f is not None and f.ttft_slo_s == slo_s
