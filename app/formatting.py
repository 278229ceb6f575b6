"""How figures are spelled for people (UI tiles, verdict clauses, alert e-mails). Pure functions.

``None`` is always spelled "—" (no data), never 0.
"""

from __future__ import annotations

import time
from urllib.parse import urlencode

NO_DATA = "—"


def number(value: float | None) -> str:
    """Few significant digits, no trailing zeros: 4.8, 3, 126, 0.93, 1,234."""
    if value is None:
        return NO_DATA
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        text = f"{value:.1f}"
    elif magnitude >= 0.1 or magnitude == 0:
        text = f"{value:.2f}"
    else:
        text = f"{value:.2g}"
    return text.rstrip("0").rstrip(".") if "." in text and "e" not in text else text


def with_unit(value: float | None, unit: str) -> str:
    """``4.8 s``, ``93 %``; a bare number when ``unit`` is empty."""
    if value is None:
        return NO_DATA
    return f"{number(value)} {unit}" if unit else number(value)


def percent(fraction: float | None) -> str:
    """A 0–1 fraction as a whole percentage: 0.934 → ``93 %``."""
    return NO_DATA if fraction is None else f"{fraction * 100:.0f} %"


def gigabytes(n_bytes: float | None) -> str:
    """Bytes in GB (10⁹, as GPU vendors count): ``29.1 GB``."""
    return NO_DATA if n_bytes is None else f"{n_bytes / 1e9:.1f} GB"


def ago(ts: float | None, now: float | None = None) -> str:
    """``12 s ago``, ``3 min ago``, ``2 h ago``, ``4 d ago``; "never" for None."""
    if ts is None:
        return "never"
    delta = max(0.0, (time.time() if now is None else now) - ts)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if delta >= size:
            return f"{delta / size:.0f} {unit} ago"
    return f"{delta:.0f} s ago"


def clock(ts: float | None) -> str:
    """Local wall-clock time with date: ``2026-11-30 09:24:17``."""
    return NO_DATA if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def tokens(n: float | None) -> str:
    """A token count in few digits: ``1.2 M``, ``483 k``, ``950``."""
    if n is None:
        return NO_DATA
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= size:
            return f"{number(n / size)} {unit}"
    return number(n)


def page_link(path: str, **query: str) -> str:
    """A dashboard link with its query string escaped: ``/?target=a%20b&range=1h`` (outside app/ui,
    which may not import urllib)."""
    return f"{path}?{urlencode(query)}" if query else path
