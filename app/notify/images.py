"""The chart of an alert's figure as a PNG: the dashboard's own Altair panel (app/ui/charts.py),
rendered by vl-convert (no browser). The last hour before the notification, with the threshold.

The panel is the one the alert's rule declares (``Rule.panel``: the defaults in app/alerts/rules.py,
``panel`` in ``[[alerts.rules]]``), drawn from the panel table the Overview draws from
(``app.ui.charts.PANELS``: its fields, lines, threshold and title), the alert's own threshold in
place of the panel's. A chart that cannot be drawn (no data, a rule without a panel, a rendering
failure) is None: the e-mail goes without it, never not at all.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from app.alerts.model import AlertState
from app.alerts.rules import declared
from app.panel_names import PANEL_NAMES
from core.settings import Settings, effective_sweetspot

if TYPE_CHECKING:
    from db.queries import Reader

log = logging.getLogger(__name__)
WIDTH = 560  # CSS px the e-mail shows the image at (message.py's <img width>)
SCALE = 1.5  # pixels drawn per CSS px: sharp on a high-density screen
FIT = {"type": "fit", "contains": "padding"}
HOUR_S = 3600.0
STEP_S = 30.0


def alert_chart(reader: Reader, settings: Settings, state: AlertState, now: float) -> bytes | None:
    """The PNG of the panel ``state``'s rule declares, over the hour before ``now``; None when the rule
    declares none or it cannot be drawn."""
    rule = declared(settings, state.target, state.rule)
    if rule is None or rule.panel not in PANEL_NAMES:
        return None
    try:
        spec = _spec(reader, settings, state, rule.panel, now)
        return None if spec is None else png(spec)
    except Exception as exc:  # noqa: BLE001 - a chart is an extra: the e-mail is sent without it
        log.warning("no chart for %s on %s: %s: %s", state.rule, state.target, type(exc).__name__, exc)
        return None


def _spec(reader: Reader, settings: Settings, state: AlertState, panel: str, now: float) -> dict[str, Any] | None:
    from app.ui import charts

    end = now // STEP_S * STEP_S
    frame = charts.Frame(end - HOUR_S, end, STEP_S)
    drawn = charts.PANELS[panel]
    points = reader.series(state.target, frame.start, frame.end, STEP_S, model=state.model or None, fields=drawn.fields)
    if not points:
        return None
    sweetspot = effective_sweetspot(settings, state.target)
    if drawn.threshold and state.threshold is not None:  # the line the alert crossed
        current = getattr(sweetspot, drawn.threshold)  # None: an unknown sweet spot (app/sweet_spot.py)
        kind = type(current) if current is not None else int if drawn.threshold == "concurrency" else float
        crossed: Any = kind(state.threshold)
        sweetspot = dataclasses.replace(sweetspot, **{drawn.threshold: crossed})
    ceiling = next((t.ceiling for t in reader.targets() if t.name == state.target), None) if drawn.ceiling else None
    chart = drawn.draw(points, frame, charts.Against(sweetspot, ceiling, for_alert=True))
    return sized(chart)


def sized(chart: Any) -> dict[str, Any]:
    """The panel's spec with the whole image WIDTH px wide, axes and legend included ("fit"): sized for
    its plot alone, a TTFT chart came out 702 px (1,053 at SCALE), and the mail, showing it at 560,
    shrank its labels to 6-9 px."""
    spec: dict[str, Any] = chart.properties(width=WIDTH, autosize=FIT).to_dict()
    return spec


def png(spec: dict[str, Any]) -> bytes:
    """A Vega-Lite spec as PNG bytes (vl-convert; about a second for the first chart of a process)."""
    import vl_convert

    data: bytes = vl_convert.vegalite_to_png(spec, scale=SCALE)
    return data
