"""One state across processes: ``status`` and the UI say where the collector's notifications go, as
the collector stored it (db/delivery.py), whatever their own settings say (issue 39 point 4).

The collector runs as its own process with SMTP configured by its environment alone (as compose
runs it); ``status`` runs as another process and the Alerts page in this one, both without any
SMTP setting: they say "e-mail on", the collector's line. Killed, the collector's line is said to
be stored by a collector that no longer evaluates.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from app.alerts import lease
from app.notify.grouping import collector_delivery, delivery_channels, delivery_line
from core.settings import AlertsSettings, EmailSettings, WebhookSettings
from db import delivery
from db.engine import open_engine
from db.queries import Reader
from tests.support.smtp_server import Mailbox, serve
from tests.test_alerts_e2e import ROOT, collector, config, kill, simulator, wait_for

SMTP_ENV = ("SWEETSPOT_SMTP_HOST", "SWEETSPOT_SMTP_PORT", "SWEETSPOT_SMTP_TLS", "SWEETSPOT_ALERT_FROM", "SWEETSPOT_ALERT_TO")


def test_readers_show_the_stored_line_and_whether_its_collector_still_holds_the_lease(tmp_path):
    url = f"sqlite:///{tmp_path}/d.db"
    engine = open_engine(url)
    reader = Reader(engine=engine)
    off = AlertsSettings()
    line, sending = collector_delivery(reader.delivery(1000.0), off, 1000.0)
    assert line.startswith("no collector has evaluated alerts on this database yet: nothing is sent") and not sending
    assert lease.acquire(engine, lease.EVALUATOR, "host:1:abc", 1000.0, 30.0)
    with engine.begin() as conn:
        delivery.write(conn, "host:1:abc", 1000.0, "e-mail on: mail.test:587 (starttls) to ops@x", ["email"])
    stored = reader.delivery(1010.0)
    assert stored is not None and stored.live and stored.channels == ("email",)
    line, sending = collector_delivery(stored, off, 1010.0)  # this process has e-mail off: the collector's line wins
    assert line == "e-mail on: mail.test:587 (starttls) to ops@x (the collector host:1:abc, 10s ago)" and sending
    with engine.begin() as conn:  # written again: one row
        delivery.write(conn, "host:1:abc", 1020.0, "e-mail on: mail.test:587 (starttls) to ops@x", ["email"])
    assert reader.delivery(1020.0).written_at == 1020
    line, sending = collector_delivery(reader.delivery(1040.0), off, 1040.0)  # its lease expired at 1030
    assert "no collector holds the evaluator's lease now, so nothing is evaluated or sent" in line and not sending
    engine.dispose()


def test_the_channels_a_process_sends_through():
    hook = WebhookSettings(url="https://hooks.example.test/secret")
    alerts = AlertsSettings(email=EmailSettings(host="mail.test", from_address="a@x", to=("b@x",)), webhook=hook)
    assert delivery_channels(alerts) == ["email", "webhook"] and delivery_channels(AlertsSettings()) == []
    assert "webhook https://hooks.example.test/…" in delivery_line(alerts.email, alerts)


@pytest.fixture
def sim():
    with simulator("--load", "4", "--seed", "1") as urls:
        yield urls


def _status(db_url: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in SMTP_ENV and k != "SWEETSPOT_CONFIG"}
    out = subprocess.run([sys.executable, "-m", "app", "status", "--db", db_url, "--json"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    return json.loads(out.stdout)


@pytest.mark.slow
def test_collect_and_status_and_ui_as_separate_processes_tell_one_story(sim, tmp_path, monkeypatch):
    from tests.test_ui_app import ALERTS, open_app
    from tests.test_ui_pages import texts

    db_url = f"sqlite:///{tmp_path}/sweetspot.db"
    cfg = config(tmp_path, sim, db_url)
    log = tmp_path / "collector.log"
    with serve(Mailbox()) as port:
        env = {"SWEETSPOT_SMTP_HOST": "127.0.0.1", "SWEETSPOT_SMTP_PORT": str(port), "SWEETSPOT_SMTP_TLS": "none",
               "SWEETSPOT_ALERT_FROM": "sweetspot@example.test", "SWEETSPOT_ALERT_TO": "oncall@example.test"}  # fmt: skip
        for name, value in env.items():
            monkeypatch.setenv(name, value)  # the collector process inherits them
        proc = collector(cfg, log)
        for name in SMTP_ENV:
            monkeypatch.delenv(name)  # ... and this process (the UI's) has none
        try:
            stored = wait_for(lambda: _status(db_url)["delivery"], 120, "the collector's delivery", {log: proc})
            got = _status(db_url)
            assert got["email"].startswith(f"e-mail on: 127.0.0.1:{port} (none) to oncall@example.test (the collector ")
            assert got["sending"] is True and stored["channels"] == ["email"] and got["delivery"]["collector_live"]
            at = open_app(monkeypatch, db_url)
            at.switch_page(ALERTS).run()
            assert not at.exception, at.exception
            assert f"e-mail on: 127.0.0.1:{port} (none) to oncall@example.test" in texts(at)
            assert "e-mail off" not in texts(at)
        finally:
            kill(proc)
    wait_for(lambda: not _status(db_url)["delivery"]["collector_live"], 60, "the dead collector's lease to end")
    got = _status(db_url)
    assert "no collector holds the evaluator's lease now" in got["email"] and got["sending"] is False
