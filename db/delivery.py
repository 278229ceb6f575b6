"""Where the collector's notifications go, as the collector stored it (``delivery_state``).

The process that holds the alert evaluator's lease is the one that sends (app/notify/notifier.py),
with the settings of its own environment; a ``ui`` or ``status`` started elsewhere has other ones
(no SWEETSPOT_SMTP_HOST, another file). So the evaluator stores its delivery line at every
evaluation, and every reader shows that row (with who stored it and whether it still holds the
lease), never what its own settings would do. One row: the latest collector's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqlalchemy import Connection, select
from sqlalchemy.dialects import postgresql, sqlite

from db import schema

EVALUATOR_LEASE = "alert-evaluator"  # app/alerts/lease.py's name for the lease (db/ must not import app/)


@dataclass(frozen=True)
class StoredDelivery:
    """The delivery of the collector that evaluated last: its line (``e-mail on: host:587 ... to ...``),
    the channels it sends through (``email``, ``alertmanager``, ``webhook``; empty: none), who stored
    it and when (unix s), and whether that process still holds the evaluator's lease (``live``)."""

    line: str
    channels: tuple[str, ...]
    holder: str
    written_at: int
    live: bool


def write(conn: Connection, holder: str, at: float, line: str, channels: list[str]) -> None:
    """Store the collector's delivery in the caller's transaction (one row, replaced)."""
    t = schema.delivery_state
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    row = {"name": "delivery", "holder": holder, "written_at": int(at), "line": line, "channels": json.dumps(channels)}
    stmt = dialect.insert(t).values(row)
    conn.execute(stmt.on_conflict_do_update(index_elements=[t.c.name], set_={k: v for k, v in row.items() if k != "name"}))


def read(conn: Connection, now: float) -> StoredDelivery | None:
    """The stored delivery (None: no collector has evaluated on this database yet); ``live`` while
    its holder's evaluator lease is unexpired at ``now``."""
    t, lease = schema.delivery_state, schema.leases
    row = conn.execute(select(t).where(t.c.name == "delivery")).first()
    if row is None:
        return None
    held = conn.execute(select(lease.c.holder, lease.c.expires_at).where(lease.c.name == EVALUATOR_LEASE)).first()
    live = held is not None and held.holder == row.holder and held.expires_at > now
    return StoredDelivery(row.line, tuple(json.loads(row.channels)), row.holder, int(row.written_at), live)
