"""What the Prometheus source and its backfill keep besides rounds: which targets it found, how far
a backfill got. Written by the collector process (under its write lock) or by ``backfill``."""

from __future__ import annotations

import time
from collections.abc import Sequence

from sqlalchemy import Engine, func, select, update
from sqlalchemy.exc import SQLAlchemyError

from db import schema
from db.errors import storage_error


def mark_discovered(engine: Engine, names: Sequence[str], source: str) -> None:
    """Record that ``source`` (a Prometheus URL) found these targets (registered already)."""
    t = schema.targets
    try:
        with engine.begin() as conn:
            conn.execute(update(t).where(t.c.name.in_(list(names))).values(discovered_by=source))
    except SQLAlchemyError as exc:
        raise storage_error("marking discovered targets", exc) from None


def discovered_names(engine: Engine) -> list[str]:
    """Every target a Prometheus source found (configured targets are not listed)."""
    t = schema.targets
    try:
        with engine.connect() as conn:
            return list(conn.execute(select(t.c.name).where(t.c.discovered_by.is_not(None)).order_by(t.c.name)).scalars())
    except SQLAlchemyError as exc:
        raise storage_error("reading the discovered targets", exc) from None


def configured_names(engine: Engine) -> set[str]:
    """The targets registered from the settings (no Prometheus source found them): a source's target
    with one of these names is refused, never mixed into it."""
    t = schema.targets
    try:
        with engine.connect() as conn:
            return set(conn.execute(select(t.c.name).where(t.c.discovered_by.is_(None))).scalars())
    except SQLAlchemyError as exc:
        raise storage_error("reading the configured targets", exc) from None


def discovered_last_rounds(engine: Engine, source: str) -> dict[str, tuple[int, bool]]:
    """The targets ``source`` found in earlier runs → (time of their last stored round, whether it was up).

    Targets it found but that have no round yet are left out.
    """
    t, s = schema.targets, schema.scrapes
    last = (select(s.c.target_id, func.max(s.c.ts).label("ts")).group_by(s.c.target_id)).subquery()
    query = (select(t.c.name, last.c.ts, s.c.up).join(last, last.c.target_id == t.c.id)
             .join(s, (s.c.target_id == t.c.id) & (s.c.ts == last.c.ts)).where(t.c.discovered_by == source))
    try:
        with engine.connect() as conn:
            return {name: (int(ts), bool(up)) for name, ts, up in conn.execute(query)}
    except SQLAlchemyError as exc:
        raise storage_error("reading the discovered targets", exc) from None


def backfill_done_until(engine: Engine, source: str) -> int | None:
    """The instant before which a previous backfill of ``source`` imported every step (None: never ran)."""
    p = schema.backfill_progress
    try:
        with engine.connect() as conn:
            value = conn.execute(select(p.c.done_until).where(p.c.source == source)).scalar()
    except SQLAlchemyError as exc:
        raise storage_error("reading the backfill progress", exc) from None
    return None if value is None else int(value)


def save_backfill_progress(engine: Engine, source: str, done_until: int) -> None:
    """Record that every step of ``source`` before ``done_until`` is stored (after its rounds committed)."""
    p = schema.backfill_progress
    now = int(time.time())
    try:
        with engine.begin() as conn:
            changed = conn.execute(update(p).where(p.c.source == source).values(done_until=done_until, updated_at=now))
            if changed.rowcount == 0:
                conn.execute(p.insert().values(source=source, done_until=done_until, updated_at=now))
    except SQLAlchemyError as exc:
        raise storage_error("saving the backfill progress", exc) from None
