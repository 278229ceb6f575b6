"""A real SMTP server (aiosmtpd) on 127.0.0.1 that keeps every message it accepts.

aiosmtpd's controller cannot bind port 0 (it connects to its port to check it is up), so a free
port is picked first; :func:`serve` can reuse it to bring a stopped server back on the same address.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, Envelope

from tests.support.ports import free_port


class Mailbox:
    """The aiosmtpd handler: every accepted message, parsed."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.envelopes: list[Envelope] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Envelope) -> str:
        self.envelopes.append(envelope)
        self.messages.append(message_from_bytes(envelope.original_content or b"", policy=policy.default))  # type: ignore[arg-type]
        return "250 2.0.0 Ok: queued as test"

    def subjects(self) -> list[str]:
        return [str(m["Subject"]) for m in self.messages]



@contextmanager
def serve(mailbox: Mailbox, port: int | None = None, **smtp_options: Any) -> Iterator[int]:
    """Run an SMTP server for ``mailbox`` on 127.0.0.1; yields its port. ``smtp_options`` go to
    aiosmtpd (tls_context, require_starttls, authenticator, auth_require_tls, ssl_context)."""
    port = port or free_port()
    controller = Controller(mailbox, hostname="127.0.0.1", port=port, **smtp_options)
    controller.start()
    try:
        yield port
    finally:
        controller.stop()


def password_check(user: str, password: str) -> Any:
    """An aiosmtpd authenticator that accepts one user and password (LOGIN and PLAIN)."""

    def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> AuthResult:
        ok = getattr(auth_data, "login", b"") == user.encode() and getattr(auth_data, "password", b"") == password.encode()
        return AuthResult(success=ok, handled=False)

    return authenticate
