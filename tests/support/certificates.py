"""Self-signed certificates for the TLS tests (HTTPS targets, SMTP with STARTTLS or implicit TLS)."""

from __future__ import annotations

import shutil
import socket
import socketserver
import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest


def make_certificate(folder: Path) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (cert, key), made with the openssl command."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is not installed (apt-get install openssl)")
    cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "2",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


HANDSHAKE_TIMEOUT_S = 10.0


def tls_context(certificate: tuple[str, str]) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    return context


def tls_connection(context: ssl.SSLContext, conn: socket.socket) -> ssl.SSLSocket:
    """``conn`` after a server-side TLS handshake bounded in time: a client that connects and never
    finishes its handshake gets an error, not a server waiting for it for good."""
    conn.settimeout(HANDSHAKE_TIMEOUT_S)
    return context.wrap_socket(conn, server_side=True)


def serve_tls(server: socketserver.BaseServer, certificate: tuple[str, str]) -> None:
    """Make a threaded ``server`` (not yet serving) answer over TLS, each handshake in its request's own
    thread and bounded in time. Wrapping the listening socket instead runs every handshake inside the
    accept loop: one stalled handshake stopped the server, and its ``shutdown()``, for good (a CI run
    hung there for 300 s)."""
    context = tls_context(certificate)
    plain = server.finish_request

    def finish_request(request: Any, client_address: Any) -> None:
        try:
            secured = tls_connection(context, request)
        except OSError:  # a client that does not trust us, or stalled: the next one
            return
        try:
            plain(secured, client_address)
        finally:
            secured.close()

    server.finish_request = finish_request  # type: ignore[method-assign]
