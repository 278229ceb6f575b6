"""Reads across every target at once: the latest round (health), and the Fleet table's figures.

Part of the query facade (pages and commands call these through :class:`db.queries.Reader`'s
engine); read-only.
"""

from __future__ import annotations

from sqlalchemy import Engine, func, select
from sqlalchemy.exc import SQLAlchemyError

from db import schema
from db.engine import storage_error


def last_round_at(engine: Engine) -> float | None:
    """Unix seconds of the newest round stored for any target (None when nothing is stored)."""
    try:
        with engine.connect() as conn:
            value = conn.execute(select(func.max(schema.scrapes.c.ts))).scalar()
    except SQLAlchemyError as exc:
        raise storage_error("reading the latest round", exc) from None
    return None if value is None else float(value)
