"""Is a target in its sweet spot? The alert rule set (app/alerts/rules.py) over one window of figures.

Pure: no Streamlit, no database. The Overview's banner and ``status`` call :func:`evaluate` with a
:class:`WindowFigures` (and the recent :class:`SeriesPoint` steps, needed for "the gateway queue
has been growing for minutes"); the alert evaluator applies the same rules with their ``for``
timers and stores each minute's state through :func:`judgement`, the one aggregation. Four states:

- ``outside``: a rule that was judged broke (the others may not have been: the alert fires all the same);
- ``in_sweet_spot``: every default rule was judged and none broke ("every rule holds");
- ``cannot_tell``: none broke, but a default rule could not be judged: no sweet spot yet (and how to
  get one), no traffic, an outage inside the window, a bucket that cannot settle the SLO;
- ``no_data``: the window has nothing to judge (the target down, stale, never scraped), with its reason.

Missing figures (``None``) never break a rule on their own, and never read as "all good".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.alerts.model import CRITICAL, WARNING
from app.alerts.model import NO_DATA as NO_DATA_RULE
from app.alerts.names import no_data_reason, queue_growth, window_names
from app.alerts.rules import CANNOT_TELL as RULE_CANNOT_TELL
from app.alerts.rules import DEFAULT_RULES, ERROR, HOLDS, OP_TEXT, Names, Outcome, Rule, outcome, wording
from app.formatting import compared, slo_bucket_warning
from core.durations import format_duration
from core.settings import SweetSpotSettings
from core.text import visible
from db.results import SeriesPoint, WindowFigures
from db.verdicts import CANNOT_TELL, IN_SWEET_SPOT, NO_DATA, OUTSIDE, StoredVerdict

if TYPE_CHECKING:
    from app.sweet_spot import SweetSpot

__all__ = ["evaluate", "judgement", "broken_since", "last_up", "no_data_reason", "queue_growth", "Clause", "Verdict",
           "Unjudged", "CANNOT_TELL"]  # fmt: skip
# An outage inside the window: this share of its scrapes failed (one failed scrape in 60 is a blip).
OUTAGE_SHARE = 0.1
WINDOW = ""  # the key of a reason that concerns the whole window, not one rule

# A verdict's states are the stored verdicts' (db/verdicts.py); the severities the alert lifecycle's.


@dataclass(frozen=True)
class Clause:
    """One broken rule: ``value`` against ``threshold``, both in ``unit`` (as displayed)."""

    name: str  # stable key for alert de-duplication: ttft_p95, preemptions, kv_cache, ...
    label: str  # "TTFT P95 over 5m"
    value: float
    threshold: float
    unit: str  # "s", "%", "tok/s", "requests", ""
    op: str  # ">", "≥", "<"
    severity: str  # WARNING or CRITICAL
    detail: str = ""  # what the bare comparison does not say
    summary: str = ""  # the rule's own wording, when it has one

    @property
    def text(self) -> str:
        """``TTFT P95 over 5m 4.8 s > 3 s``."""
        if self.summary:
            return self.summary
        value, threshold = compared(self.value, self.threshold, self.unit)
        main = f"{self.label} {value} {self.op} {threshold}"
        return f"{main} ({self.detail})" if self.detail else main


@dataclass(frozen=True)
class Unjudged:
    """A default rule that could not judge the window (``rule`` "": the whole window), and why."""

    rule: str
    reason: str

    @property
    def text(self) -> str:
        return f"{self.rule}: {self.reason}" if self.rule else self.reason


@dataclass(frozen=True)
class Verdict:
    """The state of one target over one window, with every broken clause (worst first) and every
    default rule it could not judge."""

    state: str  # IN_SWEET_SPOT, OUTSIDE, CANNOT_TELL or NO_DATA
    target: str
    window_s: float
    clauses: tuple[Clause, ...] = ()
    reason: str = ""  # why there is no data (state NO_DATA only)
    unjudged: tuple[Unjudged, ...] = ()

    @property
    def severity(self) -> str | None:
        """CRITICAL or WARNING for OUTSIDE; CRITICAL for NO_DATA (blind is worse than slow); None when
        fine or when it cannot tell (nothing proves a fault)."""
        if self.state == NO_DATA:
            return CRITICAL
        if not self.clauses:
            return None
        return CRITICAL if any(c.severity == CRITICAL for c in self.clauses) else WARNING

    @property
    def headline(self) -> str:
        """One line for a banner or an e-mail subject."""
        window, target = format_duration(self.window_s), visible(self.target)
        if self.state == NO_DATA:
            return f"{target}: no data over {window}: {self.reason}"
        if self.state == IN_SWEET_SPOT:
            return f"{target}: in the sweet spot over {window}: every rule holds"
        if self.state == CANNOT_TELL:
            return f"{target}: cannot tell over {window} whether it is in the sweet spot: " + "; ".join(u.text for u in self.unjudged)
        return f"{target}: outside the sweet spot over {window}: " + "; ".join(c.text for c in self.clauses)

    def not_judged(self) -> dict[str, str]:
        """Each rule not judged → why (key "": the window's own reason), as stored and as ``status --json`` gives it."""
        return {u.rule: u.reason for u in self.unjudged}


def evaluate(
    figures: WindowFigures,
    sweetspot: SweetSpotSettings,
    recent: Sequence[SeriesPoint] = (),
    alert_rules: Sequence[Rule] = DEFAULT_RULES,
    spot: SweetSpot | None = None,
) -> Verdict:
    """Apply the rule set (default: DOMAIN.md §3) to one window; ``recent`` are the latest series
    steps (oldest first), for the queue-growth rule. The condition only: ``for`` is the evaluator's."""
    reason = no_data_reason(figures)
    if reason:
        return Verdict(NO_DATA, figures.target, figures.window_s, reason=reason)
    names = Names(window_names(figures, sweetspot, recent, spot), figures.window_s)
    outcomes = {r.name: outcome(r, names) for r in alert_rules if r.needs_data}
    held = [(r, outcomes[r.name]) for r in _clauses(alert_rules) if outcomes[r.name].status == HOLDS]
    broken = [_clause(r, o, names) for r, o in _most_severe_per_figure(held)]
    broken.sort(key=lambda c: c.severity != CRITICAL)  # stable: critical first, rule order kept
    state, unjudged = judgement(alert_rules, outcomes, names)
    return Verdict(state, figures.target, figures.window_s, tuple(broken), unjudged=unjudged)


def slo_note(figures: WindowFigures, verdict: Verdict) -> str:
    """The note under the TTFT figures when the engine's TTFT P95 shares a bucket with the SLO, in the
    verdict's own words: "cannot tell" where the verdict could not judge the P95 (and the fix), or why
    it judged anyway (the clients' figure adds a gateway wait no bucket holds); "" otherwise."""
    warning = slo_bucket_warning(figures)
    if warning is None or verdict.state == NO_DATA:
        return ""
    if "ttft_p95" in verdict.not_judged():
        return warning
    if figures.client_ttft_p95_s is not None and figures.client_ttft_p95_s != figures.ttft_p95_s:
        bucket = figures.ttft_slo_in_p95_bucket()
        assert bucket is not None  # slo_bucket_warning found one
        return (f"The engine's own TTFT P95 lies in vLLM's bucket ({bucket[0]:g}, {bucket[1]:g}] s, which holds the SLO; "
                "the verdict judges the clients' figure, the engine's median plus the gateway wait's P95, which the wait "
                "decides (the buckets do not).")  # fmt: skip
    return ""


def judgement(rules: Sequence[Rule], outcomes: Mapping[str, Outcome], names: Names,
              longest: Names | None = None) -> tuple[str, tuple[Unjudged, ...]]:  # fmt: skip
    """The state of a window from its rules' outcomes (whole target, by rule name) and its names: the
    one aggregation (the banner, ``status``, the Fleet, the evaluator's stored minutes, the replay).

    OUTSIDE when a judged rule broke; else CANNOT_TELL when a rule could not be judged (or the window
    held an outage); else IN_SWEET_SPOT: every rule of the set (the defaults, as ``[[alerts.rules]]``
    left them, and any added) was judged and held. NO_DATA when the window has nothing to judge.
    ``longest``: the names over the longest rule window, where ``names`` are a shorter one's (the
    evaluator's), to tell an outage from a blip."""
    if names.names.get("no_data", 1.0):
        return NO_DATA, ()
    unjudged = list(_window_reasons(names, _blip_s(rules), longest))
    for rule in _clauses(rules):
        o = outcomes.get(rule.name)
        if o is not None and o.status in (NO_DATA_RULE, ERROR, RULE_CANNOT_TELL):
            unjudged.append(Unjudged(rule.name, _why_not(rule, o, names)))
    if any(o.status == HOLDS for r in _clauses(rules) if (o := outcomes.get(r.name)) is not None):
        return OUTSIDE, tuple(unjudged)
    return (CANNOT_TELL if unjudged else IN_SWEET_SPOT), tuple(unjudged)


def _clauses(rules: Sequence[Rule]) -> list[Rule]:
    """The rules a verdict is made of: those judging the window's figures, not the data itself (target
    down: the verdict's own no data) nor the judgement (a ``watches`` rule: cannot tell for long)."""
    return [r for r in rules if r.needs_data and not r.watches]


def _blip_s(rules: Sequence[Rule]) -> float:
    """The longest failed spell that is a blip, not an outage: the ``for`` of the rule that watches
    the data (target down), which lets it pass too."""
    return max((r.for_s for r in rules if not r.needs_data), default=0.0)


def _failed_s(names: Names) -> float:
    """Seconds of the window's failed scrapes (each failed scrape standing for its share of the window)."""
    scrapes, failed = names.names.get("scrapes") or 0.0, names.names.get("failed_scrapes") or 0.0
    return failed * (names.window_s or 0.0) / scrapes if scrapes else 0.0


def _window_reasons(names: Names, blip_s: float = 0.0, longest: Names | None = None) -> list[Unjudged]:
    """What makes the whole window unsure: an outage inside it, a share of its scrapes failed, unless
    the longest rule window (``longest``; the window itself when None) holds no more failed time than
    a blip. One refused scrape of four in a 1-minute window is 25 % of it, yet 15 s that no alert
    counts: it made a restart that recovered a minute nobody could judge; the same scrape at the end
    of a crash loop's 2-minute outage stays an outage."""
    scrapes, failed = names.names.get("scrapes") or 0.0, names.names.get("failed_scrapes") or 0.0
    if scrapes and failed and failed / scrapes >= OUTAGE_SHARE and _failed_s(longest or names) > blip_s:
        window = format_duration(names.window_s or 0.0)
        return [Unjudged(WINDOW, f"an outage inside the {window}: {failed:.0f} of {scrapes:.0f} scrapes failed, so its "
                                 f"figures cover only part of it (judged whole once {window} have passed without one)")]
    return []


def _no_traffic(names: Names) -> bool:
    n = names.names
    return not n.get("requests_per_s") and not n.get("tokens_per_s") and not n.get("running_max")


def _why_not(rule: Rule, o: Outcome, names: Names) -> str:
    """Why ``rule`` was not judged, in words that say how to get a judgement where there is a way."""
    if o.status == RULE_CANNOT_TELL or o.status == ERROR:
        return o.summary
    if o.summary.startswith("no data for") and _no_traffic(names):
        return f"no traffic over {format_duration(names.window_of(rule))}: no request to judge it by"
    return o.summary.removeprefix("not evaluated: ")


def _most_severe_per_figure(held: list[tuple[Rule, Outcome]]) -> list[tuple[Rule, Outcome]]:
    # KV usage ≥ 98 % also breaks the ≥ 90 % warning: one clause per figure, the critical one.
    critical = {r.expr for r, _ in held if r.severity == CRITICAL}
    return [(r, o) for r, o in held if r.severity == CRITICAL or r.expr not in critical]


def _clause(rule: Rule, o: Outcome, names: Names) -> Clause:
    assert o.value is not None and o.threshold is not None  # HOLDS has both
    label, detail = wording(rule, names)
    return Clause(
        rule.name, label, o.value * rule.scale, o.threshold * rule.scale, rule.unit, OP_TEXT.get(rule.op, rule.op),
        rule.severity, detail, o.summary,
    )  # fmt: skip


def broken_since(name: str, history: Sequence[StoredVerdict], window_s: float) -> float | None:
    """Start (unix s) of the current spell in which rule ``name`` kept holding, from the minutes'
    stored verdicts (``Reader.verdicts``, oldest first: the evaluator's judgement, never redone here).

    A spell tolerates minutes without the rule shorter than ``window_s`` (preemptions come in bursts,
    TTFT wobbles); it ends at the first whole window of judged minutes in which it did not hold.
    Minutes of no data or without a stored verdict neither start nor end it. None when the rule did
    not hold in the last window of the history.
    """
    if not history:
        return None
    since: float | None = None
    newest = float(history[-1].ts)
    for v in reversed(history):
        if name in v.held:
            since = float(v.ts)
        elif v.state != NO_DATA and (since if since is not None else newest) - v.ts >= window_s:
            break
    return since


def last_up(points: Sequence[SeriesPoint]) -> float | None:
    """End of the last step with a successful scrape: where a "no data" spell began."""
    for i in range(len(points) - 1, -1, -1):
        if points[i].up_ratio:
            step = points[i + 1].ts - points[i].ts if i + 1 < len(points) else 0.0
            return points[i].ts + step
    return None
