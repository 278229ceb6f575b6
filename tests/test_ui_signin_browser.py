"""The password gate in headless Chromium against a real dashboard: signing in leads to the page and
URL parameters asked for, and password guesses are limited per client address, new sessions included."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest

from app.ui.guesses import FREE_GUESSES, LOCK_S
from tests import ui_db
from tests.browser import CHROMIUM, SETTLED_JS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"Debian's chromium is not installed at {CHROMIUM}"),
]
PASSWORD = "right-pw-1"


@pytest.fixture
def base_url() -> Iterator[str]:
    from tests.browser import streamlit_server

    # a server per test: the guess count is the dashboard process's, by client address
    with streamlit_server(ui_db.shared(), {"SWEETSPOT_UI_PASSWORD": PASSWORD}) as base:
        yield base


def _try(page, password: str, n: int) -> str:
    """Submit ``password`` as this session's try number ``n``; the message that answers it."""
    page.get_by_label("Password", exact=True).fill(password)
    page.get_by_role("button", name="Sign in").click()
    answer = page.get_by_text(f"(try {n})").first
    answer.wait_for(timeout=30000)
    return answer.inner_text()


def _open_gate(browser, url: str):
    from tests.browser import new_page

    page = new_page(browser)
    page.goto(url)
    page.get_by_label("Password", exact=True).wait_for(timeout=30000)
    return page


def test_signing_in_keeps_the_page_and_its_parameters(browser, base_url) -> None:
    page = _open_gate(browser, f"{base_url}/gpus?target=sglang&range=6h&window=15m")
    assert _try(page, "not-it", 1).startswith("Wrong password")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_text("Memory traffic per GPU").first.wait_for(timeout=45000)  # the GPUs page
    page.wait_for_function(SETTLED_JS, timeout=30000)
    url = urlsplit(page.url)
    assert url.path == "/gpus", page.url
    assert {k: v[0] for k, v in parse_qs(url.query).items()} == {"target": "sglang", "range": "6h", "window": "15m"}
    assert page.locator('[data-testid="stException"]').count() == 0
    page.close()


def test_password_guesses_are_limited_per_client(browser, base_url) -> None:
    page = _open_gate(browser, base_url + "/")
    began, answers = time.monotonic(), []
    for n in range(1, 31):  # 30 guesses as fast as the browser sends them
        answers.append(_try(page, f"guess-{n}", n))
    took = time.monotonic() - began
    assert took < LOCK_S, f"30 tries took {took:.0f} s, longer than the lock: the test cannot tell"
    checked = [a for a in answers if a.startswith("Wrong password")]
    assert len(checked) == FREE_GUESSES, answers
    assert all(a.startswith("Too many wrong passwords") for a in answers[FREE_GUESSES:]), answers
    # during the wait even the right password is refused, and a new session is no way around it
    assert _try(page, PASSWORD, 31).startswith("Too many wrong passwords")
    page.close()
    page = _open_gate(browser, base_url + "/")
    assert _try(page, PASSWORD, 1).startswith("Too many wrong passwords")
    assert page.get_by_text("Memory traffic per GPU").count() == 0
    page.close()


def _guess_from(browser, url: str, forwarded_for: str, password: str) -> str:
    """One guess in a fresh page whose requests (the websocket's included) say X-Forwarded-For."""
    from tests.browser import new_page

    page = new_page(browser)
    page.set_extra_http_headers({"X-Forwarded-For": forwarded_for})
    page.goto(url)
    page.get_by_label("Password", exact=True).wait_for(timeout=30000)
    answer = _try(page, password, 1)
    page.close()
    return answer


def _rotating_guesses(browser, base_url: str) -> list[str]:
    return [_guess_from(browser, base_url + "/", f"203.0.113.{n}", f"guess-{n}") for n in range(1, FREE_GUESSES + 3)]


def test_a_forwarded_for_header_buys_no_guesses_without_a_trusted_proxy(browser, base_url) -> None:
    answers = _rotating_guesses(browser, base_url)
    assert all(a.startswith("Wrong password") for a in answers[:FREE_GUESSES]), answers
    assert all(a.startswith("Too many wrong passwords") for a in answers[FREE_GUESSES:]), answers


def test_behind_a_trusted_proxy_each_forwarded_visitor_is_counted_apart(browser) -> None:
    from tests.browser import streamlit_server

    # ui.trusted_proxies = ["127.0.0.1"]: the proxy (here the test, on loopback) names the visitor
    with streamlit_server(ui_db.shared(), {"SWEETSPOT_UI_PASSWORD": PASSWORD, "FORWARDED_ALLOW_IPS": "127.0.0.1"}) as base:
        answers = _rotating_guesses(browser, base)
    assert all(a.startswith("Wrong password") for a in answers), answers  # each address its own allowance
