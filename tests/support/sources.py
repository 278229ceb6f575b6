"""vLLM, a gateway and dcgm-exporter on one real port on 127.0.0.1, as the simulator serves them,
with answers that can be held back or cut: the round tests' sources."""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.support.http_server import CountingServer

DATA = Path(__file__).resolve().parent.parent / "data"
PAGES = {
    "/metrics": (DATA / "vllm_v1.txt").read_bytes(),
    "/gateway": b"# TYPE queue gauge\nqueue 3\n",
    "/dcgm": (DATA / "dcgm-exporter-h200x2.txt").read_bytes(),
}


class Sources(CountingServer):
    """vLLM, a gateway and dcgm-exporter on one port, as the simulator serves them; ``delays`` by path
    hold an answer back, ``close_after`` drops each connection after its answer without saying so."""

    def __init__(self, delays: dict[str, float], close_after: bool = False) -> None:
        super().__init__(_Handler)
        self.delays, self.close_after = delays, close_after
        self.arrived: dict[str, float] = {}  # path → time.monotonic() of its last request


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Sources

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.server.arrived[self.path] = time.monotonic()
        time.sleep(self.server.delays.get(self.path, 0.0))
        body = PAGES[self.path.split("?")[0]]  # a query string (a token) is the client's business
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = self.server.close_after
