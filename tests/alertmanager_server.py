"""Debian's real ``prometheus-alertmanager`` on 127.0.0.1, for the notifier's Alertmanager channel.

Started by the test tooling with a minimal config (one receiver that sends nothing), on a free port,
its storage in a temporary folder and clustering off, and stopped at the end. Without the binary
the tests that need it are skipped, saying why; with ``CI`` set they fail instead (``.ci/run``
installs it), as tests/prometheus_server.py does for Prometheus.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.prometheus_server import LocalServer
from tests.support.ports import free_port

BINARY = "prometheus-alertmanager"
CONFIG = """
route:
  receiver: nobody
  group_wait: 1s
receivers:
  - name: nobody
"""


def require_alertmanager() -> str:
    found = shutil.which(BINARY) or shutil.which("alertmanager")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("prometheus-alertmanager not found although CI is set; .ci/run should have installed it")
    pytest.skip("Debian's prometheus-alertmanager is not installed (apt-get install prometheus-alertmanager)")


class AlertmanagerServer(LocalServer):
    name = "alertmanager"

    def __init__(self, work: Path, config: str = CONFIG) -> None:
        binary = require_alertmanager()
        (work / "alertmanager.yml").write_text(config)
        self.work = work
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log = (work / "alertmanager.log").open("wb")
        self.proc = subprocess.Popen(
            [binary, f"--config.file={work / 'alertmanager.yml'}", f"--storage.path={work / 'am-data'}",
             f"--web.listen-address={self.url.removeprefix('http://')}", "--cluster.listen-address=", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.client = httpx.Client(base_url=self.url, timeout=10)
        self._wait(lambda: self.client.get("/-/ready").status_code == 200, "become ready")

    def alerts(self, **params: Any) -> list[dict[str, Any]]:
        return list(self.client.get("/api/v2/alerts", params=params).json())

    def silence(self, matchers: dict[str, str], minutes: int = 60) -> str:
        now = time.time()
        body = {"matchers": [{"name": k, "value": v, "isRegex": False, "isEqual": True} for k, v in matchers.items()],
                "startsAt": _iso(now - 1), "endsAt": _iso(now + minutes * 60), "createdBy": "test", "comment": "test"}  # fmt: skip
        answer = self.client.post("/api/v2/silences", json=body)
        answer.raise_for_status()
        return str(answer.json()["silenceID"])


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(ts))
