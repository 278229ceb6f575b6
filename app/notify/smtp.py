"""Sending through SMTP with the standard smtplib, and its failures as one line naming the setting.

``tls``: ``none`` (plain), ``starttls`` (plain, then upgraded; refused when the server cannot) or
``ssl`` (TLS from the first byte, usually port 465). Certificates are verified against this
machine's CA store (``SSL_CERT_FILE`` names another, as for HTTPS targets).
"""

from __future__ import annotations

import smtplib
import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import EmailMessage
from typing import Any

from core.errors import SweetspotError
from core.settings import EmailSettings

HOST_HINT = "Check SWEETSPOT_SMTP_HOST / SWEETSPOT_SMTP_PORT (alerts.email.host, alerts.email.port)"
AUTH_HINT = "Check SWEETSPOT_SMTP_USER / SWEETSPOT_SMTP_PASSWORD"
TLS_HINT = "Check SWEETSPOT_SMTP_TLS (alerts.email.tls: none, starttls or ssl) against what the server speaks on this port"


class MailError(SweetspotError):
    """An e-mail the SMTP server did not accept (or could not be reached for); the hint names the setting."""


class _Answering:
    """Keeps the server's answer to DATA (``250 2.0.0 Ok: queued as …``), which sendmail discards."""

    answer = ""

    def data(self, msg: Any) -> tuple[int, bytes]:
        code, text = super().data(msg)  # type: ignore[misc]
        self.answer = f"{code} {text.decode(errors='replace')}"
        return code, text


class _SMTP(_Answering, smtplib.SMTP):
    pass


class _SMTPSSL(_Answering, smtplib.SMTP_SSL):
    pass


@contextmanager
def connect(email: EmailSettings, password: str) -> Iterator[_SMTP | _SMTPSSL]:
    """An open, logged-in SMTP session; every failure is a :class:`MailError`."""
    where = f"{email.host}:{email.effective_port}"
    context = ssl.create_default_context()
    session: _SMTP | _SMTPSSL | None = None
    try:
        if email.tls == "ssl":
            session = _SMTPSSL(email.host, email.effective_port, timeout=email.timeout_s, context=context)
        else:
            session = _SMTP(email.host, email.effective_port, timeout=email.timeout_s)
            if email.tls == "starttls":
                session.starttls(context=context)
        if email.user:
            session.login(email.user, password)
    except Exception as exc:
        if session is not None:
            _close(session)
        raise translate(exc, where) from None
    try:
        yield session
    finally:
        _close(session)


def send(session: _SMTP | _SMTPSSL, message: EmailMessage, where: str) -> str:
    """Send one message; returns the server's answer. Raises :class:`MailError`."""
    try:
        refused = session.send_message(message)
    except Exception as exc:
        raise translate(exc, where) from None
    answer = session.answer or "accepted"
    return f"{answer} (refused: {', '.join(refused)})" if refused else answer


def _close(session: smtplib.SMTP) -> None:
    try:
        session.quit()
    except Exception:  # noqa: BLE001 - the conversation is over either way
        session.close()


def translate(exc: BaseException, where: str) -> MailError:
    """One line for a failed SMTP conversation, with the setting to check."""
    if isinstance(exc, MailError):
        return exc
    if isinstance(exc, smtplib.SMTPAuthenticationError):
        return MailError(f"the SMTP server {where} refused the login ({_reply(exc)})", AUTH_HINT)
    if isinstance(exc, smtplib.SMTPNotSupportedError):
        if "AUTH" in str(exc):
            return MailError(f"the SMTP server {where} offers no login on this connection ({exc})",
                             "Set SWEETSPOT_SMTP_TLS=starttls (many servers offer AUTH only over TLS), or unset SWEETSPOT_SMTP_USER")  # fmt: skip
        return MailError(f"the SMTP server {where} does not offer STARTTLS ({exc})", TLS_HINT)
    if isinstance(exc, ssl.SSLCertVerificationError):
        return MailError(f"the TLS certificate of {where} is not trusted here ({exc.verify_message})",
                         "Add its CA to the system's store or point SSL_CERT_FILE at it")  # fmt: skip
    if isinstance(exc, ssl.SSLError):
        return MailError(f"TLS failed with {where} ({exc.reason or exc})", TLS_HINT)
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        refused = ", ".join(f"{r} ({_code(v)})" for r, v in exc.recipients.items())
        return MailError(f"the SMTP server {where} refused every recipient: {refused}", "Check SWEETSPOT_ALERT_TO (alerts.email.to, routes)")
    if isinstance(exc, smtplib.SMTPSenderRefused):
        return MailError(f"the SMTP server {where} refused the sender {exc.sender} ({_reply(exc)})", "Check SWEETSPOT_ALERT_FROM")
    if isinstance(exc, smtplib.SMTPServerDisconnected | socket.timeout | TimeoutError):
        return MailError(f"the SMTP server {where} closed the connection or did not answer ({exc or type(exc).__name__})",
                         f"{HOST_HINT}; a TLS-only port (465) needs SWEETSPOT_SMTP_TLS=ssl")  # fmt: skip
    if isinstance(exc, ConnectionRefusedError):
        return MailError(f"cannot connect to the SMTP server {where} (connection refused)", HOST_HINT)
    if isinstance(exc, socket.gaierror):
        return MailError(f"cannot resolve the SMTP host of {where} ({exc.strerror})", HOST_HINT)
    if isinstance(exc, OSError):
        return MailError(f"cannot reach the SMTP server {where} ({exc.strerror or exc})", HOST_HINT)
    if isinstance(exc, smtplib.SMTPResponseException):
        return MailError(f"the SMTP server {where} answered {_reply(exc)}", HOST_HINT)
    return MailError(f"sending through {where} failed: {type(exc).__name__}: {exc}", HOST_HINT)


def _reply(exc: smtplib.SMTPResponseException) -> str:
    text = exc.smtp_error.decode(errors="replace") if isinstance(exc.smtp_error, bytes) else str(exc.smtp_error)
    return f"{exc.smtp_code} {text}"


def _code(value: tuple[int, bytes]) -> str:
    return f"{value[0]} {value[1].decode(errors='replace')}"
