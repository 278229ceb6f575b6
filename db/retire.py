"""Dropping a target the collector no longer reads (``python -m app targets drop``): out of every list
with its history kept, or with every row of it deleted. Derived from the schema: every table that
names a target (``target_id``, ``target``, a model's or a GPU's id, a row of a run that names one)
is found from its columns, so a table added later is covered without a line here."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, Connection, Table, delete, select, update

from db import schema


@dataclass(frozen=True)
class Dropped:
    """What :func:`drop` did: ``rows`` deleted per table (empty when the history was kept)."""

    name: str
    kept: bool
    rows: dict[str, int]


def drop(conn: Connection, name: str, at: float, keep_history: bool) -> Dropped:
    """Take target ``name`` out of every list (its rows kept: ``dropped_at``), or delete it and every row
    that belongs to it, in the caller's transaction."""
    t = schema.targets
    target_id = conn.execute(select(t.c.id).where(t.c.name == name)).scalar_one()
    if keep_history:
        conn.execute(update(t).where(t.c.id == target_id).values(dropped_at=int(at)))
        return Dropped(name, True, {})
    rows: dict[str, int] = {}
    for table in reversed(schema.metadata.sorted_tables):  # children before the rows they point at
        if table is t:
            continue
        where = _belongs(table, target_id, name)
        if where is not None:
            if (n := conn.execute(delete(table).where(where)).rowcount):
                rows[table.name] = n
    conn.execute(delete(t).where(t.c.id == target_id))
    rows[t.name] = 1
    return Dropped(name, False, rows)


def _belongs(table: Table, target_id: int, name: str) -> ColumnElement[bool] | None:
    """The condition of ``table``'s rows that belong to the target, or None when none can."""
    c = table.c
    models, gpus = schema.models, schema.gpus
    if "model_id" in c:
        return c.model_id.in_(select(models.c.id).where(models.c.target_id == target_id))
    if "gpu_id" in c:
        return c.gpu_id.in_(select(gpus.c.id).where(gpus.c.target_id == target_id))
    if "target_id" in c:
        return c.target_id == target_id
    if "target" in c:
        return c.target == name
    for column in c:  # a run's rows (sweep levels, bench points): through the run that names the target
        for fk in column.foreign_keys:
            parent = fk.column.table
            if "target" in parent.c:
                return column.in_(select(fk.column).where(parent.c.target == name))
    return None
