"""The sweet-spot verdict of each target and minute, as the alert evaluator judged it (``verdicts``).

One judge: the evaluator (app/alerts/evaluator.py) applies each target's effective rules (the
defaults, ``[[alerts.rules]]``, per-target overrides and thresholds) and writes one row per target
per minute, rewritten at each evaluation of that minute (the last one's stays); the query views, the digest and the Overview
read the rows back, and nothing recomputes a verdict from stored figures. A minute without a row
was not judged (no evaluator ran then, or it is older than the table): readers say
:data:`NOT_STORED`, never guess.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.dialects import postgresql, sqlite

from db import schema

# A verdict's states (``status`` prints the same words).
IN_SWEET_SPOT = "in_sweet_spot"  # every default rule was judged, and none broke
OUTSIDE = "outside"  # a judged rule broke (whatever the others could not judge)
CANNOT_TELL = "cannot_tell"  # none broke, but a default rule could not be judged (not_judged says why)
NO_DATA = "no_data"  # the window has nothing to judge: the target down, stale, never scraped
STATES = (IN_SWEET_SPOT, OUTSIDE, CANNOT_TELL, NO_DATA)
NOT_STORED = "no verdict stored"
MINUTE_S = 60


@dataclass(frozen=True)
class StoredVerdict:
    """One target's verdict of one minute. ``held``: each rule that held → its value (unscaled; None
    where the rule has no value, e.g. target_down), in rule order."""

    target: str
    ts: int  # the minute's start
    state: str  # IN_SWEET_SPOT, OUTSIDE or NO_DATA
    evaluated_at: int
    held: dict[str, float | None] = field(default_factory=dict)
    # the sweet-spot thresholds it was judged by (ttft_p95_slo_s, concurrency, ...; empty: not stored,
    # a row written before 0023_stale_after): every page shows the judgement with these, not its own
    thresholds: dict[str, float | None] = field(default_factory=dict)
    # each default rule that could not judge the minute → why ("" key: the window's own reason, an
    # outage inside it); empty for a row written before 0051_cannot_tell
    not_judged: dict[str, str] = field(default_factory=dict)


def minute_of(at: float) -> int:
    return int(at) // MINUTE_S * MINUTE_S


def _row(v: StoredVerdict) -> dict[str, Any]:
    return {"target": v.target, "ts": v.ts, "state": v.state, "rules_held": ",".join(v.held),
            "held_values": json.dumps(v.held), "evaluated_at": v.evaluated_at,
            "thresholds": json.dumps(v.thresholds) if v.thresholds else None,
            "not_judged": json.dumps(v.not_judged) if v.not_judged else None}  # fmt: skip


def write(conn: Connection, verdicts: Sequence[StoredVerdict]) -> None:
    """Store ``verdicts`` in the caller's transaction; a (target, minute) already stored is replaced
    (a restart within the minute writes it again, never twice)."""
    if not verdicts:
        return
    t = schema.verdicts
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(t)
    stmt = stmt.on_conflict_do_update(
        index_elements=[t.c.target, t.c.ts],
        set_={c: stmt.excluded[c] for c in ("state", "rules_held", "held_values", "evaluated_at", "thresholds", "not_judged")},
    )
    conn.execute(stmt, [_row(v) for v in verdicts])


def read(conn: Connection, target: str, start: float, end: float) -> list[StoredVerdict]:
    """``target``'s stored verdicts of the minutes starting in [start, end), oldest first."""
    t = schema.verdicts
    stmt = select(t).where(t.c.target == target, t.c.ts >= int(start), t.c.ts < int(end)).order_by(t.c.ts)
    return [StoredVerdict(r.target, r.ts, r.state, r.evaluated_at, json.loads(r.held_values),
                          json.loads(r.thresholds) if r.thresholds else {}, json.loads(r.not_judged) if r.not_judged else {})
            for r in conn.execute(stmt)]  # fmt: skip


def judged_by(conn: Connection, target: str) -> dict[str, float | None]:
    """The thresholds of ``target``'s newest verdict that stored them (empty: none stored yet)."""
    t = schema.verdicts
    stmt = select(t.c.thresholds).where(t.c.target == target, t.c.thresholds.is_not(None)).order_by(t.c.ts.desc()).limit(1)
    stored = conn.execute(stmt).scalar()
    return json.loads(stored) if stored else {}


@dataclass(frozen=True)
class Shares:
    """How a span's minutes were judged, each a share of its minutes (0–1)."""

    minutes: int
    in_sweet_spot: float
    outside: float
    no_data: float
    not_stored: float  # minutes without a stored verdict
    cannot_tell: float = 0.0  # minutes judged, with a default rule that could not be


def shares(verdicts: Sequence[StoredVerdict], start: float, end: float) -> Shares:
    """The shares of the minutes starting in [start, end) in each state (``verdicts`` from :func:`read`)."""
    minutes = len(range(-(-int(start) // MINUTE_S) * MINUTE_S, int(end), MINUTE_S))
    counts = {s: sum(v.state == s for v in verdicts if start <= v.ts < end) for s in STATES}
    if not minutes:
        return Shares(0, 0.0, 0.0, 0.0, 1.0)
    share = {s: n / minutes for s, n in counts.items()}
    not_stored = max(0, minutes - sum(counts.values())) / minutes
    return Shares(minutes, share[IN_SWEET_SPOT], share[OUTSIDE], share[NO_DATA], not_stored, share[CANNOT_TELL])
