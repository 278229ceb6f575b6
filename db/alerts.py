"""The judge's stored alerts: the records of the alert lifecycle, their reads, and the one write the
dashboard makes (a silence), below the facade so that ``Reader`` can return them.

The records are shared by the evaluator, the CLI, the UI and e-mail delivery (``app/alerts/model.py``
names them for the judge). States follow Prometheus alerting rules and Grafana's alert states
(docs/alerts.md): ``inactive → pending → firing → resolved``, plus ``no_data`` and ``error``, which
are never OK and never resolve a firing alert on their own. Times are unix seconds; ``model`` is ""
for an alert about the whole target.

The evaluator (one process, holding the lease) is the only writer of ``alert_states`` and
``alert_transitions`` (``app/alerts/store.py``). A silence is written by ``alerts silence add`` and by
the Alerts page; the page writes through :func:`write_silence`: a connection of its own, one row in a
short write transaction, never a migration (a schema older or newer than this code is refused).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, select, update
from sqlalchemy.exc import SQLAlchemyError

from core.errors import StorageError
from core.settings import ConfigError
from db import schema
from db.engine import normalize_url, open_engine, write_transaction
from db.errors import HINT, storage_error, what_database
from db.migrations import MIGRATIONS, applied, refuse_newer
from db.verdicts import NO_DATA  # one word for "cannot be judged": an alert's state and a minute's verdict

INACTIVE = "inactive"
PENDING = "pending"
FIRING = "firing"
RESOLVED = "resolved"
ERROR = "error"
STATES = (INACTIVE, PENDING, FIRING, RESOLVED, NO_DATA, ERROR)

WARNING = "warning"
CRITICAL = "critical"
SEVERITIES = (WARNING, CRITICAL)
MATCHER_KEYS = ("rule", "target", "model", "severity")


@dataclass(frozen=True)
class AlertState:
    """The stored state of one (rule, target, model): one row of ``alert_states``."""

    rule: str
    target: str
    model: str
    state: str
    severity: str
    last_change_at: int
    last_eval_at: int
    pending_since: int | None = None
    firing_since: int | None = None
    cleared_since: int | None = None
    resolved_at: int | None = None
    value: float | None = None
    threshold: float | None = None
    summary: str = ""
    recommendation: str = ""
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Transition:
    """One change of state, with the value that caused it: one row of ``alert_transitions``."""

    rule: str
    target: str
    model: str
    from_state: str
    to_state: str
    at: int
    severity: str
    value: float | None = None
    threshold: float | None = None
    summary: str = ""
    recommendation: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    id: int | None = None


@dataclass(frozen=True)
class Silence:
    """Holds back notifications of matching alerts between ``starts_at`` and ``ends_at``.

    ``matchers`` maps any of ``rule``, ``target``, ``model``, ``severity`` to an exact value; an
    alert matches when every matcher equals its field. A silenced alert still changes state.
    """

    matchers: dict[str, str]
    starts_at: int
    ends_at: int
    author: str
    comment: str
    created_at: int
    expired_at: int | None = None
    id: int | None = None

    def active(self, now: float) -> bool:
        end = self.ends_at if self.expired_at is None else min(self.ends_at, self.expired_at)
        return self.starts_at <= now < end

    def matches(self, rule: str, target: str, model: str, severity: str) -> bool:
        fields = {"rule": rule, "target": target, "model": model, "severity": severity}
        return all(fields.get(k) == v for k, v in self.matchers.items())


@dataclass(frozen=True)
class AlertBoard:
    """The Alerts page (``Reader.alert_board``): alerts firing or pending now (firing and critical
    first), the silences in force now, the transitions since ``start`` (oldest first) and the
    silences not ended yet (newest first). Which silence or mute window holds an alert back is the
    judge's to say (``app/alerts/silences.py`` ``silenced_by``)."""

    alerts: list[AlertState]
    active: list[Silence]
    history: list[Transition]
    silences: list[Silence]
    start: float
    end: float


def check_matchers(matchers: Mapping[str, str], key: str) -> None:
    for name, value in matchers.items():
        if name not in MATCHER_KEYS:
            raise ConfigError(f"{key}: {name!r} is not one of {', '.join(MATCHER_KEYS)}")
        if name == "severity" and value not in SEVERITIES:
            raise ConfigError(f"{key}: severity {value!r} is not one of {', '.join(SEVERITIES)}")


# -- reads ----------------------------------------------------------------------------------------------
@contextmanager
def _connection(engine_or_conn: Engine | Connection, write: bool = False) -> Iterator[Connection]:
    if isinstance(engine_or_conn, Connection):
        yield engine_or_conn
    elif write:
        with engine_or_conn.begin() as conn:
            yield conn
    else:
        with engine_or_conn.connect() as conn:
            yield conn


def _state(row: Any) -> AlertState:
    r = dict(row._mapping)
    r["labels"] = json.loads(r["labels"] or "{}")
    r["summary"], r["recommendation"] = r["summary"] or "", r["recommendation"] or ""
    return AlertState(**r)


def _transition(row: Any) -> Transition:
    r = dict(row._mapping)
    r["labels"] = json.loads(r["labels"] or "{}")
    r["summary"], r["recommendation"] = r["summary"] or "", r["recommendation"] or ""
    return Transition(**r)


def _silence(row: Any) -> Silence:
    r = row._mapping
    return Silence(
        matchers=json.loads(r["matchers"]), starts_at=r["starts_at"], ends_at=r["ends_at"], author=r["author"],
        comment=r["comment"], created_at=r["created_at"], expired_at=r["expired_at"], id=r["id"],
    )  # fmt: skip


Key = tuple[str, str, str]  # (rule, target, model)


def load_states(engine_or_conn: Engine | Connection, target: str | None = None) -> dict[Key, AlertState]:
    """Every stored state (of one target when named), keyed by (rule, target, model)."""
    t = schema.alert_states
    stmt = select(t) if target is None else select(t).where(t.c.target == target)
    with _connection(engine_or_conn) as conn:
        return {(r.rule, r.target, r.model): _state(r) for r in conn.execute(stmt)}


def current(engine_or_conn: Engine | Connection, target: str | None = None) -> list[AlertState]:
    """Firing and pending alerts (of one target when named), firing and critical first."""
    states = [s for s in load_states(engine_or_conn, target).values() if s.state in (FIRING, PENDING)]
    return sorted(states, key=lambda s: (s.state != FIRING, s.severity != "critical", s.target, s.rule, s.model))


def history(
    engine_or_conn: Engine | Connection, since: float, target: str | None = None, rule: str | None = None
) -> list[Transition]:
    """Transitions at or after ``since``, oldest first."""
    t = schema.alert_transitions
    stmt = select(t).where(t.c.at >= int(since))
    if target is not None:
        stmt = stmt.where(t.c.target == target)
    if rule is not None:
        stmt = stmt.where(t.c.rule == rule)
    with _connection(engine_or_conn) as conn:
        return [_transition(r) for r in conn.execute(stmt.order_by(t.c.at, t.c.id))]


def list_silences(engine_or_conn: Engine | Connection, now: float, include_ended: bool = False) -> list[Silence]:
    """Stored silences, newest first: those not ended yet (active or future), or all of them."""
    t = schema.silences
    with _connection(engine_or_conn) as conn:
        rows = conn.execute(select(t).order_by(t.c.id.desc())).all()
    out = [_silence(r) for r in rows]
    return out if include_ended else [s for s in out if not _ended(s, now)]


def _ended(s: Silence, now: float) -> bool:
    return (s.expired_at is not None and s.expired_at <= now) or s.ends_at <= now


def active_silences(engine_or_conn: Engine | Connection, now: float) -> list[Silence]:
    """The silences in force at ``now``."""
    t = schema.silences
    stmt = select(t).where(t.c.starts_at <= now, t.c.ends_at > now).where((t.c.expired_at.is_(None)) | (t.c.expired_at > now))
    with _connection(engine_or_conn) as conn:
        return [_silence(r) for r in conn.execute(stmt.order_by(t.c.id))]


def board(conn: Connection, now: float, since_s: float = 86400.0) -> AlertBoard:
    """Everything the Alerts page shows, in one connection (``Reader.alert_board``)."""
    start = now - since_s
    return AlertBoard(current(conn), active_silences(conn, now), history(conn, start), list_silences(conn, now), start, now)


# -- the silence writes ---------------------------------------------------------------------------------
def add_silence(engine_or_conn: Engine | Connection, silence: Silence) -> int:
    """Store a silence; returns its id. The matchers must name at least one field."""
    if not silence.matchers:
        raise ConfigError("a silence needs at least one matcher (rule, target, model or severity)")
    check_matchers(silence.matchers, "matchers")
    if silence.ends_at <= silence.starts_at:
        raise ConfigError("a silence must end after it starts")
    values = {
        "matchers": json.dumps(silence.matchers, sort_keys=True), "starts_at": int(silence.starts_at),
        "ends_at": int(silence.ends_at), "author": silence.author, "comment": silence.comment,
        "created_at": int(silence.created_at),
    }  # fmt: skip
    with _connection(engine_or_conn, write=True) as conn:
        key = conn.execute(schema.silences.insert().values(**values)).inserted_primary_key
        assert key is not None  # an INSERT of one row has one
        return int(key[0])


def expire_silence(engine_or_conn: Engine | Connection, silence_id: int, now: float) -> bool:
    """End a silence now; False when no silence has that id or it already ended."""
    t = schema.silences
    stmt = (
        update(t)
        .where(t.c.id == silence_id, t.c.ends_at > now)
        .where((t.c.expired_at.is_(None)) | (t.c.expired_at > now))
        .values(expired_at=int(now))
    )
    with _connection(engine_or_conn, write=True) as conn:
        return bool(conn.execute(stmt).rowcount)


T = TypeVar("T")
UPGRADE = "start the collector (python -m app collect) or run python -m app db migrate, which bring the schema up to date"


def refuse_older(conn: Connection, url: Any = None) -> None:
    """Raise StorageError when the schema lacks a migration this code knows: a process that does not
    migrate (the dashboard) writes nothing into an older schema; the collector brings it up to date."""
    done = applied(conn)
    missing = [name for name, _ in MIGRATIONS if name not in done]
    if missing:
        raise StorageError(f"{what_database(url)} has an older schema than this Sweetspot (migration {missing[0]} "
                           "is not applied yet); nothing was written", UPGRADE)  # fmt: skip


def _write_one(db_url: str, action: str, fn: Callable[[Connection], T]) -> T:
    """``fn`` in one short write transaction on a connection of its own, without migrating: the
    database must exist and its schema be the one this code knows (else StorageError, nothing written)."""
    url = normalize_url(db_url)
    if url.get_backend_name() == "sqlite" and not Path(str(url.database)).exists():
        raise StorageError(f"no database at {Path(str(url.database)).resolve()} (nothing collected yet?)", HINT)
    engine = open_engine(db_url, migrate=False)
    try:
        with write_transaction(engine) as conn:
            refuse_newer(conn, engine.url)
            refuse_older(conn, engine.url)
            return fn(conn)
    except SQLAlchemyError as exc:
        raise storage_error(action, exc, engine.url) from None
    finally:
        engine.dispose()


def write_silence(db_url: str, silence: Silence) -> int:
    """:func:`add_silence` from a process that holds no writer (the dashboard): one row, no migration."""
    return _write_one(db_url, "writing a silence", lambda conn: add_silence(conn, silence))


def end_silence(db_url: str, silence_id: int, now: float) -> bool:
    """:func:`expire_silence` from a process that holds no writer (the dashboard): one row, no migration."""
    return _write_one(db_url, "ending a silence", lambda conn: expire_silence(conn, silence_id, now))
