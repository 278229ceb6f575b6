"""Webhook notifications end to end: the simulator's preemption storm, the collector as a process,
and a local HTTP sink on 127.0.0.1. The collector is killed (SIGKILL) after the notification was
recorded in the outbox and before it was sent; after a restart the sink gets it exactly once."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.ports import refused_port, release
from tests.test_alerts_e2e import collector, kill, storm, wait_for
from tests.test_notify_e2e import PREEMPTIONS_ALONE, notifications

pytestmark = pytest.mark.slow  # waits for the simulated storm, a minute or so
__all__ = ["storm"]  # the fixture, imported for the test below


def config(tmp_path: Path, urls: dict[str, str], db_url: str, hook_url: str) -> Path:
    path = tmp_path / "sweetspot.toml"
    path.write_text(f"""
db_url = "{db_url}"
interval_s = "1s"

[alerts]
evaluate_every_s = "1s"
lease_s = "3s"
{PREEMPTIONS_ALONE}
[alerts.webhook]
url = "{hook_url}"
group_wait_s = "1s"
retry_initial_s = "1s"
retry_max_s = "2s"

[[targets]]
name = "demo"
vllm_url = "{urls['vllm_metrics']}"
gateway = {{ preset = "sweetspot-sim", url = "{urls['gateway_metrics']}" }}
""")
    return path


class Received(BaseHTTPRequestHandler):
    bodies: list[dict] = []

    def do_POST(self) -> None:
        Received.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_kill_9_between_record_and_send_delivers_exactly_once(storm, tmp_path):
    db_url = f"sqlite:///{tmp_path}/hook.db"
    port = refused_port()  # it refuses until the collector has been killed
    cfg, log = config(tmp_path, storm, db_url, f"http://127.0.0.1:{port}/hook"), tmp_path / "collector.log"
    proc = collector(cfg, log)
    server = None
    try:
        wait_for(lambda: [r for r in notifications(db_url) if r["channel"] == "webhook" and r["attempts"] >= 1], 150,
                 "the notification recorded, its first attempt refused")  # fmt: skip
        kill(proc)
        (row,) = notifications(db_url)
        assert row["status"] == "queued" and "connection refused" in row["last_error"]
        server = ThreadingHTTPServer(("127.0.0.1", release(port)), Received)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        proc = collector(cfg, log)
        wait_for(lambda: [r for r in notifications(db_url) if r["status"] == "sent"], 60, "the notification sent")
        time.sleep(6)  # a few more notifier runs (every 5 s): nothing is sent again
    finally:
        kill(proc)
        if server is not None:
            server.shutdown()
            server.server_close()
    (body,) = Received.bodies
    assert body["status"] == "firing" and body["text"].startswith("[FIRING:1] demo: preemptions")
    assert [a["labels"]["alertname"] for a in body["alerts"]] == ["preemptions"]
    assert [(r["channel"], r["status"]) for r in notifications(db_url)] == [("webhook", "sent")]
