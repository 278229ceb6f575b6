"""Silences and mute windows: which alerts' notifications are held back now.

A silence is one stored time range with matchers (``alerts silence add``, the Alerts page); a mute
window is a recurring weekday + time range in a named time zone (``[[alerts.mute_windows]]``). Both
only hold back notifications: a silenced alert still changes state and is shown as silenced.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy import Connection, Engine, select, update

from app.alerts.model import SEVERITIES, AlertState, Silence
from core.settings import ConfigError, MuteWindowSettings
from db import schema

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
MATCHER_KEYS = ("rule", "target", "model", "severity")


def is_silenced(
    state: AlertState, now: float, silences: Sequence[Silence], mute_windows: Sequence[MuteWindowSettings]
) -> bool:
    """True when an active silence or a mute window holding at ``now`` matches the alert."""
    return silenced_by(state, now, silences, mute_windows) is not None


def silenced_by(
    state: AlertState, now: float, silences: Sequence[Silence], mute_windows: Sequence[MuteWindowSettings]
) -> str | None:
    """What holds the alert back (``silence 3``, ``mute window nights``), or None."""
    for s in silences:
        if s.active(now) and s.matches(state.rule, state.target, state.model, state.severity):
            return f"silence {s.id}" if s.id is not None else "a silence"
    for w in mute_windows:
        if _matches(w.matchers, state) and in_window(w, now):
            return f"mute window {w.name or w.start + '-' + w.end}"
    return None


def _matches(matchers: Mapping[str, str], state: AlertState) -> bool:
    fields = {"rule": state.rule, "target": state.target, "model": state.model, "severity": state.severity}
    return all(fields.get(k) == v for k, v in matchers.items())


def in_window(window: MuteWindowSettings, now: float) -> bool:
    """Whether ``now`` falls in the window. A window that wraps past midnight belongs to the weekday
    it starts on (fri 22:00-06:00 holds until Saturday 06:00); start == end means the whole day."""
    local = datetime.fromtimestamp(now, ZoneInfo(window.timezone))
    start, end, at = _clock(window.start), _clock(window.end), local.time()
    if start == end:
        return _on(window, local)
    if start < end:
        return _on(window, local) and start <= at < end
    return (_on(window, local) and at >= start) or (_on(window, local - timedelta(days=1)) and at < end)


def _on(window: MuteWindowSettings, day: datetime) -> bool:
    return not window.weekdays or WEEKDAYS[day.weekday()] in window.weekdays


def _clock(text: str) -> time:
    hours, _, minutes = text.partition(":")
    if hours == "24" and minutes == "00":
        return time.max
    return time(int(hours), int(minutes))


def check_mute_windows(windows: Sequence[MuteWindowSettings]) -> None:
    """Raise ConfigError naming the first key of ``[[alerts.mute_windows]]`` that cannot be used."""
    for i, w in enumerate(windows):
        key = f"alerts.mute_windows[{i}]"
        bad_day = next((d for d in w.weekdays if d not in WEEKDAYS), None)
        if bad_day is not None:
            raise ConfigError(f"{key}.weekdays: {bad_day!r} is not one of {', '.join(WEEKDAYS)}")
        for name in ("start", "end"):
            try:
                _clock(getattr(w, name))
            except ValueError:
                raise ConfigError(f"{key}.{name}: {getattr(w, name)!r} is not a time like 22:00") from None
        try:
            ZoneInfo(w.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"{key}.timezone: unknown time zone {w.timezone!r} (an IANA name, e.g. Europe/Paris)") from None
        check_matchers(w.matchers, f"{key}.matchers")


def check_matchers(matchers: Mapping[str, str], key: str) -> None:
    for name, value in matchers.items():
        if name not in MATCHER_KEYS:
            raise ConfigError(f"{key}: {name!r} is not one of {', '.join(MATCHER_KEYS)}")
        if name == "severity" and value not in SEVERITIES:
            raise ConfigError(f"{key}: severity {value!r} is not one of {', '.join(SEVERITIES)}")


# -- the stored silences ------------------------------------------------------------------------------
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


def _silence(row: object) -> Silence:
    r = row._mapping  # type: ignore[attr-defined]
    return Silence(
        matchers=json.loads(r["matchers"]), starts_at=r["starts_at"], ends_at=r["ends_at"], author=r["author"],
        comment=r["comment"], created_at=r["created_at"], expired_at=r["expired_at"], id=r["id"],
    )  # fmt: skip


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


def create_silence(db_url: str, silence: Silence) -> int:
    """:func:`add_silence` from a process that holds no writer (the dashboard): opens one for it."""
    from db.engine import open_engine

    engine = open_engine(db_url)
    try:
        return add_silence(engine, silence)
    finally:
        engine.dispose()


def end_silence(db_url: str, silence_id: int, now: float) -> bool:
    """:func:`expire_silence` from a process that holds no writer (the dashboard)."""
    from db.engine import open_engine

    engine = open_engine(db_url)
    try:
        return expire_silence(engine, silence_id, now)
    finally:
        engine.dispose()
