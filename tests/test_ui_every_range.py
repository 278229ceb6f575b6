"""Every page at every preset range on the demo's database, in Chromium: every view tells the truth.

The database is the one ``python -m app run`` makes on a fresh machine (a week backfilled at one
round per 30 s, then live rounds every 5 s, raw rows past their retention deleted). For each chart
the test reads what Vega drew (tests/browser.py: chart_panels) and fails when a panel with data in
its range draws (almost) nothing, when a mark lies outside its plot (an axis clipping the data it
exists to show), or when a page says "never been scraped" of a target that has rows. Screenshots go
to artifacts/screenshots/ (docs/ui.md shows some of them, from docs/screenshots/).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

from app.ui.time_range import RANGES
from tests import ui_db
from tests.browser import CHROMIUM, SCREENSHOTS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"Debian's chromium is not installed at {CHROMIUM}"),
]

# (url path, charts on the page)
PAGES = {"overview": ("/", 1), "gpus": ("/gpus", 4), "operating-point": ("/operating_point", 3), "targets": ("/targets", 0)}
DATA_MARKS = {"line", "area", "rect", "symbol"}  # rules and text are thresholds and labels, not data
VISIBLE = 0.9  # of a panel's points with data, at least this share is drawn (a lone point of a broken line is not)


@pytest.fixture(scope="module")
def now() -> float:
    # taken when the module's first test runs, not at collection: in a whole-suite run that comes
    # many minutes later, and a history ending then would leave the short ranges half empty
    return time.time()


@pytest.fixture(scope="module")
def base_url(now):
    from tests.browser import streamlit_server

    url = ui_db.demo(Path(tempfile.mkdtemp(prefix="sweetspot-demo-")) / "sweetspot.db", now)
    with streamlit_server(url) as base:
        yield base


def open_page(browser, url: str, charts: int, shot: str):
    from tests.browser import chart_layout, chart_panels, layout_defects, new_page, screenshot, wait_rendered

    page = new_page(browser)
    page.goto(url)
    wait_rendered(page, charts)
    page.wait_for_timeout(300)  # Vega lays out once more after the first draw
    # what the shot shows, kept in the PNG: docs/ tests that its copies still show the page as it is
    meta = {"shot": shot, "charts": len(chart_panels(page)),
            "panels": [p["title"][:80] for c in chart_panels(page) if c for p in c["panels"]],
            "alerts": [a[:200] for a in page.locator('[data-testid="stAlert"]').all_inner_texts()]}  # fmt: skip
    # read before the screenshot grows the viewport: at 1440×1000, as a user sees it
    defects = layout_defects(chart_layout(page))
    screenshot(page, SCREENSHOTS / f"{shot}.png", meta)
    assert page.locator('[data-testid="stException"]').count() == 0, page.inner_text("body")[:2000]
    # crowded axes, texts over texts, threshold lines through labels, series at 0 under the x axis
    assert defects == [], f"{shot}: {defects}"
    return page


def untruths(panels_by_chart) -> list[str]:
    """Every panel that hides data it has, or whose axis clips it; empty when all tell the truth."""
    found = []
    for chart in panels_by_chart:
        assert chart is not None, "the chart's Vega view was not found"
        if chart["fits"] is not True:
            found.append(f"{chart['panels'][0]['title'][:60]!r}: drawn beyond its canvas (cut off): {chart['fits']}")
        for panel in chart["panels"]:
            data = [m for m in panel["marks"] if m["type"] in DATA_MARKS]
            finite, drawn = sum(m["finite"] for m in data), sum(m["drawn"] for m in data)
            if finite and drawn < VISIBLE * finite:
                found.append(f"{panel['title'][:60]!r}: {drawn} of {finite} points with data drawn")
            found += [f"{panel['title'][:60]!r}: {m['outside']} {m['type']} marks outside the plot ({m['name']})"
                      for m in panel["marks"] if m["outside"]]  # fmt: skip
    return found


def panels_drawn(panels_by_chart) -> list[int]:
    return [sum(m["drawn"] for m in p["marks"] if m["type"] in DATA_MARKS) for c in panels_by_chart for p in c["panels"]]


@pytest.mark.parametrize("range_key", list(RANGES))
@pytest.mark.parametrize("name", list(PAGES))
def test_every_page_at_every_range_tells_the_truth(browser, base_url, name, range_key):
    from tests.browser import chart_panels

    path, charts = PAGES[name]
    page = open_page(browser, f"{base_url}{path}?range={range_key}", charts, f"{name}-{range_key}")
    body = page.inner_text("body")
    assert "never been scraped" not in body and "never scraped" not in body, body[:1500]
    panels = chart_panels(page)
    assert len(panels) == charts
    assert untruths(panels) == []
    # the demo has data in every range: every panel draws marks (preemptions only where there were some)
    titles = [p["title"] for c in panels for p in c["panels"]]
    # (the simulator exposes no prefix-cache counters, as vLLM without --enable-prefix-caching: that
    # panel has nothing to draw)
    quiet = ("Preemptions", "Prefix-cache")
    empty = [t[:50] for t, n in zip(titles, panels_drawn(panels), strict=True) if not n and not t.startswith(quiet)]
    assert empty == []
    # steps without preemptions draw as a red line at 0 (the demo has few): never a blank panel
    for panel in (p for c in panels for p in c["panels"] if p["title"].startswith("Preemptions")):
        assert sum(m["drawn"] for m in panel["marks"] if m["type"] in ("rect", "rule")), panel
    if name == "operating-point":  # the demo's sweep of another server is named, not drawn as this target's
        assert "1 sweep(s) of other servers not shown: http://10.0.0.9:8000/v1" in body, body[:2000]
    page.close()


# Pages the range does not apply to (the Fleet judges each target over the verdict window, the Alerts
# page shows the last 24 h, a query its own SQL's span), opened once each: (url path, charts, text).
OTHER_PAGES = {
    "fleet": ("/fleet", 0, "Fleet · 2 targets"),
    "alerts": ("/alerts", 1, "State history"),
    "query": ("/query?canned=ttft_per_day&p.target=demo", 1, " rows in "),
}


@pytest.mark.parametrize("name", list(OTHER_PAGES))
def test_the_pages_without_a_range_tell_the_truth(browser, base_url, name):
    from tests.browser import chart_panels

    path, charts, text = OTHER_PAGES[name]
    page = open_page(browser, f"{base_url}{path}", charts, f"{name}-default")  # not {name}.png: test_ui_browser saves those
    page.get_by_text(text).first.wait_for(timeout=20000)
    body = page.inner_text("body")
    assert "never been scraped" not in body and "never scraped" not in body, body[:1500]
    panels = chart_panels(page)
    assert len(panels) == charts and untruths(panels) == []
    assert all(panels_drawn(panels)), [p["title"] for c in panels for p in c["panels"]]
    if name == "query":  # a week of days per day: today's partial sum is marked, never joined to the line
        assert "is still in progress, so its sums cover only part of it" in body, body[-1500:]
    page.close()


def test_a_past_range_older_than_the_raw_rows_is_judged_from_the_rollups(browser, base_url, now):
    from tests.browser import chart_panels

    # Noon to 13:00 four days back: inside the backfilled week, older than the raw rows, and never
    # across midnight (the product then writes the end's date too, and this assertion's text differs).
    day = time.strftime("%Y-%m-%d", time.localtime(now - 4 * 86400))
    start, end = f"{day}T12:00", f"{day}T13:00"
    page = open_page(browser, f"{base_url}/?range=custom&start={start}&end={end}", 1, "overview-past-range")
    body = page.inner_text("body")
    assert "never been scraped" not in body
    assert f"over {start.replace('T', ' ')}–{end[-5:]}" in body, body[:1500]
    tiles = page.locator('[data-testid="stHtml"]').first.inner_text()
    throughput = tiles.split("Output tok/s")[1].splitlines()[1]  # the tile's value, under its label
    assert throughput.endswith(" tok/s") and "—" not in throughput, tiles  # figures, not dashes
    assert untruths(chart_panels(page)) == []
    page.close()


def test_unknown_url_parameters_are_named_with_their_fallback(browser, base_url):
    page = open_page(browser, f"{base_url}/?target=nope&range=bogus", 1, "overview-unknown-parameters")
    page.get_by_text("URL parameter target=nope").first.wait_for(timeout=20000)
    body = page.inner_text("body")
    assert "showing demo" in body and "range=bogus" in body and "showing 1h" in body, body[:1500]
    page.close()
