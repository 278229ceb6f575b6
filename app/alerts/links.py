"""Links into the dashboard for an alert (the Alerts page, e-mails): the Overview of its target over
the smallest range that holds the whole spell."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode

from app.alerts.model import FIRING, AlertState


def since(s: AlertState) -> int | None:
    """When the alert's current spell began: firing since, else pending since."""
    return s.firing_since if s.state == FIRING else s.pending_since


def overview_query(s: AlertState, now: float, ranges: Mapping[str, float]) -> str:
    """``?target=…&range=…`` for the Overview; ``ranges`` are the dashboard's range choices (name → s)."""
    spell = now - (since(s) or now) + 600  # ten minutes of "before" on the chart
    key = next((k for k, length in ranges.items() if length >= spell), list(ranges)[-1])
    return "?" + urlencode({"target": s.target, "range": key})
