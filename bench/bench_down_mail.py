"""Down to mailed: SIGKILL of the simulator to the SMTP sink's receipt, Sweetspot against Prometheus +
Alertmanager with their usual defaults, measured on the same kill.

1. The simulator as its own process (``python -m app sim --port 0``).
2. Sweetspot's collector (``python -m app collect``) watching it with every default (5-s scrapes,
   ``target_down`` ``for`` 22 s counted from the last good scrape, no group_wait for it), e-mail to
   an aiosmtpd sink.
3. The anchor, beside it on the same simulator: Debian's Prometheus (15-s scrapes and evaluations, the
   shipped example's; ``up == 0`` ``for: 1m``) and Alertmanager (``group_wait`` 30 s, its default)
   mailing a second sink, started as tests/prometheus_server.py and tests/alertmanager_server.py do.
4. Once both have scraped it, the simulator is killed with SIGKILL; the time each message reaches
   its sink is taken from the sink (aiosmtpd, in this process). Sweetspot's also from its last good
   scrape (the issue's 30 s).

Usage: .venv/bin/python bench/bench_down_mail.py [--runs 1]. Prints the load average with each run:
the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.alertmanager_server import AlertmanagerServer  # noqa: E402
from tests.prometheus_server import PrometheusServer  # noqa: E402
from tests.support.smtp_server import Mailbox, serve  # noqa: E402

AM_CONFIG = """
global:
  smtp_smarthost: 127.0.0.1:{port}
  smtp_from: alertmanager@example.test
  smtp_require_tls: false
route:
  receiver: mail
  group_wait: 30s
  group_interval: 5m
  repeat_interval: 4h
receivers:
  - name: mail
    email_configs:
      - to: oncall@example.test
"""
RULES = """groups:
  - name: down
    rules:
      - alert: TargetDown
        expr: up{job="vllm"} == 0
        for: 1m
"""
PROM_CONFIG = """global: {{scrape_interval: 15s, scrape_timeout: 10s, evaluation_interval: 15s}}
rule_files: ["{rules}"]
alerting:
  alertmanagers: [{{static_configs: [{{targets: ["{am}"]}}]}}]
scrape_configs:
  - job_name: vllm
    static_configs: [{{targets: ["{target}"]}}]
"""


class Sink(Mailbox):
    """An aiosmtpd handler that notes when each message arrived (unix s)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived: list[float] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.arrived.append(time.time())
        return await super().handle_DATA(server, session, envelope)


def wait(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            value = predicate()
        except Exception:  # noqa: BLE001 - not there yet (a database not created, a server starting)
            value = None
        if value:
            return value
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}")


def last_good(db: Path) -> int | None:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT max(ts) FROM scrapes WHERE up = 1").fetchone()
    return None if row is None or row[0] is None else int(row[0])


def one_run(work: Path) -> dict[str, float]:
    sim = subprocess.Popen([sys.executable, "-m", "app", "sim", "--port", "0", "--load", "4"], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    assert sim.stdout is not None
    urls = json.loads(sim.stdout.readline())
    ours, theirs = Sink(), Sink()
    db = work / "sweetspot.db"
    collector = None
    prometheus = alertmanager = None
    try:
        with serve(ours) as our_port, serve(theirs) as their_port:
            alertmanager = AlertmanagerServer(work, AM_CONFIG.format(port=their_port))
            (work / "rules.yml").write_text(RULES)
            prometheus = PrometheusServer(work, [urls["vllm_metrics"]], interval="15s")
            prometheus.config.write_text(PROM_CONFIG.format(rules=work / "rules.yml", am=alertmanager.url.removeprefix("http://"),
                                                            target=urls["vllm_metrics"].split("/")[2]))  # fmt: skip
            prometheus.proc.send_signal(signal.SIGHUP)
            config = work / "sweetspot.toml"
            config.write_text(f'db_url = "sqlite:///{db}"\n\n[[targets]]\nname = "demo"\nvllm_url = "{urls["vllm_metrics"]}"\n')
            env = {**os.environ, "SWEETSPOT_SMTP_HOST": "127.0.0.1", "SWEETSPOT_SMTP_PORT": str(our_port),
                   "SWEETSPOT_SMTP_TLS": "none", "SWEETSPOT_ALERT_FROM": "sweetspot@example.test",
                   "SWEETSPOT_ALERT_TO": "oncall@example.test"}  # fmt: skip
            with (work / "collector.log").open("wb") as log:
                collector = subprocess.Popen([sys.executable, "-m", "app", "--config", str(config), "collect"], cwd=ROOT,
                                             env=env, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
            wait(lambda: last_good(db), 120, "Sweetspot's first good scrape")
            wait(lambda: prometheus.query('up{job="vllm"} == 1'), 120, "Prometheus' first good scrape")
            time.sleep(20)  # a few scrapes of each before the kill: the rule's `for` starts from a healthy state
            killed = time.time()
            sim.send_signal(signal.SIGKILL)
            sim.wait(timeout=10)
            wait(lambda: ours.arrived and theirs.arrived, 400, "both e-mails")
            good = last_good(db)
            assert good is not None
            return {"sweetspot_s": ours.arrived[0] - killed, "sweetspot_from_last_good_s": ours.arrived[0] - good,
                    "prometheus_alertmanager_s": theirs.arrived[0] - killed}  # fmt: skip
    finally:
        if collector is not None:
            collector.send_signal(signal.SIGTERM)
            collector.wait(timeout=60)
        for server in (prometheus, alertmanager):
            if server is not None:
                server.stop()
        if sim.poll() is None:
            sim.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    results = []
    for i in range(args.runs):
        load = os.getloadavg()
        with tempfile.TemporaryDirectory(prefix="sweetspot-down-") as folder:
            result = one_run(Path(folder))
        results.append(result)
        print(f"run {i + 1}: SIGKILL → e-mail: Sweetspot {result['sweetspot_s']:.1f} s "
              f"({result['sweetspot_from_last_good_s']:.1f} s from its last good scrape), "
              f"Prometheus + Alertmanager {result['prometheus_alertmanager_s']:.1f} s; "
              f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}", flush=True)
    if args.runs > 1:
        for key in results[0]:
            print(f"median {key}: {statistics.median(r[key] for r in results):.1f}")


if __name__ == "__main__":
    main()
