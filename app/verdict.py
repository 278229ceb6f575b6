"""Is a target in its sweet spot? The rules of DOMAIN.md §3 over one window of figures.

Pure: no Streamlit, no database. The dashboard banner and the alerting job both call
:func:`evaluate` with a :class:`WindowFigures` (and the recent :class:`SeriesPoint` steps, needed
for "the gateway queue has been growing for minutes"). Missing figures (``None``) never break a
rule on their own; a window without usable data is the state ``no_data`` with its reason, never
"all good".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.formatting import clock, number, with_unit
from core.durations import format_duration
from core.settings import SweetSpotSettings
from db.results import SeriesPoint, WindowFigures

IN_SWEET_SPOT = "in_sweet_spot"
OUTSIDE = "outside"
NO_DATA = "no_data"

WARNING = "warning"
CRITICAL = "critical"


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

    @property
    def text(self) -> str:
        """``TTFT P95 over 5m 4.8 s > 3 s``."""
        main = f"{self.label} {with_unit(self.value, self.unit)} {self.op} {with_unit(self.threshold, self.unit)}"
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
        window = format_duration(self.window_s)
        if self.state == NO_DATA:
            return f"{self.target}: no data over {window}: {self.reason}"
        if self.state == IN_SWEET_SPOT:
            return f"{self.target}: in the sweet spot over {window}"
        return f"{self.target}: outside the sweet spot over {window}: " + "; ".join(c.text for c in self.clauses)


Rule = Callable[[WindowFigures, SweetSpotSettings, Sequence[SeriesPoint]], "Clause | None"]


def evaluate(figures: WindowFigures, rules: SweetSpotSettings, recent: Sequence[SeriesPoint] = ()) -> Verdict:
    """Apply every rule of DOMAIN.md §3; ``recent`` are the latest series steps (oldest first)."""
    reason = no_data_reason(figures)
    if reason:
        return Verdict(NO_DATA, figures.target, figures.window_s, reason=reason)
    broken = [c for rule in RULES if (c := rule(figures, rules, recent)) is not None]
    broken.sort(key=lambda c: c.severity != CRITICAL)  # stable: critical first, rule order kept
    state = OUTSIDE if broken else IN_SWEET_SPOT
    return Verdict(state, figures.target, figures.window_s, tuple(broken))


def no_data_reason(f: WindowFigures) -> str:
    """Why the window cannot be judged, or "" when it can."""
    if f.up is None and f.last_scrape_at is None:
        return "the target has never been scraped (is the collector running? python -m app run)"
    if f.up is False:
        error = f" ({f.last_error})" if f.last_error else ""
        return f"the target is down: the last scrape failed{error}"
    if f.scrapes == 0:
        return f"no scrape in the window (last scrape at {clock(f.last_scrape_at)}); is the collector running?"
    if f.failed_scrapes >= f.scrapes:
        return f"every scrape in the window failed ({f.last_error or 'no error recorded'})"
    if f.tokens_per_s is None and f.running_max is None:
        return "scrapes succeed but expose no vLLM figures (see the Targets page for missing metrics)"
    return ""


def _window(f: WindowFigures) -> str:
    return format_duration(f.window_s)


def ttft_rule(f: WindowFigures, s: SweetSpotSettings, _: Sequence[SeriesPoint]) -> Clause | None:
    if f.ttft_p95_s is None or f.ttft_p95_s <= s.ttft_p95_slo_s:
        return None
    # A P95 in the +Inf bucket is only a lower bound: say so rather than print a false precision.
    detail = "at least: P95 beyond the largest finite bucket" if f.ttft_p95_in_inf_bucket else ""
    return Clause("ttft_p95", f"TTFT P95 over {_window(f)}", f.ttft_p95_s, s.ttft_p95_slo_s, "s", ">", CRITICAL, detail)


def preemption_rule(f: WindowFigures, s: SweetSpotSettings, _: Sequence[SeriesPoint]) -> Clause | None:
    # Any preemption counts: it is work destroyed (KV cache exhausted), not merely delayed.
    if not f.preemptions or f.preemptions <= 0:
        return None
    return Clause("preemptions", f"preemptions over {_window(f)}", f.preemptions, 0, "", ">", CRITICAL)


def concurrency_rule(f: WindowFigures, s: SweetSpotSettings, _: Sequence[SeriesPoint]) -> Clause | None:
    # The average, not the max: one scrape at 17 is a blip, a window averaging 24 is an operating point.
    running = f.running_avg if f.running_avg is not None else f.running_max
    if running is None or running <= s.concurrency:
        return None
    label = f"running requests (avg over {_window(f)})"
    return Clause("concurrency", label, running, s.concurrency, "requests", ">", WARNING, "sweet-spot concurrency")


def kv_rule(f: WindowFigures, s: SweetSpotSettings, _: Sequence[SeriesPoint]) -> Clause | None:
    usage = f.kv_cache_usage_max
    if usage is None or usage < s.kv_warning:
        return None
    critical = usage >= s.kv_critical
    threshold = s.kv_critical if critical else s.kv_warning
    detail = "preemption imminent" if critical else ""
    return Clause(
        "kv_cache", f"KV-cache usage (max over {_window(f)})", usage * 100, threshold * 100, "%", "≥",
        CRITICAL if critical else WARNING, detail,
    )  # fmt: skip


def queue_growth_rule(f: WindowFigures, s: SweetSpotSettings, recent: Sequence[SeriesPoint]) -> Clause | None:
    growth = queue_growth(recent, f.end, s.queue_growth_s)
    if growth is None:
        return None
    first, last = growth
    span = format_duration(s.queue_growth_s)
    detail = f"{span} ago; demand exceeds the sweet-spot capacity"
    return Clause("queue_growing", f"gateway queue growing for {span}", last, first, "requests", ">", WARNING, detail)


def queue_growth(recent: Sequence[SeriesPoint], end: float, growth_s: float) -> tuple[float, float] | None:
    """``(first, last)`` depth when the gateway queue grew over the last ``growth_s`` seconds, else None.

    "Growing" means: the steps cover the whole span, the queue never drained (stayed > 0), and it
    ended higher than it started with a positive least-squares slope, so one dip does not reset it.
    """
    points = [(p.ts, p.queue_depth_max) for p in recent if p.ts >= end - growth_s - 1e-9]
    values = [(ts, q) for ts, q in points if q is not None]
    if len(values) < 3 or len(values) < len(points) or not _covers(values, end, growth_s):
        return None
    if min(q for _, q in values) <= 0 or values[-1][1] <= values[0][1] or _slope(values) <= 0:
        return None
    return values[0][1], values[-1][1]


def _covers(values: Sequence[tuple[float, float]], end: float, growth_s: float) -> bool:
    step = (values[-1][0] - values[0][0]) / (len(values) - 1)
    return values[0][0] <= end - growth_s + step and values[-1][0] >= end - 2 * step


def _slope(values: Sequence[tuple[float, float]]) -> float:
    n = len(values)
    mean_t = sum(t for t, _ in values) / n
    mean_q = sum(q for _, q in values) / n
    return sum((t - mean_t) * (q - mean_q) for t, q in values)


def _queued(f: WindowFigures) -> float:
    return max(f.waiting_max or 0.0, f.queue_depth_max or 0.0)


def not_serving_rule(f: WindowFigures, s: SweetSpotSettings, _: Sequence[SeriesPoint]) -> Clause | None:
    if not _not_serving(f):
        return None
    return Clause(
        "not_serving", f"up but not serving over {_window(f)}: queued requests", _queued(f), 0, "requests", ">",
        CRITICAL, "nothing running, 0 tok/s",
    )  # fmt: skip


def _not_serving(f: WindowFigures) -> bool:
    return _queued(f) > 0 and f.running_max == 0 and f.tokens_per_s == 0


def efficiency_rule(f: WindowFigures, s: SweetSpotSettings, _: Sequence[SeriesPoint]) -> Clause | None:
    # Low tok/s is only a problem while work waits; an idle service is rightly slow.
    if f.tokens_per_s is None or not f.ceiling_tokens_per_s or _queued(f) <= 0 or _not_serving(f):
        return None
    floor = s.min_efficiency * f.ceiling_tokens_per_s
    if f.tokens_per_s >= floor:
        return None
    detail = (
        f"{number(s.min_efficiency * 100)} % of the {number(f.ceiling_tokens_per_s)} tok/s ceiling, "
        f"while {number(_queued(f))} requests wait"
    )
    return Clause("efficiency", f"output tok/s over {_window(f)}", f.tokens_per_s, floor, "tok/s", "<", WARNING, detail)


RULES: tuple[Rule, ...] = (
    not_serving_rule,
    ttft_rule,
    preemption_rule,
    kv_rule,
    concurrency_rule,
    queue_growth_rule,
    efficiency_rule,
)


# --- since when --------------------------------------------------------------------------------------
# Each clause's rule applied to one series step; None when the step lacks the figure.
StepRule = Callable[[SeriesPoint, SweetSpotSettings, float | None], "bool | None"]


def _step_queued(p: SeriesPoint) -> float:
    return max(p.waiting_max or 0.0, p.queue_depth_max or 0.0)


def _gt(value: float | None, limit: float) -> bool | None:
    return None if value is None else value > limit


def _under_delivering(p: SeriesPoint, s: SweetSpotSettings, ceiling: float | None) -> bool | None:
    if p.tokens_per_s is None or not ceiling:
        return None
    return _step_queued(p) > 0 and p.tokens_per_s < s.min_efficiency * ceiling


STEP_RULES: dict[str, StepRule] = {
    "ttft_p95": lambda p, s, _: _gt(p.ttft_p95_s, s.ttft_p95_slo_s),
    "preemptions": lambda p, s, _: _gt(p.preemptions, 0),
    "concurrency": lambda p, s, _: _gt(p.running_avg, s.concurrency),
    "kv_cache": lambda p, s, _: None if p.kv_cache_usage_max is None else p.kv_cache_usage_max >= s.kv_warning,
    "not_serving": lambda p, s, _: None if p.tokens_per_s is None else (_step_queued(p) > 0 and p.tokens_per_s == 0),
    "efficiency": _under_delivering,
}


def broken_since(
    name: str, points: Sequence[SeriesPoint], rules: SweetSpotSettings, window_s: float, ceiling: float | None = None
) -> float | None:
    """Start (unix s) of the current spell in which clause ``name`` kept breaking, from series steps.

    A spell tolerates healthy steps shorter than ``window_s`` (preemptions come in bursts, TTFT
    wobbles); it ends at the first healthy stretch of a whole window. None when the steps do not
    show the clause broken in the last window (or the clause has no per-step form).
    """
    rule = STEP_RULES.get(name)
    if rule is None or not points:
        return None
    since: float | None = None
    newest = points[-1].ts
    for p in reversed(points):
        broken = rule(p, rules, ceiling)
        if broken:
            since = p.ts
        elif broken is False and (since if since is not None else newest) - p.ts >= window_s:
            break
    return since


def last_up(points: Sequence[SeriesPoint]) -> float | None:
    """End of the last step with a successful scrape: where a "no data" spell began."""
    for i in range(len(points) - 1, -1, -1):
        if points[i].up_ratio:
            step = points[i + 1].ts - points[i].ts if i + 1 < len(points) else 0.0
            return points[i].ts + step
    return None
