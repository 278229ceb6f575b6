"""Nothing leaves the machine: every page of the dashboard asks its own host only (docs/security.md).

Chromium records every request of every page (Playwright's request events, for the page and
whatever it starts: scripts, fonts, images, the favicon, workers) and every URL the page's DOM
points a fetch at (``src``, ``href`` of links and styles, the favicon's ``link``). Requests to any
other host are blocked in the browser itself (tests/browser.py: names resolve to nothing, other
addresses go to a dead proxy), so the test fails on them without any of them ever being sent.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import pytest

from tests import ui_db
from tests.browser import CHROMIUM

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"Debian's chromium is not installed at {CHROMIUM}"),
]

# Every page of app/ui/main.py (url path, charts it draws once rendered), and the Query page with a chart.
PAGES = (("/", 1), ("/fleet", 0), ("/gpus", 4), ("/operating_point", 3), ("/plan", 1), ("/alerts", 1),
         ("/query?canned=ttft_per_day", 1), ("/targets", 0))  # fmt: skip

# The URLs a page's DOM asks the browser to load: every src, a link's href (styles, icons, preloads).
DOM_URLS_JS = """() => [
  ...[...document.querySelectorAll('[src]')].map(e => e.src),
  ...[...document.querySelectorAll('link[href]')].map(e => e.href),
  ...[...document.querySelectorAll('image[href], use[href]')].map(e => e.href && e.href.baseVal || ''),
].filter(Boolean)"""


def _outside(urls: list[str], base: str) -> list[str]:
    """The URLs that would reach a host other than the dashboard's own (data: and blob: stay in the page)."""
    own = urlsplit(base).netloc
    return sorted({u for u in urls if urlsplit(u).scheme not in ("data", "blob", "about") and urlsplit(u).netloc != own})


def _visit(browser, base: str, path: str, charts: int) -> tuple[list[str], list[str]]:
    from tests.browser import wait_rendered

    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    asked: list[str] = []
    context.on("request", lambda request: asked.append(request.url))
    page = context.new_page()
    page.goto(base + path)
    wait_rendered(page, charts)
    page.wait_for_function("() => !!document.querySelector(\"link[rel='shortcut icon']\")", timeout=20000)
    in_dom = list(page.evaluate(DOM_URLS_JS))
    context.close()
    return asked, in_dom


@pytest.fixture(scope="module")
def base_url():
    from tests.browser import streamlit_server

    with streamlit_server(ui_db.shared()) as base:
        yield base


@pytest.mark.parametrize(("path", "charts"), PAGES)
def test_every_request_of_a_page_goes_to_the_dashboard(browser, base_url, path, charts):
    asked, in_dom = _visit(browser, base_url, path, charts)
    assert any(urlsplit(u).netloc == urlsplit(base_url).netloc for u in asked), asked  # the recording works
    assert _outside(asked, base_url) == [], f"{path} asked another host"
    assert _outside(in_dom, base_url) == [], f"{path} points at another host"


def test_the_welcome_page_asks_nothing_outside(browser, tmp_path):
    from tests.browser import streamlit_server

    with streamlit_server(ui_db.empty(tmp_path / "empty.db")) as base:
        asked, in_dom = _visit(browser, base, "/", 0)
    assert _outside(asked + in_dom, base) == []


def test_the_check_sees_a_page_icon_from_a_font_cdn():
    # what ":material/speed:" as page_icon did: Streamlit's favicon link to fonts.gstatic.com
    cdn = "https://fonts.gstatic.com/s/i/short-term/release/materialsymbolsrounded/speed/default/24px.svg"
    base = "http://127.0.0.1:8501"
    assert _outside([base + "/static/js/index.js", cdn, "data:image/svg+xml;base64,AA=="], base) == [cdn]


def test_the_page_icon_is_a_file_of_the_dashboard():
    # A Material or emoji short code is fetched by the browser from a CDN (Streamlit's favicon code)
    from pathlib import Path

    main = (Path(__file__).parent.parent / "app" / "ui" / "main.py").read_text()
    assert 'page_icon=":' not in main and "page_icon=str(ICON)" in main
    assert (Path(__file__).parent.parent / "app" / "ui" / "assets" / "icon.svg").read_text().lstrip().startswith("<svg")
