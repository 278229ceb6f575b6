"""Names from outside are plain text in the dashboard: a model and a target named like Markdown images
pointing at a loopback server, collected from a real ``/metrics`` page, shown in headless Chromium
on every page that names them (sidebar, headers, Targets, notices, alert cards): the browser
fetches nothing from that server, and the names read as typed."""

from __future__ import annotations

import csv
import io
import os
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import quote

import pytest

from app.collection import CollectionService
from app.loader import load_settings
from tests.browser import CHROMIUM
from tests.support.http_server import serving

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"Debian's chromium is not installed at {CHROMIUM}"),
]
V1 = (Path(__file__).parent / "data" / "vllm_v1.txt").read_text()
MODEL_IN_FIXTURE = "meta-llama/Llama-3.3-70B-Instruct-AWQ"


class Attacker:
    """The loopback server: serves the hostile /metrics page and records every other path asked for."""

    def __init__(self) -> None:
        self.preemptions = 3.0
        self.fetched: list[str] = []
        self.model = ""

    def page(self) -> str:
        text = V1.replace(MODEL_IN_FIXTURE, self.model)
        metric = f'vllm:num_preemptions_total{{engine="0",model_name="{self.model}"}} '
        return text.replace(metric + "3.0", metric + str(self.preemptions))

    def handler(self) -> type[BaseHTTPRequestHandler]:
        attacker = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/metrics":
                    attacker.fetched.append(self.path)
                body = attacker.page().encode() if self.path == "/metrics" else b"\x89PNG\r\n\x1a\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """(dashboard base URL, attacker, model name, target name) over a database the real collector and
    evaluator wrote from the attacker's page, with a per-model alert firing."""
    from tests.browser import streamlit_server

    folder = tmp_path_factory.mktemp("ui-hostile")
    attacker = Attacker()
    with serving(attacker.handler()) as base:
        attacker.model = f"![m]({base}/model.png) **bold** :red[red]"
        target = f"![t]({base}/target.png)"
        config = folder / "hostile.toml"
        config.write_text(f"""
db_url = "sqlite:///{folder}/ui.db"
[[alerts.rules]]
name = "preemptions"
per_model = true
[[targets]]
name = "{target}"
vllm_url = "{base}/metrics"
""")
        settings = load_settings(config, {})
        now = [time.time() - 60]
        service = CollectionService(settings, clock=lambda: now[0])
        try:
            for step in range(4):
                now[0] += 10
                attacker.preemptions = 3.0 + 4 * step
                service.collect_once(describe=False)
                service.evaluator.run()
        finally:
            service.close()
        with streamlit_server(settings.db_url) as ui:
            yield ui, attacker, attacker.model, target


def test_names_from_outside_are_plain_text_and_fetch_nothing(browser, hostile):
    from tests.browser import new_page

    ui, attacker, model, target = hostile
    expected = {
        "/": [f"Overview · {target}"],  # the header (the sidebar offers the names in a plain-text drop-down)
        f"/?model={quote(model, safe='')}": [f"Overview · {target} · {model}"],
        "/targets": [target, model],
        "/alerts": [f"{target} / model {model}", "preemptions"],  # the per-model card names its model
        f"/?target={quote(attacker.model, safe='')}": [f"target={model}"],  # the notice quotes the URL's value
    }
    page = new_page(browser)
    for path, texts in expected.items():
        page.goto(ui + path)
        for text in texts:
            page.get_by_text(text, exact=False).first.wait_for(timeout=30000)
        assert page.locator('[data-testid="stException"]').count() == 0, page.inner_text("body")[:2000]
        # an image or a link made of a name would be an element: there is none
        assert page.locator(f'img[src*="{attacker.model.split("(")[1].split("/model")[0]}"]').count() == 0
    page.close()
    assert attacker.fetched == []


def test_a_shared_link_to_a_one_step_query_stops_at_the_limit(browser, hostile):
    from tests.browser import new_page

    ui = hostile[0]
    page = new_page(browser)
    started = time.monotonic()
    page.goto(ui + "/query?sql=" + quote("SELECT printf('%.*c', 2147483647, 'x')", safe=""))
    page.get_by_text("refused by rule time-limit: stopped after 2 s").first.wait_for(timeout=30000)
    # 2 s limit, 0.5 s grace, the query process's start and the page's own load on a busy machine
    # (the function alone ran 31 s before it was bounded)
    assert time.monotonic() - started < 20
    page.close()


def test_the_query_pages_csv_neutralises_formula_cells(browser, hostile):
    from tests.browser import new_page

    ui, _, model, target = hostile
    sql = "SELECT '=cmd|'' /C calc''!A0' AS f, '@SUM(A1:A9)' AS g, -3 AS n, target FROM target_info"
    page = new_page(browser)
    page.goto(ui + "/query?sql=" + quote(sql, safe=""))
    button = page.get_by_text("Download CSV").first
    button.wait_for(timeout=30000)
    with page.expect_download() as download:
        button.click()
    rows = list(csv.reader(io.StringIO(Path(download.value.path()).read_text(), newline="")))
    assert rows == [["f", "g", "n", "target"], ["'=cmd|' /C calc'!A0", "'@SUM(A1:A9)", "-3", target]]
    page.close()


def test_a_shared_links_error_quoting_a_name_fetches_nothing(browser, hostile):
    from tests.browser import new_page

    ui, attacker, model, _ = hostile
    page = new_page(browser)
    page.goto(ui + "/query?sql=" + quote(f'SELECT * FROM "{model}"', safe=""))
    page.get_by_text(f"no such table: {model}").first.wait_for(timeout=30000)
    page.close()
    assert attacker.fetched == []


@pytest.mark.parametrize("path", [
    "/query?sql=" + quote("SELECT '=cmd|'' /C calc''!A0' AS f, target FROM target_info", safe=""),
    "/fleet",
])  # fmt: skip
def test_the_tables_toolbar_offers_no_csv_download(browser, hostile, path):
    """The toolbar's export writes cells as they are (a formula run by the spreadsheet): it is off
    (client.disableDataExport); the pages' own Download CSV neutralises formula cells instead."""
    from tests.browser import new_page

    page = new_page(browser)
    page.goto(hostile[0] + path)
    table = page.locator('[data-testid="stDataFrame"]').first
    table.wait_for(timeout=30000)
    table.hover()
    toolbar = page.locator('[data-testid="stElementToolbar"]').first
    toolbar.wait_for(timeout=10000)
    labels = toolbar.locator("button").evaluate_all("bs => bs.map(b => b.getAttribute('aria-label') || b.title || b.innerText)")
    assert labels, "the toolbar showed no button: the test cannot tell"
    assert not [label for label in labels if "download" in label.lower() or "csv" in label.lower()], labels
    page.close()
