"""The chat channel ([alerts.chat]): a Slack- or Mattermost-compatible ``{"text": …}`` POSTed to a
real receiver on 127.0.0.1, and its URL (the credential) masked in ``config --json``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from app.notify.notifier import Notifier
from tests.notify_helpers import T0, state, write_states
from tests.support.http_server import serving
from tests.test_notify_hooks import Clock, Sink, engine, rows, settings  # noqa: F401 - engine is a fixture

ROOT = Path(__file__).resolve().parent.parent


def test_a_firing_alert_reaches_the_chat_as_its_text_only(engine, tmp_path):  # noqa: F811
    sink, clock = Sink(), Clock(T0 + 1)
    with serving(sink.handler()) as base:
        notifier = Notifier(engine, settings(tmp_path, "chat", base + "/hooks/T0/B0/XXXX", 'group_wait_s = "0s"'), clock)
        write_states(engine, state("preemptions", summary="preemptions over 5m 12 > 0 <!channel>"))
        assert notifier.run_once() == "1 queued, 1 sent, 0 failed"
        notifier.close()
    ((headers, body),) = sink.requests
    assert headers["Content-Type"] == "application/json" and set(body) == {"text"}
    assert body["text"].startswith("[FIRING:1] prod-70b: preemptions\n- preemptions (critical) on prod-70b")
    assert "&lt;!channel&gt;" in body["text"]  # a value's markup is escaped, never a mention
    (row,) = rows(engine)
    assert (row["channel"], row["status"], json.loads(row["recipients"])) == ("chat", "sent", [base + "/…"])


def test_its_url_is_masked_by_config_json(tmp_path):
    path = tmp_path / "chat.toml"
    path.write_text('[alerts.chat]\nurl = "https://hooks.slack.com/services/T0/B0/XXXXSECRET"\n')
    done = subprocess.run([sys.executable, "-m", "app", "config", "--config", str(path), "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env={"PATH": ""})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "XXXXSECRET" not in done.stdout
    assert json.loads(done.stdout)["alerts"]["chat"]["url"] == "https://hooks.slack.com/***"
