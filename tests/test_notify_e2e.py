"""Alert e-mail end to end: the simulator's preemption storm (``sim --max-num-seqs 64 --gateway-limit
64 --load 64``), the collector as a process configured by the environment alone for SMTP, and
aiosmtpd on 127.0.0.1. One grouped firing mail; SIGKILL and restart mid-incident send no
duplicate; an SMTP server that is down when the alert fires gets the queued mail once it is up."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from db import schema
from db.engine import open_reader
from tests.support.ports import refused_port, release
from tests.support.smtp_server import Mailbox, serve
from tests.test_alerts_e2e import alert, collector, kill, storm, wait_for

pytestmark = pytest.mark.slow  # each waits for the simulated storm, a minute or so
__all__ = ["storm"]  # the fixture, imported for the tests below
DASHBOARD = "http://dash.example.test:8501"


# for a test that is not about grouping: preemptions alone, mailed a second after they fire
PREEMPTIONS_ALONE = """
[[alerts.rules]]
name = "kv_cache"
enabled = false

[[alerts.rules]]
name = "kv_cache_critical"
enabled = false
"""


def config(tmp_path: Path, urls: dict[str, str], db_url: str, group_wait: str = "30s", rules: str = "") -> Path:
    """``group_wait`` 30 s is the default: KV usage turns critical a little before the first preemption."""
    path = tmp_path / "sweetspot.toml"
    path.write_text(f"""
db_url = "{db_url}"
interval_s = "1s"

[alerts]
evaluate_every_s = "1s"
lease_s = "3s"
{rules}
[alerts.email]   # the server and addresses come from SWEETSPOT_SMTP_* and friends
group_wait_s = "{group_wait}"
retry_initial_s = "1s"
retry_max_s = "2s"

[[targets]]
name = "demo"
vllm_url = "{urls['vllm_metrics']}"
gateway = {{ preset = "sweetspot-sim", url = "{urls['gateway_metrics']}" }}
""")
    return path


def smtp_env(monkeypatch, port: int) -> None:
    for name, value in {"SWEETSPOT_SMTP_HOST": "127.0.0.1", "SWEETSPOT_SMTP_PORT": str(port), "SWEETSPOT_SMTP_TLS": "none",
                        "SWEETSPOT_ALERT_FROM": "sweetspot@example.test", "SWEETSPOT_ALERT_TO": "oncall@example.test",
                        "SWEETSPOT_DASHBOARD_URL": DASHBOARD}.items():  # fmt: skip
        monkeypatch.setenv(name, value)  # the collector process inherits them


def notifications(db_url: str) -> list[dict]:
    engine = open_reader(db_url)
    try:
        with engine.connect() as conn:
            n = schema.notifications
            return [dict(r) for r in conn.execute(select(n).order_by(n.c.id)).mappings()]
    finally:
        engine.dispose()


def sent(db_url: str) -> list[dict]:
    return [r for r in notifications(db_url) if r["status"] == "sent"]


def test_the_storm_mails_once_and_a_kill_9_sends_no_duplicate(storm, db_url, tmp_path, monkeypatch):
    mailbox = Mailbox()
    with serve(mailbox) as port:
        smtp_env(monkeypatch, port)
        cfg, log = config(tmp_path, storm, db_url), tmp_path / "collector.log"
        proc = collector(cfg, log)
        try:
            wait_for(lambda: sent(db_url), 150, "the firing mail")
            (msg,) = mailbox.messages
            # grouped: KV usage turns critical just before the first preemption; group_wait gathers both
            head = re.fullmatch(r"\[FIRING:(\d+)\] demo: (.+)", msg["Subject"])
            assert head and int(head[1]) >= 2, msg["Subject"]
            assert {"preemptions", "KV cache critical"} <= set(head[2].split(", ")), msg["Subject"]
            text = msg.get_body(("plain",)).get_content()
            assert "- preemptions (critical) on demo: preemptions over 5m" in text
            assert "- KV cache critical (critical) on demo: KV-cache usage (max over 5m)" in text
            assert "--max-num-seqs" in text and f"{DASHBOARD}/?target=demo&range=custom&start=" in text
            assert any(p.get_content_type() == "image/png" for p in msg.walk())
            fired = alert(db_url, "preemptions")
            kill(proc)  # mid-incident, after the mail was recorded as sent
            proc = collector(cfg, log)
            # the new process waits out the dead one's lease (3 s), then evaluates and notifies again
            wait_for(lambda: alert(db_url, "preemptions").last_eval_at > fired.last_eval_at + 6, 60, "evaluations")
            assert alert(db_url, "preemptions").state == "firing"
            time.sleep(6)  # a few more notifier runs (every 5 s)
        finally:
            kill(proc)
    assert len(mailbox.messages) == 1
    assert [r["status"] for r in notifications(db_url)] == ["sent"]


def test_smtp_down_then_up_delivers_the_queued_mail(storm, tmp_path, monkeypatch):
    db_url = f"sqlite:///{tmp_path}/down.db"
    port, mailbox = refused_port(), Mailbox()
    smtp_env(monkeypatch, port)
    # what is tested is the outage, not the grouping: preemptions alone, no 30 s group_wait
    proc = collector(config(tmp_path, storm, db_url, "1s", PREEMPTIONS_ALONE), tmp_path / "collector.log")
    try:
        failing = wait_for(lambda: [r for r in notifications(db_url) if r["attempts"] >= 2], 150, "failed attempts")
        assert failing[0]["status"] == "queued" and "connection refused" in failing[0]["last_error"]
        with serve(mailbox, release(port)):
            wait_for(lambda: sent(db_url), 90, "the queued mail")
    finally:
        kill(proc)
    assert mailbox.subjects() == ["[FIRING:1] demo: preemptions"]
    (row,) = sent(db_url)
    assert row["attempts"] >= 3
