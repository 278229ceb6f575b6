"""Every page of a running dashboard in headless Chromium: key figures shown, no exception, screenshots.

Screenshots land in artifacts/screenshots/ (gitignored; docs/ui.md says so).
"""

from __future__ import annotations

import os

import pytest

from app.ui.charts import HEIGHT
from tests import ui_db
from tests.browser import CHROMIUM, SCREENSHOTS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"Debian's chromium is not installed at {CHROMIUM}"),
]

# (url path and query, charts expected, texts that must be visible)
PAGES = {
    # the demo has a gateway: the TTFT tiles are as clients see them (test_ui_wait_browser.py reads them)
    "overview": ("/", 1, ["TTFT P95 as clients see it · 5m", "at most 180 steps/s: the report's ceiling", "MBU · 5m", "sweet spot 16",
                          "Time to first token", "of 79.7 k tokens",  # the KV tile: "23 %" / "of 79.7 k tokens · warn …"
                          # the SLO tile: the 3 s SLO lies between vLLM's 2.5 and 5 s bounds, whose shares it shows
                          "TTFT SLO attainment as clients see it · 5m", "≤ 3 s · engine alone"]),
    "overview-edge-down": ("/?target=edge", 1, ["No data", "connection refused"]),
    "gpus": ("/gpus", 4, ["Tesla V100-SXM2-32GB", "GB/s (dcgm)", "900 GB/s (config)", " GiB / 32 GiB",
                          # engine-side and measured bandwidth together, in the text and as lines of one chart
                          "Memory traffic per GPU", "(vLLM's estimate)", "average of 8 GPUs", "the engine's estimate is",
                          "measured and vLLM's estimate", "The engine estimates"]),
    "overview-sglang": ("/?target=sglang", 1, ["Retractions · 5m", "of 79.7 k tokens", "Time to first token"]),
    "gpus-sglang": ("/gpus?target=sglang", 4, ["Memory traffic per GPU", "--enable-mfu-metrics"]),
    # the demo's V100s decode AWQ on CUDA cores: the compute roof (934 tok/s) is under the bandwidth roofline,
    # which is drawn as the attainable, labelled so (tests/test_ui_ceiling_browser.py holds the same)
    "operating-point": ("/operating_point", 3, ["Knee at concurrency 16", "Concurrency vs output tok/s",
                                               "attainable: ", "compute roof: ", "Decode speed per request"]),
    "alerts": ("/alerts", 1, ["Firing and pending now", "target_down", "silenced by silence 1", "edge is being rebuilt",
                              "State history"]),
    "targets": ("/targets", 0, ["demo", "edge", "connection refused", "vllm:kv_cache_usage_perc", "engine: SGLang",
                                "sglang:num_retracted_requests_total", "vLLM ≥ 0.32 with --enable-mfu-metrics"]),
    "query": ("/query?canned=ttft_per_day", 1, ["ttft_p95_s", "Download CSV", " rows in "]),
    "query-refused": ("/query?sql=DELETE%20FROM%20samples", 0, ["refused by rule select-only"]),
}


@pytest.fixture(scope="module")
def base_url():
    from tests.browser import streamlit_server

    with streamlit_server(ui_db.shared()) as base:
        yield base


@pytest.mark.parametrize("name", list(PAGES))
def test_page_in_chromium(browser, base_url, name):
    from tests.browser import new_page, screenshot, wait_rendered

    path, charts, expected = PAGES[name]
    page = new_page(browser)
    page.goto(base_url + path)
    wait_rendered(page, charts)
    for text in expected:  # waits for each (the script may still be streaming elements), fails after 20 s
        page.get_by_text(text).first.wait_for(timeout=20000)
    # every URL here is one the product makes: none may be reported as carrying an unknown parameter
    assert "unknown and ignored" not in page.inner_text("body")
    if name.startswith("overview"):  # one chart element holding the eight panels, each drawn at full height
        chart = page.locator('[data-testid="stVegaLiteChart"]').first
        assert chart.bounding_box()["height"] >= 8 * HEIGHT
        # and no wider than its element: an overflow would push the newest data off the page's edge
        drawing = chart.locator("svg.marks, canvas").first.bounding_box()["width"]
        assert drawing <= chart.bounding_box()["width"] + 1, (drawing, chart.bounding_box()["width"])
    if name == "overview":
        page.get_by_text("Download the charts' data (CSV)").first.wait_for(timeout=20000)
    screenshot(page, SCREENSHOTS / f"{name}.png")
    assert page.locator('[data-testid="stException"]').count() == 0, page.inner_text("body")[:2000]
    page.close()


@pytest.mark.parametrize("url", ["http://192.0.2.1/", "http://example.com/"])
def test_browser_reaches_nothing_but_loopback(browser, base_url, url):
    from tests.browser import new_page

    page = new_page(browser)
    with pytest.raises(Exception, match="ERR_PROXY_CONNECTION_FAILED|ERR_NAME_NOT_RESOLVED"):
        page.goto(url, timeout=10000)
    page.close()
    page = new_page(browser)  # while loopback answers as usual
    assert page.goto(base_url + "/_stcore/health").status == 200
    page.close()
