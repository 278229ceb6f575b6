"""A header value or bearer token with a line break (tokens read from files end with one) never
reaches an error text: refused at load naming the setting, a token's surrounding whitespace
stripped, and at the mechanism (the fetcher, the webhook sender) an exception that quotes a header
is never stored, shown or sent, whatever spelling of the value a library quotes."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.loader import load_settings
from app.notify.hooks import HookError, Sender
from app.notify.outbox import Notification
from collectors.fetch import Fetcher
from core.channels import webhook
from core.errors import ScrapeError
from core.settings import ConfigError, HttpSettings, WebhookSettings
from tests.support.http_server import serve

ROOT = Path(__file__).resolve().parent.parent
SECRET = "s3cr3tV4lue"
# What h11/httpx refuse in a header value, or a file's line end: each around the secret
_BAD = st.sampled_from(["\n", "\r\n", "\r", "\x00", "\x0b", " ", "\t", "\x1b", "\u2028", "é"])
_VALUES = st.tuples(st.sampled_from(["", "Bearer "]), _BAD, st.sampled_from(["before", "after", "inside"])).map(
    lambda t: {"before": t[1] + SECRET, "after": SECRET + t[1] + "x", "inside": SECRET[:5] + t[1] + SECRET[5:]}[t[2]]
)


def _inner_spaces_only(value: str) -> bool:
    return value == value.strip() and value.replace(" ", "").isalnum() and value.isascii()


def _config(tmp_path: Path, header: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text('[[targets]]\nname = "a"\nvllm_url = "http://127.0.0.1:1/metrics"\n'
                    f'http = {{ headers = {{ "X-Api-Key" = "{header}" }}, bearer_token_env = "TOK" }}\n')
    return path


def _escape_toml(value: str) -> str:
    return "".join(c if c.isalnum() or c in " -" else f"\\u{ord(c):04x}" for c in value)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_VALUES)
def test_a_header_that_cannot_be_sent_is_refused_at_load_naming_it(tmp_path, value: str) -> None:
    if _inner_spaces_only(value):
        return  # a space inside a value is HTTP (Authorization: Bearer x)
    with pytest.raises(ConfigError) as caught:
        load_settings(_config(tmp_path, _escape_toml(value)), {"TOK": "tok"})
    assert "targets[0].http.headers.X-Api-Key" in str(caught.value)
    assert SECRET[:5] not in str(caught.value) and SECRET[5:] not in str(caught.value)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_VALUES)
def test_a_token_is_stripped_or_refused_naming_its_variable(tmp_path, value: str) -> None:
    config = _config(tmp_path, "fine")
    stripped = value.strip()
    if _inner_spaces_only(value):
        assert load_settings(config, {"TOK": value}).targets[0].http.bearer_token == stripped
        return
    if stripped == SECRET:  # whitespace around a token: a file's line end, taken off
        assert load_settings(config, {"TOK": value}).targets[0].http.bearer_token == SECRET
        return
    with pytest.raises(ConfigError) as caught:
        load_settings(config, {"TOK": value})
    assert "targets[0].http.bearer_token_env" in str(caught.value) and "TOK" in str(caught.value)
    assert SECRET[:5] not in str(caught.value) and SECRET[5:] not in str(caught.value)


def test_config_as_a_process_takes_a_token_file_s_line_end_and_refuses_a_header_naming_it(tmp_path) -> None:
    env = {**os.environ, "TOK": SECRET + "\n", "SWEETSPOT_DB_URL": f"sqlite:///{tmp_path}/x.db"}
    ok = subprocess.run([sys.executable, "-m", "app", "--config", str(_config(tmp_path, "fine")), "config"],
                        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([sys.executable, "-m", "app", "--config", str(_config(tmp_path, SECRET + "\\r\\nX-Evil: 1")), "config"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "targets[0].http.headers.X-Api-Key" in bad.stderr
    assert SECRET not in bad.stdout + bad.stderr


@pytest.fixture(scope="module")
def page() -> Iterator[str]:
    with serve({"/metrics": (200, "text/plain", "x 1\n")}) as base:
        yield base + "/metrics"


@pytest.fixture(scope="module")
def fetcher() -> Iterator[Fetcher]:
    fetcher = Fetcher()
    yield fetcher
    fetcher.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_VALUES, where=st.sampled_from(["header", "token"]))
def test_the_fetcher_never_puts_a_header_value_in_a_scrape_error(page, fetcher, value: str, where: str) -> None:
    """Settings built in code skip the load's check: the fetcher's own message holds no spelling of it."""
    http = HttpSettings(headers={"X-Api-Key": value}) if where == "header" else HttpSettings(bearer_token=value)
    try:
        fetcher.fetch(page, 2.0, http, "check targets[].vllm_url")
    except ScrapeError as exc:
        text = f"{exc} {exc.hint}"
        assert SECRET[:5] not in text and SECRET[5:] not in text, text
        assert "not shown" in text
    # a value the HTTP library sends as it is (a tab inside, say) is no error at all


def _notification() -> Notification:
    return Notification(1, "webhook: g", "firing", "pending", ("x",), "s", "b", "", {}, (), 0, 0, 0, None, None, None, "webhook")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_VALUES)
def test_the_webhook_never_puts_its_header_in_the_notification_log(page, value: str) -> None:
    hook = WebhookSettings(url=page, http=dataclasses.replace(HttpSettings(), headers={"X-Hook": value}))
    try:
        sender = Sender(webhook.CHANNEL, hook, "")
    except UnicodeEncodeError as exc:  # httpx encodes a client's headers when it is made: says which character only
        assert SECRET[:5] not in str(exc) and SECRET[5:] not in str(exc)
        return
    try:
        sender.send(_notification(), 0.0)
    except HookError as exc:
        text = f"{exc} {exc.hint}"
        assert SECRET[:5] not in text and SECRET[5:] not in text, text
    finally:
        sender.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_VALUES)
def test_the_prometheus_client_never_puts_a_header_in_its_error(page, value: str) -> None:
    from collectors.prometheus import PrometheusClient
    from core.errors import SweetspotError
    from core.settings import PrometheusSettings

    source = PrometheusSettings(url=page.rsplit("/metrics", 1)[0], http=HttpSettings(headers={"X-Scope-OrgID": value}))
    try:
        client = PrometheusClient(source, 2.0)
    except UnicodeEncodeError as exc:
        assert SECRET[:5] not in str(exc) and SECRET[5:] not in str(exc)
        return
    try:
        client.query("up")
    except SweetspotError as exc:
        text = f"{exc} {exc.hint}"
        assert SECRET[:5] not in text and SECRET[5:] not in text, text
    finally:
        client.close()
