"""Durations as users write them: ``90s``, ``5m``, ``2h``, ``7d`` (a bare number means seconds); and
instants (:func:`parse_instant`)."""

from __future__ import annotations

import datetime as dt
import math
import re

from core.errors import SweetspotError

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")


class DurationError(SweetspotError, ValueError):
    """A duration string that is not ``<number><unit>`` with unit ms, s, m, h, d or w.

    A SweetspotError, so a bad ``--interval`` or ``--backfill`` flag ends in one line at the CLI edge.
    """


def parse_duration(text: str | float | int) -> float:
    """Return the duration in seconds; numbers pass through as seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if not math.isfinite(text):  # TOML's nan and inf
            raise DurationError(f"{text} is not a finite duration (write it like 90s, 5m, 2h or 7d)")
        if text < 0:
            raise DurationError(f"duration must not be negative: {text}")
        return float(text)
    match = _PATTERN.match(str(text))
    if not match:
        raise DurationError(f"not a duration: {text!r} (write it like 90s, 5m, 2h or 7d)")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def format_duration(seconds: float) -> str:
    """The shortest exact spelling (``300`` → ``5m``), for labels such as "P95 over 5m"."""
    for unit in ("d", "h", "m", "s"):  # no weeks: people write 7d, not 1w
        size = _UNITS[unit]
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def parse_instant(text: str) -> float:
    """An instant as users write one on the command line, in epoch seconds: ISO 8601 (``2026-12-06T09:00``,
    ``2026-12-06 09:00:00Z``, ``…+01:00``; without an offset, UTC) or epoch seconds (``1796547600``)."""
    value = str(text).strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = dt.datetime.fromisoformat(re.sub(r"[Zz]$", "+00:00", value))  # RFC 3339 allows either case
        except ValueError:
            raise DurationError(f"not a time: {text!r} (write it like 2026-12-06T09:00Z, or in epoch seconds)") from None
        return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).timestamp()
    if not math.isfinite(seconds) or seconds < 0:
        raise DurationError(f"not a time: {text!r} (epoch seconds are a finite number from 0)")
    return seconds
