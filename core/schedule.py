"""When the digest is due: ``daily 08:00`` or ``monday 08:00`` in a named time zone. Pure functions.

The digest job asks :func:`last_due` for the most recent scheduled instant at or before now and
sends a digest for it unless one is recorded for that instant already: a collector that was down
at 08:00 sends it when it starts, and a restart never sends it twice.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from core.errors import SweetspotError

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


class ScheduleError(SweetspotError, ValueError):
    """A digest schedule or time zone that cannot be used; ``key`` is the setting."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class Schedule:
    """``weekday`` None = every day; the time is wall-clock time in the digest's time zone."""

    weekday: int | None
    hour: int
    minute: int

    @property
    def period_s(self) -> float:
        return 86400.0 if self.weekday is None else 7 * 86400.0


def parse_schedule(text: str) -> Schedule:
    """``daily 08:00`` or ``monday 08:00`` (weekday names in English, any case)."""
    parts = text.lower().split()
    if len(parts) != 2 or (parts[0] != "daily" and parts[0] not in WEEKDAYS):
        raise ScheduleError(f"{text!r} is not 'daily HH:MM' or a weekday and HH:MM (e.g. monday 08:00)", "schedule")
    try:
        clock = dt.time.fromisoformat(parts[1])
    except ValueError:
        raise ScheduleError(f"{parts[1]!r} is not a time of day HH:MM", "schedule") from None
    weekday = None if parts[0] == "daily" else WEEKDAYS.index(parts[0])
    return Schedule(weekday, clock.hour, clock.minute)


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(f"unknown time zone {name!r} (an IANA name such as UTC or Europe/Paris)", "timezone") from None


def last_due(schedule: Schedule, timezone: str, now: float) -> float:
    """The latest scheduled instant ≤ ``now`` (unix seconds), in the zone's wall-clock time."""
    tz = zone(timezone)
    local = dt.datetime.fromtimestamp(now, tz)
    for days_back in range(8):
        day = local.date() - dt.timedelta(days=days_back)
        if schedule.weekday is not None and day.weekday() != schedule.weekday:
            continue
        at = dt.datetime(day.year, day.month, day.day, schedule.hour, schedule.minute, tzinfo=tz)
        if at.timestamp() <= now:
            return at.timestamp()
    raise AssertionError("a schedule fires at least once a week")
