"""`python -m app run` on an empty database: the dashboard answers while the demo's history is still
being written, says how far it has come on a line of its own, and drops that line once the history
is whole. Headless Chromium; the history is two days instead of seven (a test may scale the times,
not the order of events)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.browser import CHROMIUM, SCREENSHOTS, new_page, screenshot, wait_rendered
from tests.support.ports import free_port
from tests.test_demo import ROOT, wait_for_line

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"Debian's chromium is not installed at {CHROMIUM}"),
]


def healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def test_the_dashboard_answers_while_the_history_fills_in(browser, tmp_path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app", "run", "--db", f"sqlite:///{tmp_path}/run.db", "--port",
                             str(port), "--backfill", "2d"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        lines = wait_for_line(proc, "Ctrl-C stops everything", timeout=120)
        deadline = time.time() + 120
        while not healthy(base) and time.time() < deadline:
            time.sleep(0.2)
        page = new_page(browser)
        page.goto(base)
        wait_rendered(page, 1, timeout_ms=120000)  # the Overview's chart: live minutes and the days written
        page.get_by_text("History filling").wait_for(timeout=60000)
        notice = page.get_by_text("History filling").inner_text()
        assert " of 2 days" in notice and "the charts show the days written so far and the live minutes" in notice
        assert "Headroom: waits for the week's history" in page.inner_text("body")  # no trend on a part of the week
        screenshot(page, SCREENSHOTS / "overview-history-filling.png")
        # the page answered before the history was whole: the line that says it is whole comes after
        lines += wait_for_line(proc, "of simulated history written, rolled up and judged", timeout=600)
        page.get_by_text("History filling").wait_for(state="detached", timeout=60000)
        # the Overview's own fragment reruns every ui.refresh_s: then the headroom trend is judged again
        page.wait_for_function("() => !document.body.innerText.includes('Headroom: waits')", timeout=60000)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    text = "".join(lines)
    assert text.index("dashboard: http://") < text.index("Ctrl-C stops everything") < text.index("history: 2 days")
