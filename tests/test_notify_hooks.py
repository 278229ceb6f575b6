"""Alertmanager and webhook notifications through the outbox: Debian's real Alertmanager and a local
HTTP sink on 127.0.0.1, a real database."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from sqlalchemy import select

from app.alerts.model import RESOLVED
from app.loader import load_settings
from app.notify.notifier import Notifier
from core.settings import Settings
from db import schema
from db.engine import open_engine
from tests.alertmanager_server import AlertmanagerServer
from tests.notify_helpers import T0, state, write_states
from tests.support.http_server import serving


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Sink:
    """Records every POST; answers each with the next scripted status (200 once they run out);
    a status of 0 answers nothing for ``stall_s`` (a timeout)."""

    def __init__(self, *statuses: int, stall_s: float = 1.0) -> None:
        self.statuses, self.stall_s = list(statuses), stall_s
        self.requests: list[tuple[dict[str, str], Any]] = []
        self.lock = threading.Lock()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with sink.lock:
                    sink.requests.append((dict(self.headers), body))
                    status = sink.statuses.pop(0) if sink.statuses else 200
                if status == 0:
                    time.sleep(sink.stall_s)
                    status = 200
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a client that gave up
                    self.send_response(status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


@pytest.fixture
def engine(tmp_path):
    engine = open_engine(f"sqlite:///{tmp_path}/hooks.db")
    yield engine
    engine.dispose()


def settings(tmp_path, table: str, url: str, extra: str = "", environ: dict[str, str] | None = None):
    path = tmp_path / "hooks.toml"
    path.write_text(f"""
[alerts.email]
dashboard_url = "http://dash.example.test:8501"

[alerts.{table}]
url = "{url}"
retry_initial_s = "10s"
timeout_s = "0.5s"
{extra}
""")
    return load_settings(path, environ or {})


def rows(engine) -> list[dict[str, Any]]:
    n = schema.notifications
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(select(n).order_by(n.c.id)).mappings()]


WEBHOOK = """group_wait_s = "0s"
http = { headers = { "X-Team" = "serving" }, bearer_token_env = "HOOK_TOKEN" }
"""


def test_the_webhook_gets_alertmanagers_body_with_a_slack_text_and_the_token(engine, tmp_path):
    sink, clock = Sink(), Clock(T0 + 1)
    with serving(sink.handler()) as base:
        cfg = settings(tmp_path, "webhook", base + "/hook", WEBHOOK, {"HOOK_TOKEN": "s3cret"})
        notifier = Notifier(engine, cfg, clock)
        write_states(engine, state("preemptions", summary="preemptions over 5m 12 > 0 <@here>"))
        assert notifier.run_once() == "1 queued, 1 sent, 0 failed"
        clock.now += 60
        assert notifier.run_once() == "0 queued, 0 sent, 0 failed"  # no repeat before repeat_interval
        write_states(engine, state("preemptions", status=RESOLVED, resolved_at=T0 + 400))
        clock.now = T0 + 400 + 300
        assert notifier.run_once() == "1 queued, 1 sent, 0 failed"
        notifier.close()
    (headers, firing), (_, resolved) = sink.requests
    assert headers["Authorization"] == "Bearer s3cret" and headers["X-Team"] == "serving"
    assert firing["status"] == "firing" and firing["version"] == "4"
    (alert,) = firing["alerts"]
    assert alert["labels"] == {"alertname": "preemptions", "severity": "critical", "target": "prod-70b"}
    assert alert["annotations"]["recommendation"] == "lower --max-num-seqs"
    assert alert["generatorURL"].startswith("http://dash.example.test:8501/?target=prod-70b&range=custom")
    assert firing["text"].startswith("[FIRING:1] prod-70b: preemptions\n- preemptions (critical) on prod-70b")
    assert "&lt;@here&gt;" in firing["text"]  # Slack markup in a value is escaped, never a mention
    assert resolved["status"] == "resolved" and resolved["alerts"][0]["status"] == "resolved"
    assert resolved["alerts"][0]["endsAt"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0 + 400))
    assert [(r["channel"], r["status"]) for r in rows(engine)] == [("webhook", "sent"), ("webhook", "sent")]
    # a webhook's path is often its secret (Slack's is): the outbox keeps its origin only
    assert {json.loads(r["recipients"])[0] for r in rows(engine)} == {base + "/…"}


@pytest.mark.parametrize("failure, error", [(500, "answered HTTP 500"), (0, "did not answer within 0.5 s")])
def test_a_500_and_a_timeout_are_retried_with_backoff(engine, tmp_path, failure, error):
    sink, clock = Sink(failure, failure), Clock(T0 + 1)
    with serving(sink.handler()) as base:
        notifier = Notifier(engine, settings(tmp_path, "webhook", base, 'group_wait_s = "0s"'), clock)
        write_states(engine, state("preemptions"))
        assert notifier.run_once() == "1 queued, 0 sent, 1 failed"
        (row,) = rows(engine)
        assert row["status"] == "queued" and error in row["last_error"] and row["due_at"] == T0 + 11
        clock.now += 5
        assert notifier.run_once() == "0 queued, 0 sent, 0 failed"  # not due yet
        clock.now = T0 + 11
        assert notifier.run_once() == "0 queued, 0 sent, 1 failed"
        assert rows(engine)[0]["due_at"] == T0 + 11 + 20  # doubled
        clock.now = T0 + 31
        assert notifier.run_once() == "0 queued, 1 sent, 0 failed"
        notifier.close()
    (row,) = rows(engine)
    assert row["status"] == "sent" and row["attempts"] == 3
    assert notifier.delivered == {("webhook", "failed"): 2, ("webhook", "sent"): 1}


@pytest.mark.parametrize("status, hint", [(400, "alerts.webhook.url"), (401, "alerts.webhook.http.bearer_token_env")])
def test_a_4xx_is_a_clear_error_and_not_retried(engine, tmp_path, status, hint):
    sink, clock = Sink(status), Clock(T0 + 1)
    with serving(sink.handler()) as base:
        notifier = Notifier(engine, settings(tmp_path, "webhook", base, 'group_wait_s = "0s"'), clock)
        write_states(engine, state("preemptions"))
        assert notifier.run_once() == "1 queued, 0 sent, 1 failed"
        clock.now += 3600
        notifier.run_once()
        notifier.close()
    (row,) = rows(engine)
    assert row["status"] == "failed" and row["attempts"] == 1 and len(sink.requests) == 1
    assert f"refused the notification: HTTP {status} ok" in row["last_error"] and hint in row["last_error"]
    assert "not retried" in row["last_error"]


def test_a_bearer_token_variable_that_is_not_set_stops_the_command(tmp_path):
    from core.settings import ConfigError

    with pytest.raises(ConfigError, match="alerts.webhook.http.bearer_token_env: the environment variable HOOK_TOKEN is not set"):
        settings(tmp_path, "webhook", "http://127.0.0.1:9/hook", 'http = { bearer_token_env = "HOOK_TOKEN" }')


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory):
    server = AlertmanagerServer(tmp_path_factory.mktemp("am"))
    yield server
    server.stop()


def _ours(server: AlertmanagerServer, rule: str) -> list[dict[str, Any]]:
    return [a for a in server.alerts() if a["labels"].get("alertname") == rule]


def test_an_alert_reaches_alertmanager_as_prometheus_sends_it_and_resolves(engine, tmp_path, alertmanager):
    now = int(time.time())  # Alertmanager judges startsAt/endsAt by its own clock
    clock = Clock(now)
    notifier = Notifier(engine, settings(tmp_path, "alertmanager", alertmanager.url), clock)
    write_states(engine, state("kv_cache", target="am-1", since=now - 30, severity="warning", labels={"team": "serving"}))
    assert notifier.run_once() == "1 queued, 1 sent, 0 failed"
    (alert,) = alertmanager._wait(lambda: _ours(alertmanager, "kv_cache"), "list the alert")
    assert alert["labels"] == {"alertname": "kv_cache", "severity": "warning", "target": "am-1", "team": "serving"}
    assert alert["annotations"]["summary"] == "kv_cache over 5m 12 > 0"
    assert alert["annotations"]["recommendation"] == "lower --max-num-seqs"
    assert alert["annotations"]["description"].startswith("KV cache (warning) on am-1:")
    assert alert["generatorURL"].startswith("http://dash.example.test:8501/?target=am-1")
    assert alert["status"]["state"] == "active"
    write_states(engine, state("kv_cache", target="am-1", status=RESOLVED, since=now - 30, severity="warning",
                                  resolved_at=now, labels={"team": "serving"}))
    clock.now = now + 5
    assert notifier.run_once() == "1 queued, 1 sent, 0 failed"  # group_interval 0: at the next run
    alertmanager._wait(lambda: not _ours(alertmanager, "kv_cache"), "resolve the alert")
    notifier.close()


def test_a_silence_in_alertmanager_does_not_break_delivery(engine, tmp_path, alertmanager):
    now = int(time.time())
    alertmanager.silence({"alertname": "preemptions", "target": "am-2"})
    notifier = Notifier(engine, settings(tmp_path, "alertmanager", alertmanager.url), Clock(now))
    write_states(engine, state("preemptions", target="am-2", since=now - 10))
    assert notifier.run_once() == "1 queued, 1 sent, 0 failed"
    (alert,) = alertmanager._wait(lambda: [a for a in _ours(alertmanager, "preemptions") if a["labels"]["target"] == "am-2"],
                                 "list the silenced alert")  # fmt: skip
    assert alert["status"]["state"] == "suppressed" and alert["status"]["silencedBy"]
    notifier.close()
    assert [(r["channel"], r["status"], r["answer"]) for r in rows(engine)] == [("alertmanager", "sent", "HTTP 200")]


def test_status_and_the_alerts_page_say_where_notifications_go(tmp_path):
    from app.notify.grouping import delivery_line

    cfg = settings(tmp_path, "webhook", "https://hooks.example.test/services/T0/B0/secret")
    line = delivery_line(cfg.alerts.email, cfg.alerts)
    assert line == "e-mail off: notifications go to webhook https://hooks.example.test/…"
    assert delivery_line(Settings().alerts.email, Settings().alerts).startswith("e-mail off: alerts are evaluated and stored but not sent")


@pytest.mark.parametrize("model", [
    "evil\n- preemptions (critical) on prod-70b: all clear",
    "x\r\n<!channel> <https://evil.example|click> & more",
    "a\u2028b\x1b[2J <@U123>",
])  # fmt: skip
def test_a_model_name_forges_no_line_nor_markup_in_the_slack_text(engine, tmp_path, model):
    """Through the notifier to a loopback receiver: the text has exactly the lines the product wrote
    (the subject and one per alert), and no <, > or raw & from a name reaches Slack."""
    sink, clock = Sink(), Clock(T0 + 1)
    with serving(sink.handler()) as base:
        cfg = settings(tmp_path, "webhook", base + "/hook", WEBHOOK, {"HOOK_TOKEN": "s3cret"})
        notifier = Notifier(engine, cfg, clock)
        write_states(engine, state("preemptions", model=model))
        assert notifier.run_once() == "1 queued, 1 sent, 0 failed"
        notifier.close()
    ((_, firing),) = sink.requests
    text = firing["text"]
    lines = text.split("\n")
    assert len(lines) == 2, lines  # the subject, one alert
    assert "<" not in text and ">" not in text and "\x1b" not in text and "\r" not in text
    assert not re.search(r"&(?!amp;|lt;|gt;)", text)
    assert firing["alerts"][0]["labels"]["model"] == model  # the labels keep the name as it is (JSON)
