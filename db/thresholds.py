"""The sweet-spot thresholds in effect, stored for the query views (``sweetspot_thresholds``).

The collector writes them when it starts, from the settings, so that ``minutes.in_sweet_spot``
judges each minute by the numbers the banner and the alerts use. Target ``"*"`` holds the global
``[sweetspot]`` table, for targets without a row of their own.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sqlalchemy import Engine, delete
from sqlalchemy.exc import SQLAlchemyError

from db import schema
from db.engine import storage_error

if TYPE_CHECKING:
    from core.settings import SweetSpotSettings

EVERY_TARGET = "*"
FIELDS = ("ttft_p95_slo_s", "concurrency", "kv_warning", "kv_critical", "min_mbu", "queue_growth_s")


def write_thresholds(engine: Engine, pairs: Iterable[tuple[str, SweetSpotSettings]], now: float | None = None) -> int:
    """Replace the stored thresholds with ``(target name, thresholds)`` pairs; returns the rows written."""
    at = int(time.time() if now is None else now)
    rows = [{"target": name, **{f: float(getattr(s, f)) for f in FIELDS}, "updated_at": at} for name, s in pairs]
    try:
        with engine.begin() as conn:
            conn.execute(delete(schema.sweetspot_thresholds))
            if rows:
                conn.execute(schema.sweetspot_thresholds.insert(), rows)
    except SQLAlchemyError as exc:
        raise storage_error("storing the sweet-spot thresholds", exc) from None
    return len(rows)
