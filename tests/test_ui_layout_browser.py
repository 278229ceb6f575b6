"""Every page at 1440×900 and 1280×800 in headless Chromium: nothing reaches past the page's right edge
and no table hides columns behind its own horizontal scroll,
no chart title is cut with an ellipsis (issue 30: the GPUs page's titles were), and every chart reads
cleanly (tests/browser.py: layout_defects): no axis crowded with tick labels, no text over another, no
threshold line through an axis label, no series at 0 hidden under the x axis. Whole-page screenshots
land in artifacts/screenshots/layout-*.png."""

from __future__ import annotations

import os

import pytest

from tests import ui_db
from tests.browser import CHROMIUM, MAX_TICK_LABELS, SCREENSHOTS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"Debian's chromium is not installed at {CHROMIUM}"),
]

PAGES = {"overview": ("/", 1), "gpus": ("/gpus", 4), "operating-point": ("/operating_point", 3), "plan": ("/plan", 1), "alerts": ("/alerts", 1),
         "query": ("/query?canned=ttft_per_day", 1), "fleet": ("/fleet", 0), "targets": ("/targets", 0)}  # fmt: skip
# tables a page draws (Glide grids lay out after the script ends: measured once each has its scroller)
TABLES = {"fleet": 2, "query": 1}
TABLES_LAID_OUT = """n => { const t = [...document.querySelectorAll('[data-testid="stDataFrame"]')];
  return t.length >= n && t.every(d => d.querySelector('.dvn-scroller')); }"""
SIZES = [(1440, 900), (1280, 800)]
# elements of the main block whose right edge passes the page's, and chart texts cut with "…"
MEASURE = """() => { const w = document.documentElement.clientWidth; const out = [];
  for (const el of document.querySelectorAll('[data-testid="stMain"] *')) { const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > w + 1) out.push((el.getAttribute('data-testid') || el.tagName) + ' ' + Math.round(r.right)); }
  // a table whose columns run past its own width hides them behind a scroll (the Fleet's did, issue 30)
  for (const s of document.querySelectorAll('[data-testid="stDataFrame"] .dvn-scroller'))
    if (s.clientWidth > 0 && s.scrollWidth > s.clientWidth + 1) out.push('table columns hidden ' + s.scrollWidth + ' > ' + s.clientWidth);
  const cut = [...document.querySelectorAll('svg text')].map(t => t.textContent).filter(t => t.endsWith('…'));
  return {overflowing: out.slice(0, 10), cut}; }"""


@pytest.fixture(scope="module")
def base_url():
    from tests.browser import streamlit_server

    with streamlit_server(ui_db.shared()) as base:
        yield base


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("name", list(PAGES))
def test_nothing_overflows_and_no_title_is_cut(browser, base_url, name, size):
    from tests.browser import chart_layout, layout_defects, wait_rendered

    path, charts = PAGES[name]
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    page.goto(base_url + path)
    wait_rendered(page, charts)
    page.wait_for_function(TABLES_LAID_OUT, arg=TABLES.get(name, 0), timeout=30000)
    page.wait_for_timeout(300)  # Vega lays out once more after the first draw
    found = page.evaluate(MEASURE)
    layout = chart_layout(page)
    defects = layout_defects(layout)
    # the whole page at this width: Streamlit scrolls inside its main block, so grow the viewport to it
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]')?.scrollHeight || 0")
    page.set_viewport_size({"width": size[0], "height": min(int(height) + 40, 6000)})
    page.wait_for_timeout(400)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"layout-{name}-{size[0]}.png"), full_page=True)
    page.close()
    assert found["overflowing"] == [], found
    assert found["cut"] == [], found
    assert defects == []
    if name == "alerts":  # the state timeline's time axis: labelled, not crowded (issue 30)
        times = [t for t in layout[0]["ticks"] if t.get("scale") == "time"]
        assert times and 2 <= times[0]["count"] <= MAX_TICK_LABELS, layout[0]["ticks"]
        assert all(":" in label for label in times[0]["labels"]), times[0]["labels"]  # one clock, not "09 AM"


def test_layout_defects_counts_labels_on_continuous_axes_and_overlaps_on_category_axes():
    """A time or value axis picks its ticks: more than MAX_TICK_LABELS is crowding. A category axis
    (the Alerts timeline's lanes) labels every category, however many alerts changed that day: only its
    labels drawn over each other are a defect (CI's day had 16 lanes and failed on their count)."""
    from tests.browser import layout_defects

    many = [f"edge · rule_{i}" for i in range(MAX_TICK_LABELS + 5)]
    lanes = {"orient": "left", "count": len(many), "labels": many, "discrete": True, "crowded": []}
    times = {"orient": "bottom", "count": 26, "labels": [f"12:{m:02d}" for m in range(26)], "discrete": False}
    chart = {"ticks": [lanes], "overlaps": [], "struck": [], "on_edge": []}
    assert layout_defects([chart]) == []
    assert layout_defects([{**chart, "ticks": [lanes, times]}]) == [
        f"chart 0: 26 tick labels on one axis: {times['labels'][:5]}…"
    ]
    crowded = {**lanes, "crowded": [["edge · rule_0", "edge · rule_1"]]}
    assert layout_defects([{**chart, "ticks": [crowded]}]) == [
        "chart 0: labels of one category axis drawn over each other: 'edge · rule_0' and 'edge · rule_1'"
    ]


@pytest.fixture(scope="module")
def many_lanes_url():
    """The UI's database plus changes of 24 more alerts in its last hour: a day with more lanes than a
    continuous axis may carry labels."""
    import shutil
    import tempfile
    import time
    from pathlib import Path

    from app.alerts import store
    from app.alerts.model import Transition
    from db.engine import open_engine
    from tests.browser import streamlit_server

    copy = Path(tempfile.mkdtemp(prefix="sweetspot-lanes-")) / "sweetspot.db"
    shutil.copyfile(ui_db.shared().removeprefix("sqlite:///"), copy)
    copy_url = f"sqlite:///{copy}"
    now = time.time()
    engine = open_engine(copy_url, migrate=False)
    changes = [Transition(f"rule_{i:02d}", "lanes", "", "inactive", "pending", now - 3000 + 60 * i, "warning") for i in range(24)]
    with engine.begin() as conn:
        store.save(conn, [], [], changes)
    engine.dispose()
    with streamlit_server(copy_url) as base:
        yield base


def test_the_alerts_timeline_labels_every_lane_when_many_alerts_changed(browser, many_lanes_url):
    from tests.browser import chart_layout, layout_defects, wait_rendered

    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(many_lanes_url + "/alerts")
    wait_rendered(page, 1)
    page.wait_for_timeout(300)  # Vega lays out once more after the first draw
    layout = chart_layout(page)
    page.close()
    lanes = [t for t in layout[0]["ticks"] if t.get("discrete")]
    assert lanes and lanes[0]["count"] >= 24, layout[0]["ticks"]  # every lane named
    assert sum(label.startswith("lanes · rule_") for label in lanes[0]["labels"]) == 24
    assert layout_defects(layout) == []
