"""Silences and mute windows: which alerts' notifications are held back now.

A silence is one stored time range with matchers (``alerts silence add``, the Alerts page); a mute
window is a recurring weekday + time range in a named time zone (``[[alerts.mute_windows]]``). Both
only hold back notifications: a silenced alert still changes state and is shown as silenced. The
stored silences are read and written by db/alerts.py (re-exported here for the CLI and the judge);
the dashboard writes one through ``Reader.add_silence`` / ``Reader.expire_silence``, never migrating.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from app.alerts.model import AlertState, Silence
from core.settings import ConfigError, MuteWindowSettings
from db.alerts import MATCHER_KEYS, active_silences, add_silence, check_matchers, expire_silence, list_silences

# the stored silences' reads and writes, named here for the CLI and the judge
__all__ = ["MATCHER_KEYS", "active_silences", "add_silence", "check_mute_windows", "expire_silence", "in_window",
           "is_silenced", "list_silences", "silenced_by"]  # fmt: skip

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


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
