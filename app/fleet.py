"""The fleet at a glance: every target's state and figures, worst first (Fleet page, ``status --all``).

Pure over the query facade: :func:`fleet` asks the reader (``db.queries.Reader`` or a stand-in) for
each target's window figures and its last hour, and judges each with :func:`target_state`, the one
place that decides a target's state here (today ``app.verdict.evaluate``; the alert rule set can
take its place without touching the callers).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from app.alerts.names import NOT_CONFIGURED
from app.alerts.rules import DEFAULT_RULES, Rule, rule_set
from app.formatting import MISSING
from app.headroom import Headroom, headroom_of
from app.sweet_spot import SweetSpot, resolve
from app.verdict import CANNOT_TELL, CRITICAL, IN_SWEET_SPOT, NO_DATA, OUTSIDE, Unjudged, evaluate, no_data_reason
from collectors.prometheus import COLON_FORM, UNDERSCORE_FORM
from core.settings import Settings, SweetSpotSettings, effective_sweetspot
from core.text import terminal, visible
from db.results import SeriesPoint, TargetInfo, WindowFigures

DOWN = "down"
RETIRED = "retired"  # not configured any more: listed for retired_shown_s, never "down"
# worst first: a target we cannot see, one that breaks a rule, one without data, one we cannot judge, a good one
STATE_ORDER = {DOWN: 0, OUTSIDE: 1, NO_DATA: 2, CANNOT_TELL: 3, IN_SWEET_SPOT: 4, RETIRED: 5}
STATE_LABELS = {DOWN: "down", OUTSIDE: "outside", NO_DATA: "no data", CANNOT_TELL: "cannot tell", IN_SWEET_SPOT: "in the sweet spot",
                RETIRED: NOT_CONFIGURED}  # fmt: skip
SPARK_S = 3600.0  # the sparkline's span: the last hour
SPARK_STEP_S = 60.0
# the fields one series call brings: the sparkline and what the queue-growth rule needs
SERIES_FIELDS = ("tokens_per_s", "queue_depth_max")
# Landing page: the Fleet when there are more targets than this, else the Overview.
LANDING_TARGETS = 3


@dataclass(frozen=True)
class TargetState:
    """A target's state with the reasons behind it (broken clauses, why no data, the error)."""

    state: str  # DOWN, OUTSIDE, NO_DATA, CANNOT_TELL or IN_SWEET_SPOT
    reasons: tuple[str, ...]
    critical: bool = False
    unjudged: tuple[Unjudged, ...] = ()  # the default rules it could not judge (CANNOT_TELL: its reasons too)


@dataclass(frozen=True)
class FleetRow:
    """One target of the fleet: its state, its window figures, tok/s per minute over the last hour."""

    name: str
    models: tuple[str, ...]
    discovered_by: str | None
    state: TargetState
    figures: WindowFigures
    sparkline: tuple[float | None, ...]
    spot: SweetSpot | None = None  # its own sweet spot with its source (None: not resolved, no settings)
    headroom: Headroom | None = None  # its peak-hour demand's forecast (app/headroom.py; None: not asked, unreadable)


@dataclass(frozen=True)
class ModelAggregate:
    """One model across the targets that serve it (tok/s and preemptions summed, TTFT P95 the worst)."""

    model: str
    targets: int
    outside: int  # targets outside the sweet spot or down
    tokens_per_s: float | None
    mbu_lowest: float | None  # the lowest MBU among the targets (0–1; each target's best source)
    ttft_p95_s_worst: float | None  # the clients' TTFT P95 (what the verdict judges), the worst target's
    preemptions: float | None
    running: float | None


def target_state(
    figures: WindowFigures, sweetspot: SweetSpotSettings, recent: Sequence[SeriesPoint] = (),
    rule_defs: Sequence[Rule] | None = None, spot: SweetSpot | None = None,
) -> TargetState:  # fmt: skip
    """The state of one target over the window (the Fleet's and ``status --all``'s one judge):
    ``rule_defs`` the target's rule set (app.alerts.rules.rule_set; None: the default rules)."""
    if figures.retired_at is not None:
        return TargetState(RETIRED, (no_data_reason(figures),))
    if figures.up is False:
        why = no_data_reason(figures) if figures.stale_s is not None else figures.last_error or "the last scrape failed"
        return TargetState(DOWN, (why,), critical=True)
    verdict = evaluate(figures, sweetspot, recent, DEFAULT_RULES if rule_defs is None else rule_defs, spot)
    if verdict.state == NO_DATA:
        return TargetState(NO_DATA, (verdict.reason,), critical=True)
    if verdict.state == CANNOT_TELL:
        return TargetState(CANNOT_TELL, tuple(u.text for u in verdict.unjudged), unjudged=verdict.unjudged)
    return TargetState(verdict.state, tuple(c.text for c in verdict.clauses), verdict.severity == CRITICAL, verdict.unjudged)


def fleet(
    reader: Any, sweetspot: SweetSpotSettings, now: float, window_s: float, settings: Settings | None = None,
    *, headroom: bool = False,
) -> list[FleetRow]:
    """Every stored target, worst first (state, then critical before warning, then lowest MBU).

    With ``settings``, each target is judged as the banner, ``status`` and the alert evaluator judge
    it: its effective thresholds (``targets[].sweetspot``) and rule set (``[[alerts.rules]]``).
    ``headroom``: each row with its headroom forecast too (the Fleet page; a fit per target and day).
    """
    end = math.floor(now / SPARK_STEP_S) * SPARK_STEP_S  # whole minutes, as the Overview's charts
    figures = reader.fleet(now, window_s, (end - SPARK_S, end, SPARK_STEP_S), SERIES_FIELDS)
    rows = []
    shown_s = math.inf if settings is None else settings.retired_shown_s
    for name, f in figures.items():
        if f.window.retired_at is not None and now - f.window.retired_at >= shown_s:
            continue  # not configured any more for long enough: out of the list (its history is kept)
        own = sweetspot if settings is None else effective_sweetspot(settings, name)
        defs = None if settings is None else rule_set(settings, name)
        spot = None if settings is None else resolve(reader, settings, name, now)
        state = target_state(f.window, own, _recent(f.series, now - own.queue_growth_s - SPARK_STEP_S), defs, spot)
        room = _headroom(reader, name, now, spot) if headroom and spot is not None else None
        rows.append(FleetRow(name, f.models, f.discovered_by, state, f.window, tuple(f.series["tokens_per_s"]), spot, room))
    return sorted(rows, key=_worst_first)


def _headroom(reader: Any, name: str, now: float, spot: SweetSpot) -> Headroom | None:
    try:
        return headroom_of(reader, name, now, None if spot.value is None else float(spot.value), spot.source or "")
    except Exception:  # noqa: BLE001 - an unreadable history costs this target's forecast, not the Fleet
        return None


def _recent(columns: dict[str, list[Any]], since: float) -> list[SeriesPoint]:
    """The steps from ``since`` on as SeriesPoints (the queue-growth rule reads a few of them)."""
    names = list(columns)
    return [SeriesPoint(**dict(zip(names, values, strict=True)))
            for values in zip(*columns.values(), strict=True) if values[0] >= since]  # fmt: skip


def _worst_first(row: FleetRow) -> tuple[int, bool, float, str]:
    mbu = row.figures.mbu
    return (STATE_ORDER[row.state.state], not row.state.critical, mbu if mbu is not None else math.inf, row.name)


def by_model(rows: Iterable[FleetRow]) -> list[ModelAggregate]:
    """Aggregates per model name across targets (a target serving several models counts for each,
    with its whole figures: the facade's per-target window sums its models)."""
    groups: dict[str, list[FleetRow]] = {}
    for row in rows:
        for model in row.models or ("",):
            groups.setdefault(model, []).append(row)
    return [_aggregate(model, members) for model, members in sorted(groups.items())]


def _aggregate(model: str, rows: list[FleetRow]) -> ModelAggregate:
    figs = [r.figures for r in rows]
    return ModelAggregate(
        model=model or "(no model name)",
        targets=len(rows),
        outside=sum(r.state.state in (OUTSIDE, DOWN) for r in rows),
        tokens_per_s=_sum(f.tokens_per_s for f in figs),
        mbu_lowest=min((f.mbu for f in figs if f.mbu is not None), default=None),
        ttft_p95_s_worst=max((f.client_ttft_p95_s for f in figs if f.client_ttft_p95_s is not None), default=None),
        preemptions=_sum(f.preemptions for f in figs),
        running=_sum(f.running_avg for f in figs),
    )


def _sum(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None and math.isfinite(v)]
    return sum(known) if known else None


def overview_link(target: str, targets: int) -> str:
    """The relative URL of ``target``'s Overview: the root while the Overview is the landing page."""
    page = "./" if targets <= LANDING_TARGETS else "./overview"
    return f"{page}?target={quote(target, safe='')}"


def names_form(info: TargetInfo) -> str | None:
    """Which form of the vLLM names the target's last page had: ``vllm:x`` or ``vllm_x`` (None: no page yet)."""
    names = list(info.metric_names_used.values())
    if not names:
        return None
    return UNDERSCORE_FORM if any(n.startswith("vllm_") for n in names) else COLON_FORM


# -- the terminal table (status --all) -----------------------------------------------------------------
def _cell(value: float | None, scale: float = 1.0, digits: int = 1, unit: str = "") -> str:
    if value is None or not math.isfinite(value):
        return MISSING  # as every page and e-mail spells a missing figure
    return f"{value * scale:.{digits}f}{unit}"


def table(rows: Sequence[FleetRow]) -> str:
    """One line per target, worst first, then one per model (what the Fleet page shows)."""
    head = f"{'target':28} {'state':18} {'tok/s':>7} {'MBU':>5} {'DRAM':>5} {'TTFT P95':>8} {'preempt':>7} {'running':>7} {'queue':>5} {'KV':>5}  reasons"
    lines = [head]
    for r in rows:
        f = r.figures
        lines.append(
            f"{visible(r.name, 28):28} {STATE_LABELS[r.state.state]:18} {_cell(f.tokens_per_s):>7} {_cell(f.mbu, 100, 0, '%'):>5} "
            f"{_cell(f.dram_bw_util, 100, 0, '%'):>5} {_cell(f.client_ttft_p95_s, digits=2, unit=' s'):>8} {_cell(f.preemptions, digits=0):>7} {_cell(f.running_avg):>7} "
            f"{_cell(f.queue_depth_max, digits=0):>5} {_cell(f.kv_cache_usage_max, 100, 0, '%'):>5}  {'; '.join(r.state.reasons)}"
        )
    models = by_model(rows)
    if models:
        lines.append("")
        lines.append(f"{'model':28} {'targets':>7} {'outside':>7} {'tok/s':>8} {'low MBU':>8} {'worst TTFT P95':>14} {'preempt':>7}")
        for m in models:
            lines.append(f"{visible(m.model, 28):28} {m.targets:>7} {m.outside:>7} {_cell(m.tokens_per_s):>8} "
                         f"{_cell(m.mbu_lowest, 100, 0, '%'):>8} {_cell(m.ttft_p95_s_worst, digits=2, unit=' s'):>14} "
                         f"{_cell(m.preemptions, digits=0):>7}")  # fmt: skip
    return terminal("\n".join(lines))
