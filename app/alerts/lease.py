"""The evaluator's lease: one row of ``leases`` with an expiry, so one process per database evaluates.

The holder renews it on every run; another process takes it once it expired, so a holder that
crashed (kill -9) on another host is replaced within ``lease_s``, and at once where it ran on the
same host (its PID no longer exists: :func:`gone`). Taking or renewing is one conditional UPDATE (or
the first INSERT), atomic on SQLite and PostgreSQL alike: two processes can never both hold it.
"""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass

from sqlalchemy import Engine, select, update
from sqlalchemy.exc import IntegrityError

from db import schema
from db.delivery import EVALUATOR_LEASE

EVALUATOR = EVALUATOR_LEASE


def holder_id() -> str:
    """``host:pid:random:pid-namespace``: names this process in both processes' logs, and lets another
    process of the same host and PID namespace see that it died (:func:`gone`)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}:{_namespace()}"


def _namespace() -> str:
    """This process's PID namespace (``4026531836``), "" where there is none to read (not Linux)."""
    try:
        return os.readlink("/proc/self/ns/pid").removeprefix("pid:[").removesuffix("]")
    except OSError:
        return ""


def gone(holder: str) -> bool:
    """Whether ``holder`` was a process of this host and PID namespace that no longer exists (killed,
    or stopped without handing its lease back): its lease is void at once, not after ``lease_s``. A
    holder of another host or namespace, or one whose PID cannot be checked, is taken as alive."""
    parts = holder.split(":")
    if len(parts) != 4 or not parts[3] or parts[0] != socket.gethostname() or parts[3] != _namespace():
        return False
    if not parts[1].isdigit() or int(parts[1]) == os.getpid():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive under another user (EPERM), or not ours to ask
        return False
    return False


@dataclass(frozen=True)
class LeaseHolder:
    holder: str
    expires_at: int


def acquire(engine: Engine, name: str, holder: str, now: float, lease_s: float) -> bool:
    """Take or renew the lease ``name`` for ``lease_s`` seconds; False while another holds it."""
    t = schema.leases
    now_i, expires = int(now), int(now + lease_s)
    with engine.begin() as conn:
        renewed = conn.execute(
            update(t)
            .where(t.c.name == name, t.c.holder == holder)
            .values(expires_at=expires)
        ).rowcount
        if renewed:
            return True
        taken = conn.execute(
            update(t)
            .where(t.c.name == name, t.c.expires_at <= now_i)
            .values(holder=holder, acquired_at=now_i, expires_at=expires)
        ).rowcount
        if taken:
            return True
        other = conn.execute(select(t.c.holder).where(t.c.name == name)).scalar()
        if other is not None and gone(other):  # its process is dead: no need to wait out its lease
            taken = conn.execute(
                update(t)
                .where(t.c.name == name, t.c.holder == other)
                .values(holder=holder, acquired_at=now_i, expires_at=expires)
            ).rowcount
            if taken:
                return True
        if conn.execute(select(t.c.name).where(t.c.name == name)).first() is not None:
            return False
    try:
        with engine.begin() as conn:
            conn.execute(t.insert().values(name=name, holder=holder, acquired_at=now_i, expires_at=expires))
        return True
    except IntegrityError:  # another process inserted it first
        return False


def current_holder(engine: Engine, name: str) -> LeaseHolder | None:
    t = schema.leases
    with engine.connect() as conn:
        row = conn.execute(select(t.c.holder, t.c.expires_at).where(t.c.name == name)).first()
    return None if row is None else LeaseHolder(row.holder, int(row.expires_at))


def release(engine: Engine, name: str, holder: str) -> None:
    """Give the lease up (a clean stop), so a standby takes over at its next run, not after expiry."""
    t = schema.leases
    with engine.begin() as conn:
        conn.execute(update(t).where(t.c.name == name, t.c.holder == holder).values(expires_at=0))
