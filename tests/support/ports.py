"""Ports on 127.0.0.1 for the tests: one free for a server about to bind it, one that refuses.

A port picked by binding port 0 and closing the socket is free only until someone else binds it:
with three test workers, a Prometheus, PostgreSQL and vLLM beside them, a port "where nothing
listens" was taken by another test's server mid-test (CI saw an SMTP test meet a stranger's greeting
instead of "connection refused"). :func:`refused_port` therefore keeps its socket bound, never
listening, for the life of the test process: Linux answers a connection there with a reset
(ECONNREFUSED) and refuses anyone else's bind. :func:`release` hands it to the test's own server.
"""

from __future__ import annotations

import socket

_HELD: dict[int, socket.socket] = {}


def free_port() -> int:
    """A port nobody holds now, for a server the caller starts at once (it cannot bind port 0)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def refused_port() -> int:
    """A port that refuses every connection until :func:`release`: bound and never listening."""
    sock = socket.socket()  # no SO_REUSEADDR: no other socket may bind the port while it is held
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    _HELD[port] = sock
    return port


def release(port: int) -> int:
    """Free a port from :func:`refused_port` for the caller's own server to bind next; return it."""
    _HELD.pop(port).close()
    return port
