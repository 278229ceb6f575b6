"""The chart of an alert's figure as a PNG: the dashboard's own Altair panel (app/ui/charts.py),
rendered by vl-convert (no browser). The last hour before the notification, with the threshold.

The panel is the one the alert's rule declares (``Rule.panel``: the defaults in app/alerts/rules.py,
``panel`` in ``[[alerts.rules]]``). A chart that cannot be drawn (no data, a rule without a panel,
a rendering failure) is None: the e-mail goes without it, never not at all.
"""

from __future__ import annotations

import logging
from typing import Any

from app.alerts.model import AlertState
from app.alerts.rules import declared
from core.settings import Settings, effective_sweetspot

log = logging.getLogger(__name__)
WIDTH = 560
HOUR_S = 3600.0
STEP_S = 30.0

# The SeriesPoint fields each panel a rule may declare (app.alerts.rules.PANELS) draws.
_FIELDS: dict[str, tuple[str, ...]] = {
    "ttft": ("ttft_p50_s", "ttft_p95_s", "ttft_p99_s"),
    "preemptions": ("preemptions_per_s",),
    "kv_cache": ("kv_cache_usage_max",),
    "concurrency": ("running_avg", "waiting_max", "queue_depth_max"),
    "throughput": ("tokens_per_s",),
    "mbu": ("mbu",),  # a user's MBU rule (no default rule has an MBU floor)
}


def alert_chart(reader: Any, settings: Settings, state: AlertState, now: float) -> bytes | None:
    """The PNG of the panel ``state``'s rule declares, over the hour before ``now``; None when the rule
    declares none or it cannot be drawn."""
    rule = declared(settings, state.target, state.rule)
    if rule is None or rule.panel not in _FIELDS:
        return None
    try:
        spec = _spec(reader, settings, state, rule.panel, now)
        return None if spec is None else png(spec)
    except Exception as exc:  # noqa: BLE001 - a chart is an extra: the e-mail is sent without it
        log.warning("no chart for %s on %s: %s: %s", state.rule, state.target, type(exc).__name__, exc)
        return None


def _spec(reader: Any, settings: Settings, state: AlertState, panel: str, now: float) -> dict[str, Any] | None:
    from app.ui import charts

    end = now // STEP_S * STEP_S
    frame = charts.Frame(end - HOUR_S, end, STEP_S)
    points = reader.series(state.target, frame.start, frame.end, STEP_S, model=state.model or None, fields=_FIELDS[panel])
    if not points:
        return None
    s = effective_sweetspot(settings, state.target)
    if panel == "ttft":
        chart = charts.ttft_chart(points, frame, state.threshold if state.threshold is not None else s.ttft_p95_slo_s)
    elif panel == "preemptions":
        chart = charts.preemption_chart(points, frame)
    elif panel == "kv_cache":
        chart = charts.kv_chart(points, frame, s.kv_warning, s.kv_critical)
    elif panel == "concurrency":
        spot = state.threshold if state.threshold is not None else s.concurrency
        chart = charts.concurrency_chart(points, frame, None if spot is None else int(spot))
    elif panel == "mbu":
        chart = charts.mbu_chart(points, frame, state.threshold if state.threshold is not None else s.min_mbu)
    else:
        ceiling = next((t.ceiling for t in reader.targets() if t.name == state.target), None)
        chart = charts.throughput_chart(points, frame, ceiling)
    spec: dict[str, Any] = chart.properties(width=WIDTH).to_dict()
    return spec


def png(spec: dict[str, Any]) -> bytes:
    """A Vega-Lite spec as PNG bytes (vl-convert; about a second for the first chart of a process)."""
    import vl_convert

    data: bytes = vl_convert.vegalite_to_png(spec, scale=1.5)
    return data
