"""Debian's real ``victoria-metrics`` (single-node) on 127.0.0.1, scraping the endpoints a test names with
its own scraper (``-promscrape.config``, the same file a Prometheus would read).

Started by the test tooling on a free port with its data in a temporary folder and stopped at the end,
as tests/prometheus_server.py does for Prometheus. Its flags are its defaults but for the ones a test
passes (``-search.latencyOffset`` stays 30 s: the difference the source must handle). Without the binary
the tests that need it are skipped, saying why; with ``CI`` set they fail instead (``.ci/run`` installs it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.prometheus_server import LocalServer

BINARY = "victoria-metrics"


def require_victoria() -> str:
    found = shutil.which(BINARY) or ("/usr/bin/victoria-metrics" if Path("/usr/bin/victoria-metrics").exists() else None)
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("victoria-metrics not found although CI is set; .ci/run should have installed it")
    pytest.skip("Debian's victoria-metrics is not installed (apt-get install victoria-metrics)")


class VictoriaServer(LocalServer):
    """A running single-node VictoriaMetrics scraping ``urls`` every ``interval``."""

    name = "victoria-metrics"

    def __init__(self, work: Path, urls: Sequence[str], interval: str = "1s", extra_flags: Sequence[str] = ()) -> None:
        binary = require_victoria()
        self._start(work, "scrape.yml", urls, interval, lambda config, port: [
            binary, f"-storageDataPath={work / 'data'}", f"-httpListenAddr=127.0.0.1:{port}",
            f"-promscrape.config={config}", "-loggerLevel=WARN", *extra_flags], "/health")  # fmt: skip

    def federate(self, selector: str) -> list[str]:
        """The latest sample lines of ``selector`` (VictoriaMetrics's instant queries lag 30 s: /federate does not)."""
        return [line for line in self.client.get("/federate", params={"match[]": selector}).text.splitlines() if line]

    def query_range(self, promql: str, start: float, end: float, step_s: float) -> list[dict[str, Any]]:
        params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"}
        return list(self.client.get("/api/v1/query_range", params=params).json()["data"]["result"])

    def wait_for_targets(self, count: int, timeout_s: float = 90.0) -> None:
        """Until ``count`` targets have been scraped successfully and their vLLM series are stored."""
        def ready() -> bool:
            up = [line for line in self.federate("up") if line.split()[-2] == "1"]
            return len(up) == count and len(self.federate('{__name__="vllm:num_requests_running"}')) >= count

        self._wait(ready, f"scrape {count} targets", timeout_s)
