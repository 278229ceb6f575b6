"""Debian's real ``prometheus`` on 127.0.0.1, scraping the endpoints a test names.

The test tooling starts it with a generated config (one job, one static target per URL, scraped
every second) on a free port with its TSDB in a temporary folder, and stops it at the end. Without
the binary the tests that need it are skipped, saying why; with ``CI`` set they fail instead
(``.ci/run`` installs it), as tests/conftest.py does for PostgreSQL.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support.ports import free_port

BINARY = "prometheus"


def require_prometheus() -> str:
    found = shutil.which(BINARY) or ("/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None)
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("prometheus not found although CI is set; .ci/run should have installed it")
    pytest.skip("Debian's prometheus is not installed (apt-get install prometheus)")



def scrape_config(urls: Sequence[str], job: str = "vllm", interval: str = "1s") -> str:
    """A prometheus.yml scraping every URL (``http://host:port/path``) as one target of ``job``."""
    lines = [f"global: {{scrape_interval: {interval}, scrape_timeout: {interval}}}", "scrape_configs:"]
    by_path: dict[str, list[str]] = {}
    for url in urls:
        parts = urlsplit(url)
        by_path.setdefault(parts.path, []).append(parts.netloc)
    for i, (path, hosts) in enumerate(sorted(by_path.items())):
        lines += [f"  - job_name: {job}" + (f"-{i}" if i else ""), f"    metrics_path: {path}",
                  "    relabel_configs: [{target_label: job, replacement: " + job + "}]",
                  f"    static_configs: [{{targets: [{', '.join(repr(h) for h in hosts)}]}}]"]
    return "\n".join(lines) + "\n"


class LocalServer:
    """A server process the tests started (``proc``, writing ``work/<name>.log``), and an HTTP
    client of it; waits on conditions and stops it."""

    name = "prometheus"
    work: Path
    proc: subprocess.Popen[bytes]
    client: httpx.Client

    def _start(self, work: Path, config_name: str, urls: Sequence[str], interval: str,
               argv: Callable[[Path, int], list[str]], ready_path: str) -> None:
        """Write the scrape config ``work/<config_name>`` for ``urls``, start ``argv(config, port)`` on a
        free loopback port with its output in ``work/<name>.log``, and wait until ``ready_path`` answers 200."""
        self.work = work
        self.config = work / config_name
        self.config.write_text(scrape_config(urls, interval=interval))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (work / f"{self.name}.log").open("wb")
        self.proc = subprocess.Popen(argv(self.config, self.port), stdout=self.log, stderr=subprocess.STDOUT)
        self.client = httpx.Client(base_url=self.url, timeout=10)
        self._wait(lambda: self.client.get(ready_path).status_code == 200, "become ready")

    def _wait(self, ready: Callable[[], Any], what: str, timeout_s: float = 90.0) -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {(self.work / f'{self.name}.log').read_text()[-800:]}")
            try:
                value = ready()
                if value:
                    return value
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} did not {what} within {timeout_s:g} s")

    def stop(self) -> None:
        self.client.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


class PrometheusServer(LocalServer):
    """A running ``prometheus``; :meth:`scrape` changes what it scrapes (config reload by SIGHUP)."""

    def __init__(self, work: Path, urls: Sequence[str], interval: str = "1s", extra_flags: Sequence[str] = ()) -> None:
        binary = require_prometheus()
        self.interval = interval
        self._start(work, "prometheus.yml", urls, interval, lambda config, port: [
            binary, f"--config.file={config}", f"--storage.tsdb.path={work / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn", *extra_flags], "/-/ready")  # fmt: skip

    def scrape(self, urls: Sequence[str]) -> None:
        """Scrape these URLs from now on (targets left out get staleness markers at once)."""
        self.config.write_text(scrape_config(urls, interval=self.interval))
        self.proc.send_signal(signal.SIGHUP)

    def query(self, promql: str) -> list[dict[str, Any]]:
        body = self.client.get("/api/v1/query", params={"query": promql}).json()
        return list(body["data"]["result"])

    def wait_for_targets(self, count: int, timeout_s: float = 90.0) -> None:
        """Until ``count`` targets have been scraped successfully (``up == 1``)."""
        self._wait(lambda: len(self.query("up == 1")) == count and len(self.query("vllm_num_requests_running or "
                   "{__name__=\"vllm:num_requests_running\"}")) >= count, f"scrape {count} targets", timeout_s)  # fmt: skip
