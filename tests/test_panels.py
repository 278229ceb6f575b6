"""Each panel is said once (``app.ui.charts.PANELS``: fields, lines, threshold, title) and both
renderers draw from it: from one database, every panel is drawn the Overview's way and every panel
a rule may declare the alert e-mail's way (app/notify/images.py), and the series drawn (legend
names, times, values), the threshold lines and the titles are compared."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from app.alerts.rules import DEFAULT_RULES
from app.notify import images
from app.panel_names import PANEL_NAMES as PANELS
from app.ui import charts
from core.settings import Settings
from db.engine import open_engine
from db.queries import Reader
from db.writer import Writer
from tests.notify_helpers import T0, state
from tests.ui_db import simulated_rounds, target_settings

TARGET = "prod-70b"


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('panels')}/p.db"
    engine = open_engine(url)
    writer = Writer(engine)
    writer.register_target(target_settings(TARGET))
    writer.write_rounds(simulated_rounds(TARGET, T0 - 3700, T0, 15.0))
    writer.close()
    yield Reader(engine=engine)
    engine.dispose()


def _drawn(sub: dict[str, Any], root: dict[str, Any]) -> tuple[list[tuple[Any, ...]], list[float], str]:
    """(series rows (name, time, value), threshold lines' y, title) of one panel's Vega-Lite spec."""
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            data = node.get("data")
            if isinstance(data, dict) and "name" in data:
                names.add(data["name"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(sub)
    rows = [row for name in sorted(names) for row in root["datasets"][name]]
    series = sorted((r["series"], r["time"], None if r["value"] is None or math.isnan(r["value"]) else round(r["value"], 9))
                    for r in rows if "series" in r)  # fmt: skip
    lines = sorted(r["y"] for r in rows if "y" in r)
    title = sub["title"] if isinstance(sub["title"], str) else sub["title"]["text"]
    return series, lines, title


def _both(reader: Reader, settings: Settings, panel: str, threshold: float | None) -> tuple[Any, Any]:
    rule = next(r for r in DEFAULT_RULES if r.panel == panel) if any(r.panel == panel for r in DEFAULT_RULES) else DEFAULT_RULES[0]
    email = images._spec(reader, settings, state(rule.name, target=TARGET, threshold=threshold), panel, T0)
    assert email is not None, panel
    end = T0 // images.STEP_S * images.STEP_S
    frame = charts.Frame(end - images.HOUR_S, end, images.STEP_S)
    points = reader.series(TARGET, frame.start, frame.end, images.STEP_S, fields=charts.panel_fields(*charts.OVERVIEW))
    sweetspot = settings.sweetspot
    drawn = charts.PANELS[panel]
    if threshold is not None and drawn.threshold:  # the e-mail draws the line the alert crossed
        current = getattr(sweetspot, drawn.threshold)  # None: the sweet spot is unknown (judge-own), a count
        kind = type(current) if current is not None else int if drawn.threshold == "concurrency" else float
        sweetspot = dataclasses.replace(sweetspot, **{drawn.threshold: kind(threshold)})
    ceiling = next(t.ceiling for t in reader.targets() if t.name == TARGET)
    overview = charts.overview_chart(points, frame, points, frame, sweetspot, ceiling).to_dict()
    dashboard = overview["vconcat"][charts.OVERVIEW.index(panel)]
    series, lines, title = _drawn(dashboard, overview)
    if panel == "mbu":  # no default rule has an MBU floor: the Overview draws none, a user's rule's e-mail its own
        floor = sweetspot.min_mbu * 100
        lines, title = sorted([*lines, floor]), f"{title} · red dashes: min_mbu {floor:.0f} %"
    return _drawn(email, email), (series, lines, title)


def test_every_panel_is_declared_once_and_drawn_by_the_overview():
    # one list of names (app/panel_names.py): the panels drawn, the Overview's order, what a rule may declare
    assert tuple(charts.PANELS) == charts.OVERVIEW == PANELS
    # what the Overview reads is what its panels draw (no hand list beside them)
    assert set(charts.overview_fields(coarse=True)) | set(charts.overview_fields(coarse=False)) == set(
        charts.panel_fields(*charts.OVERVIEW))
    for name, panel in charts.PANELS.items():
        assert panel.fields and not panel.threshold or panel.threshold in {f.name for f in dataclasses.fields(Settings().sweetspot)}, name


@pytest.mark.parametrize("panel", PANELS)
def test_the_email_draws_the_overviews_panel(reader, panel):
    email, dashboard = _both(reader, Settings(), panel, None)
    points = reader.series(TARGET, T0 - 3600, T0, images.STEP_S, fields=charts.PANELS[panel].fields)
    if any(getattr(p, f) for p in points for f in charts.PANELS[panel].fields):  # the hour has a value to draw
        assert email[0], f"{panel}: no series drawn"
    assert email == dashboard


@pytest.mark.parametrize("panel", [p for p in PANELS if charts.PANELS[p].threshold])
def test_the_email_draws_the_alerts_own_threshold(reader, panel):
    value = {"ttft_p95_slo_s": 1.5, "min_mbu": 0.4, "concurrency": 12}[charts.PANELS[panel].threshold]
    email, dashboard = _both(reader, Settings(), panel, value)
    assert email == dashboard
    scale = 100 if panel == "mbu" else 1
    assert value * scale in email[1]


def test_the_email_ttft_chart_has_its_queue_line(reader):
    email, _ = _both(reader, Settings(), "ttft", None)
    table = set(charts.table_lines("ttft").values())  # lines rows of the figures table add (db/figures.py panel=)
    assert {"P50", "P95", "P99", "queue P95", *table} == {name for name, _, _ in email[0]}
    assert "queue P95" in email[2]  # the title explains the line it now draws
