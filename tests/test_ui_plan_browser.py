"""The Plan page in Chromium (app/ui/views/plan.py, docs/plan.md "Capacity what-if"): today's replicas and
the other deployments for ``demo`` (the reference inputs, its model's shape: both roofs with prefill), the one
replica figure of the headline and the table, each row's evidence, a demand
typed in, another GPU named, and the refusal that names the fix for ``bare`` (no ceiling inputs).

The database is the ceiling test's (tests/test_ui_ceiling_browser.py ``fill``): an hour of the
simulator's history collected by the real parsers and writer into a real SQLite file."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

from tests.browser import CHROMIUM, SCREENSHOTS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"Debian's chromium is not installed at {CHROMIUM}"),
]


@pytest.fixture(scope="module")
def served():
    from tests.browser import streamlit_server
    from tests.test_ui_ceiling_browser import fill

    url = fill(Path(tempfile.mkdtemp(prefix="sweetspot-plan-")) / "sweetspot.db", time.time())
    with streamlit_server(url) as base:
        yield base, url


def _expected(url: str, tps: float | None = None):
    """What ``python -m app plan demo`` computes on the same database: the page must show the same."""
    from app import plan
    from app.loader import load_settings
    from app.ui.reads import floor
    from db.queries import Reader

    settings = load_settings(None, {"SWEETSPOT_DB_URL": url})
    # the page plans at its clock floored to 10 minutes (app/ui/views/plan.py): the same minutes here
    return plan.plan(Reader(url), settings, "demo", floor(time.time(), 600.0), tps=tps)


def test_the_plan_of_demo(browser, served):
    from app.plan import tok_s_text
    from tests.browser import new_page, screenshot, wait_rendered

    base, url = served
    expected = _expected(url)
    page = new_page(browser)
    page.goto(base + "/plan?target=demo")
    wait_rendered(page, 1)
    for text in ("Replicas of today's deployment", "tok/s a replica holds", "Compute roof (prefill counted)",
                 "the peak hour of the last 7 days", "fitted on", "one replica holds it: ", "production minutes", "efficiencies from",
                 "Today's deployment: the fitted step model and its range", tok_s_text(expected.today.predicted),
                 *(o.label for o in expected.others), *(o.evidence for o in expected.others)):  # fmt: skip
        page.get_by_text(text).first.wait_for(timeout=20000)
    screenshot(page, SCREENSHOTS / "plan-demo.png")
    # a demand typed in: 5,000 output tok/s needs more replicas than the hour's peak
    page.get_by_text("output tok/s", exact=True).first.click()
    box = page.get_by_role("spinbutton", name="output tok/s to hold")
    box.fill("5000")
    box.press("Enter")
    page.get_by_text("5,000 output tok/s").first.wait_for(timeout=20000)
    wait_rendered(page, 1)
    from app.plan import replicas_text

    need = replicas_text(_expected(url, 5000.0).today)  # the replicas and their range, as the command prints them
    page.get_by_text(need, exact=True).first.wait_for(timeout=20000)
    assert page.locator('[data-testid="stException"]').count() == 0
    page.close()


def test_a_target_without_ceiling_inputs_is_refused_with_the_fix(browser, served):
    from tests.browser import new_page, wait_rendered

    base, _ = served
    page = new_page(browser)
    page.goto(base + "/plan?target=bare")
    wait_rendered(page, 0)
    page.get_by_text("bare has no ceiling inputs, so no roofline to scale").first.wait_for(timeout=20000)
    body = page.inner_text("body")
    assert "targets[].ceiling.weight_gb and tensor_parallel" in body
    assert "Replicas of today's deployment" not in body and page.locator('[data-testid="stException"]').count() == 0
    page.close()
