"""Replay targets: N vLLM endpoints on 127.0.0.1 serving recorded pages in turn (bench only).

Each endpoint serves page ``(floor(now / period) + i) % len(pages)`` of the recorded pages, so every
reader (Prometheus, the direct collector) that reads it in the same period gets the same bytes, and
the targets are out of step with each other. Run as a separate process so its threads do not share
the benchmark's interpreter lock:

    python -m bench.replay_targets PAGES.json COUNT PERIOD_S   # prints the ports as one JSON line
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve(pages: list[bytes], count: int, period_s: float) -> list[ThreadingHTTPServer]:
    servers = []
    for i in range(count):
        class Handler(BaseHTTPRequestHandler):
            offset = i
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                body = pages[(int(time.time() // period_s) + self.offset) % len(pages)]
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the reader gave up (a scrape timeout on this loaded machine)

            def log_message(self, format: str, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, args=(0.5,), daemon=True).start()
        servers.append(server)
    return servers


def main() -> int:
    pages = [p.encode() for p in json.loads(open(sys.argv[1]).read())]
    servers = serve(pages, int(sys.argv[2]), float(sys.argv[3]))
    print(json.dumps([s.server_address[1] for s in servers]), flush=True)
    sys.stdin.read()  # until the benchmark closes our stdin
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
