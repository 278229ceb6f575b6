"""The headroom forecast in Chromium: the Overview's line and the Fleet's column (issue 33 item 2).

The dashboard's clock is the wall's, so the history written here ends now: the demo's 14 whole days
growing 5 % a day (tests/test_headroom.py's writer: the simulator's growth knob through the real
parsers, writer and rollups) and the hours of the current day, which the forecast leaves out.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path

import pytest

from tests.browser import CHROMIUM, SCREENSHOTS
from tests.test_headroom import write_history

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"Debian's chromium is not installed at {CHROMIUM}"),
]

# 5.0 clients at the start, 5 % a day: about 9.9 at the end of 14 days, 16 some 10 days later
HISTORY = {"demo": (14, 5.0, 0.05, 0)}


@pytest.fixture(scope="module")
def base_url():
    from tests.browser import streamlit_server

    url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='sweetspot-headroom-')) / 'sweetspot.db'}"
    write_history(url, time.time(), HISTORY)
    with streamlit_server(url) as base:
        yield base


# (url path, charts expected, texts that must be visible)
PAGES = {
    "overview": ("/?target=demo", 1, ["Headroom: at this growth (+", "the peak leaves the sweet spot (16 running, reference) in ~",
                                      "80 % range; peak-hour demand"]),
    "fleet": ("/fleet", 0, ["headroom"]),
}  # fmt: skip


@pytest.mark.parametrize("name", list(PAGES))
def test_the_headroom_in_chromium(browser, base_url, name):
    from tests.browser import new_page, screenshot, wait_rendered

    path, charts, expected = PAGES[name]
    page = new_page(browser)
    page.goto(base_url + path)
    wait_rendered(page, charts)
    for text in expected:  # waits for each (the script may still be streaming elements), fails after 20 s
        page.get_by_text(text).first.wait_for(timeout=20000)
    if name == "fleet":  # the Fleet's table is a canvas grid: its cells are read from its hidden copy for screen readers
        cell = page.locator('[data-testid="stDataFrame"] td[role="gridcell"]', has_text="~").first
        cell.wait_for(state="attached", timeout=20000)
        assert re.fullmatch(r"~\d+ d \(\d+–(\d+|>90)\)", cell.text_content() or ""), cell.text_content()
    screenshot(page, SCREENSHOTS / f"headroom-{name}.png")
    body = page.inner_text("body")
    assert page.locator('[data-testid="stException"]').count() == 0, body[:2000]
    page.close()
