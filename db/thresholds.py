"""The sweet-spot thresholds in effect, stored for the query views (``sweetspot_thresholds``).

The collector writes them when it starts, from the settings, so that the ``target_info`` view shows
the numbers the banner and the alerts judge by (the minutes' verdicts themselves are the alert
evaluator's, db/verdicts.py). Target ``"*"`` holds the global ``[sweetspot]`` table, for targets
without a row of their own.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, delete, select
from sqlalchemy.exc import SQLAlchemyError

from db import schema
from db.errors import storage_error

if TYPE_CHECKING:
    from core.settings import SweetSpotSettings

EVERY_TARGET = "*"
FIELDS = ("ttft_p95_slo_s", "concurrency", "kv_warning", "kv_critical", "min_mbu", "queue_growth_s")


def thresholds_of(sweetspot: SweetSpotSettings) -> dict[str, float | None]:
    """The thresholds a verdict was judged by, as stored with it (db/verdicts.py); a sweet spot not
    configured is None (the evaluator's own one, from a sweep or the traffic, is resolved per minute)."""
    return {f: _number(getattr(sweetspot, f)) for f in FIELDS}


def write_thresholds(engine: Engine, pairs: Iterable[tuple[str, SweetSpotSettings]], now: float | None = None) -> int:
    """Replace the stored thresholds with ``(target name, thresholds)`` pairs; returns the rows written."""
    at = int(time.time() if now is None else now)
    rows = [{"target": name, **{f: _number(getattr(s, f)) for f in FIELDS}, "updated_at": at} for name, s in pairs]
    try:
        with engine.begin() as conn:
            conn.execute(delete(schema.sweetspot_thresholds))
            if rows:
                conn.execute(schema.sweetspot_thresholds.insert(), rows)
    except SQLAlchemyError as exc:
        raise storage_error("storing the sweet-spot thresholds", exc) from None
    return len(rows)


def _number(value: float | None) -> float | None:
    return None if value is None else float(value)  # a sweet spot not configured is NULL


def stored_ttft_slo(conn: Connection, target_ids: Iterable[int]) -> dict[int, float]:
    """Each target's stored TTFT SLO (its own row, else the global "*" one), by target id; a target
    with neither is left out."""
    th, t = schema.sweetspot_thresholds, schema.targets
    slo = dict(conn.execute(select(th.c.target, th.c.ttft_p95_slo_s)).all())
    names = conn.execute(select(t.c.id, t.c.name).where(t.c.id.in_(list(target_ids)))).all()
    out = {int(tid): slo.get(name, slo.get(EVERY_TARGET)) for tid, name in names}
    return {tid: float(v) for tid, v in out.items() if v is not None}
