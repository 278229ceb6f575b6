"""Is a target in its sweet spot? The alert rule set (app/alerts/rules.py) over one window of figures.

Pure: no Streamlit, no database. The Overview's banner and ``status`` call :func:`evaluate` with a
:class:`WindowFigures` (and the recent :class:`SeriesPoint` steps, needed for "the gateway queue
has been growing for minutes"); the alert evaluator applies the same rules with their ``for``
timers. Missing figures (``None``) never break a rule on their own; a window without usable data
is the state ``no_data`` with its reason, never "all good".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.alerts.model import CRITICAL, WARNING
from app.alerts.names import no_data_reason, queue_growth, window_names
from app.alerts.rules import DEFAULT_RULES, HOLDS, OP_TEXT, Names, Outcome, Rule, outcome, wording
from app.formatting import compared
from core.durations import format_duration
from core.settings import SweetSpotSettings
from core.text import visible
from db.results import SeriesPoint, WindowFigures
from db.verdicts import IN_SWEET_SPOT, NO_DATA, OUTSIDE, StoredVerdict

if TYPE_CHECKING:
    from app.sweet_spot import SweetSpot

__all__ = ["evaluate", "broken_since", "last_up", "no_data_reason", "queue_growth", "Clause", "Verdict"]

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
class Verdict:
    """The state of one target over one window, with every broken clause (worst first)."""

    state: str  # IN_SWEET_SPOT, OUTSIDE or NO_DATA
    target: str
    window_s: float
    clauses: tuple[Clause, ...] = ()
    reason: str = ""  # why there is no data (state NO_DATA only)

    @property
    def severity(self) -> str | None:
        """CRITICAL or WARNING for OUTSIDE; CRITICAL for NO_DATA (blind is worse than slow); None when fine."""
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
            return f"{target}: in the sweet spot over {window}"
        return f"{target}: outside the sweet spot over {window}: " + "; ".join(c.text for c in self.clauses)


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
    held = [(r, o) for r in alert_rules if r.needs_data and (o := outcome(r, names)).status == HOLDS]
    broken = [_clause(r, o, names) for r, o in _most_severe_per_figure(held)]
    broken.sort(key=lambda c: c.severity != CRITICAL)  # stable: critical first, rule order kept
    state = OUTSIDE if broken else IN_SWEET_SPOT
    return Verdict(state, figures.target, figures.window_s, tuple(broken))


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
