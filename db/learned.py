"""The learned sweet spots the alert evaluator stores (``learned_sweet_spots``, docs/query.md).

The evaluator learns each target's sweet spot every 10 minutes (app/sweet_spot.py) and stores what
the learner found, with the configuration epoch and models it was learned under; status, the pages,
the digest and the e-mails read the latest row back, so they show the same number, and the
``learned_history`` view shows how it moved.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, select

from core.learner import Learned, Level
from db import schema


def write(conn: Connection, target: str, at: int, learned: Learned, slo_s: float) -> None:
    """Store ``learned`` for ``target`` as learned at ``at`` (a second write of the same second replaces it)."""
    t = schema.learned_sweet_spots
    epoch = _epoch(conn, target, at)
    row: dict[str, Any] = {
        "target": target, "learned_at": int(at), "knee": learned.knee, "plateau": learned.plateau,
        "minutes": float(learned.minutes), "levels": len(learned.levels), "reason": learned.reason,
        "more_hours": learned.more_hours, "ttft_slo_s": float(slo_s),
        "curve": json.dumps([[lv.concurrency, lv.tokens_per_s, lv.fitted, lv.minutes, lv.ttft_p95_s] for lv in learned.levels]),
        "config_epoch": None if epoch is None else epoch[0], "models": None if epoch is None else epoch[1],
    }  # fmt: skip
    conn.execute(t.delete().where(t.c.target == target, t.c.learned_at == int(at)))
    conn.execute(t.insert().values(**row))


def latest(conn: Connection, target: str, at: float) -> tuple[int, float, Learned] | None:
    """``target``'s latest stored learned result at or before ``at``: (learned_at, its SLO, what it found)."""
    t = schema.learned_sweet_spots
    row = conn.execute(select(t).where(t.c.target == target, t.c.learned_at <= int(at))
                       .order_by(t.c.learned_at.desc()).limit(1)).first()  # fmt: skip
    if row is None:
        return None
    levels = tuple(Level(int(c), float(m), float(f), float(n), q) for c, m, f, n, q in json.loads(row.curve))
    return row.learned_at, row.ttft_slo_s, Learned(row.knee, levels, row.minutes, row.plateau, row.reason, row.more_hours)


def _epoch(conn: Connection, target: str, at: int) -> tuple[int, str | None] | None:
    e, tg = schema.config_epochs, schema.targets
    row = conn.execute(select(e.c.ts, e.c.config).join(tg, tg.c.id == e.c.target_id)
                       .where(tg.c.name == target, e.c.ts <= at).order_by(e.c.ts.desc()).limit(1)).first()  # fmt: skip
    if row is None:
        return None
    return int(row.ts), json.loads(row.config).get("models")
