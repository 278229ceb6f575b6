"""The tests' refusing port holds: nobody connects to it, nobody else binds it, until released."""

from __future__ import annotations

import errno
import socket

import pytest

from tests.support.ports import refused_port, release


@pytest.mark.parametrize("reuse_address", [False, True], ids=["plain", "SO_REUSEADDR"])
def test_a_refused_port_refuses_connections_and_binds_until_released(reuse_address):
    port = refused_port()
    with socket.socket() as client, pytest.raises(ConnectionRefusedError):
        client.connect(("127.0.0.1", port))
    with socket.socket() as other:
        if reuse_address:  # as asyncio's and http.server's servers bind
            other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        with pytest.raises(OSError) as caught:
            other.bind(("127.0.0.1", port))
        assert caught.value.errno == errno.EADDRINUSE
        release(port)
        other.bind(("127.0.0.1", port))  # the test's own server takes it
        other.listen()
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
