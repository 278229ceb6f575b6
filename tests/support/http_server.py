"""A real HTTP server on 127.0.0.1, port 0, serving fixed answers: path → (status, content type, body)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

from tests.support.ports import refused_port

Routes = dict[str, tuple[int, str, str]]
Server = TypeVar("Server", bound=ThreadingHTTPServer)


@contextmanager
def serve(routes: Routes) -> Iterator[str]:
    """Serve ``routes`` and yield the base URL (``http://127.0.0.1:PORT``); unknown paths answer 404."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, content_type, body = routes.get(self.path, (404, "text/plain", "not found"))
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(Handler) as base:
        yield base


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler], port: int = 0) -> Iterator[str]:
    """Serve ``handler`` on 127.0.0.1, ``port`` (0: any free one), in a thread; yield the base URL;
    stop it at the end."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def closed_port_url() -> str:
    """A URL on 127.0.0.1 that refuses connections for the rest of the test process
    (:func:`tests.support.ports.refused_port`)."""
    return f"http://127.0.0.1:{refused_port()}/metrics"


class CountingServer(ThreadingHTTPServer):
    """A threaded server on 127.0.0.1, port 0, counting the connections it accepted."""

    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.accepted = 0

    def get_request(self) -> tuple[socket.socket, Any]:
        request = super().get_request()
        self.accepted += 1
        return request

    def url(self, path: str = "/metrics") -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"


def started(make: Callable[..., Server]) -> Iterator[Callable[..., Server]]:
    """For a fixture (``yield from started(...)``): a function that makes a server with ``make`` and
    serves it in a thread; every server it started is stopped and closed after the test."""
    servers: list[Server] = []

    def start(*args: Any, **kwargs: Any) -> Server:
        server = make(*args, **kwargs)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
