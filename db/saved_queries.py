"""Queries users saved by name (``saved_queries``), from the Query page or ``query --save``.

Reading goes through a read-only engine; saving is the one write the query feature makes, through
a short-lived writer engine (no migration run: the table exists from ``0008_query_views``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.exc import SQLAlchemyError

from core.errors import QueryError
from core.text import name_problem, same_name_problem
from db import query_guard, schema
from db.engine import normalize_url, open_engine, open_reader
from db.errors import storage_error

_T = schema.saved_queries
MAX_NAME = 100  # characters of a saved query's name


@dataclass(frozen=True)
class SavedQuery:
    name: str
    sql: str
    description: str
    saved_at: int


def list_saved(db_url: str) -> list[SavedQuery]:
    """Every saved query by name (empty when the database predates them)."""
    engine = open_reader(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(_T).order_by(_T.c.name)).all()
    except SQLAlchemyError as exc:
        if "no such table" in str(exc) or "does not exist" in str(exc):
            return []
        raise storage_error("reading saved queries", exc) from None
    finally:
        engine.dispose()
    return [SavedQuery(r.name, r.sql, r.description, int(r.saved_at)) for r in rows]


def save(db_url: str, name: str, sql: str, description: str = "", now: float | None = None) -> None:
    """Store (or replace) ``name``; the SQL must pass the query guard, so nothing refused is kept."""
    name = name.strip()
    if not name or len(name) > MAX_NAME:
        raise QueryError(f"a saved query needs a name of 1 to {MAX_NAME} characters", "Type a name", "saved-query")
    problem = name_problem(name, MAX_NAME) or same_name_problem(name, [q.name for q in list_saved(db_url)], "saved query")
    if problem:  # the one name type (core/text.py): one name, one query, however it is spelt
        raise QueryError(f"cannot save the query: {problem}", "Type another name (or the same one to replace it)", "saved-query")
    query_guard.check(sql, normalize_url(db_url).get_backend_name())
    engine = open_engine(db_url, migrate=False)
    row = {"name": name, "sql": sql.strip(), "description": description, "saved_at": int(time.time() if now is None else now)}
    try:
        with engine.begin() as conn:
            conn.execute(delete(_T).where(_T.c.name == name))
            conn.execute(_T.insert().values(**row))
    except SQLAlchemyError as exc:
        raise storage_error("saving a query", exc) from None
    finally:
        engine.dispose()
