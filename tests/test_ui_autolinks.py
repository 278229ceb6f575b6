"""URLs, ``www.`` hosts and e-mail addresses inside names are plain text on the Targets, Alerts and
Plan pages (the sidebar's picker included): Streamlit's Markdown (GitHub's autolink literals) would make each a link; headless Chromium
finds none, and every name reads as typed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from app.collection import CollectionService
from app.loader import load_settings
from core.text import markdown
from tests.browser import CHROMIUM
from tests.support.http_server import serving
from tests.test_ui_hostile_names import Attacker

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"Debian's chromium is not installed at {CHROMIUM}"),
]
MODEL = "see www.evil-model.example or https://evil-model.example/x?a=1 or ask ops@evil-model.example"
TARGET = "prod WWW.evil-target.example mail root@evil-target.example"


def test_link_shapes_are_escaped_wherever_they_are() -> None:
    for text in ["www.a.b", "x www.a.b", "http://a.b", "ftp://a.b/c", "mailto:x@y.z", "x@y.z", "Www.a.b"]:
        shown = markdown(text)
        assert shown == f"`{text}`", shown  # a code span: GFM makes no link inside one


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory):
    from tests.browser import streamlit_server

    folder: Path = tmp_path_factory.mktemp("ui-autolinks")
    attacker = Attacker()
    attacker.model = MODEL
    with serving(attacker.handler()) as base:
        config = folder / "links.toml"
        config.write_text(f"""
db_url = "sqlite:///{folder}/ui.db"
[[alerts.rules]]
name = "preemptions"
per_model = true
[[targets]]
name = "{TARGET}"
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
            yield ui


@pytest.mark.parametrize(("path", "texts"), [
    ("/targets", [TARGET, MODEL]),
    ("/alerts", [f"{TARGET} / model {MODEL}"]),
    ("/plan", [TARGET]),  # the Plan page's title and its refusal name the target
])  # fmt: skip
def test_names_holding_links_are_plain_text(browser, dashboard, path: str, texts: list[str]) -> None:
    from tests.browser import new_page

    page = new_page(browser)
    page.goto(dashboard + path)
    for text in texts:
        page.get_by_text(text, exact=False).first.wait_for(timeout=30000)
    assert page.locator('[data-testid="stException"]').count() == 0
    links = page.eval_on_selector_all("a", "links => links.map(a => [a.href, a.parentElement.textContent.slice(0, 300)])")
    outside = [link for link in links if "evil" in link[0] and not link[0].startswith(dashboard)]
    assert not outside, outside
    page.close()
