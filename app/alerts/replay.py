"""Every minute judged: the verdicts of history written after the fact (``backfill``, the demo's
simulated week), replayed once by the evaluator's rules through the backtest's conversion.

Live, the evaluator stores each minute's verdict as it evaluates (app/alerts/evaluator.py). History
written at once never met it: :func:`judge_history` gives each of its minutes the verdict the same
rules give the minute's figures (a series step of one minute read as the window it covers,
``step_window``, as ``alerts backtest`` replays a rule, with the target's resolved sweet spot and own
curve as the backtest resolves them: ``concurrency`` and ``under_delivering`` judged alike), with the
thresholds it judged by. A minute
that already has a verdict keeps it (the live evaluator's is the truth), so a second replay writes
nothing: it is idempotent. Minutes not yet over are never judged.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Engine

from app.alerts.backtest import QUEUE_LOOKBACK
from app.alerts.names import step_window, window_names
from app.alerts.rules import HOLDS, Names, outcome, rule_set
from app.sweet_spot import SweetSpot, resolve
from app.verdict import judgement
from core.settings import Settings, effective_sweetspot
from db import verdicts
from db.queries import Reader
from db.results import SeriesPoint
from db.thresholds import thresholds_of

MINUTE_S = verdicts.MINUTE_S


def judge_history(engine: Engine, settings: Settings, target: str, start: float, end: float) -> int:
    """Store a verdict for each whole minute of [start, end) that has none; returns how many were written."""
    lo, hi = -(-int(start) // MINUTE_S) * MINUTE_S, int(end) // MINUTE_S * MINUTE_S
    if lo >= hi:
        return 0
    reader = Reader(engine=engine)
    with engine.connect() as conn:
        have = {v.ts for v in verdicts.read(conn, target, lo, hi)}
    points = reader.series(target, lo, hi, float(MINUTE_S))
    info = next((t for t in reader.targets() if t.name == target), None)
    ceiling = info.ceiling.steps_per_s if info and info.ceiling else None
    judged = minute_verdicts(settings, target, points, ceiling, have, resolve(reader, settings, target, hi))
    with engine.begin() as conn:
        verdicts.write(conn, judged)
    return len(judged)


def minute_verdicts(settings: Settings, target: str, points: Sequence[SeriesPoint], ceiling: float | None,
                    skip: set[int], spot: SweetSpot | None = None) -> list[verdicts.StoredVerdict]:  # fmt: skip
    """Each minute's verdict (the steps are minutes), as the evaluator derives it from its rules'
    outcomes (app/verdict.py ``judgement``): no data, outside (the rules that held, with their values),
    cannot tell (what could not be judged) or in the sweet spot; ``spot`` the target's own sweet
    spot and curve, as the evaluator judges by them (None: the settings' alone)."""
    sweetspot = effective_sweetspot(settings, target)
    rules = rule_set(settings, target)
    thresholds = thresholds_of(sweetspot)
    out = []
    for i, p in enumerate(points):
        ts = int(p.ts)
        if ts in skip:
            continue
        window = step_window(p, target, float(MINUTE_S), ceiling)
        names = Names(window_names(window, sweetspot, points[max(0, i - QUEUE_LOOKBACK): i + 1], spot), float(MINUTE_S))
        outcomes = {rule.name: outcome(rule, names) for rule in rules}
        held = {name: o.value for name, o in outcomes.items() if o.status == HOLDS}
        state, unjudged = judgement(rules, outcomes, names)  # the evaluator's one aggregation
        out.append(verdicts.StoredVerdict(target, ts, state, ts + MINUTE_S, held, thresholds, {u.rule: u.reason for u in unjudged}))
    return out
