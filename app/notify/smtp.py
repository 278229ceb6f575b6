"""Sending through SMTP with the standard smtplib, and its failures as one line naming the setting.

``tls``: ``none`` (plain), ``starttls`` (plain, then upgraded; refused when the server cannot) or
``ssl`` (TLS from the first byte, usually port 465). Certificates are verified against this
machine's CA store (``SSL_CERT_FILE`` names another, as for HTTPS targets).

Every step has a wall-clock deadline (``alerts.email.timeout_s``) for the whole of it, not per
read: connecting with its greeting, TLS and login; then each message. A server trickling its answer
a byte a second defeats smtplib's per-read timeout, so a watchdog thread shuts the socket down when
the deadline passes; the blocked read then fails and the step is a :class:`MailError` saying so.
"""

from __future__ import annotations

import smtplib
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import EmailMessage
from typing import Any

from core.bounded import BoundedLines, TooLarge
from core.deadline import MAX_ADDRESSES_TRIED, RESOLVER, LookupFailed, remaining
from core.errors import SweetspotError
from core.settings import EmailSettings
from core.text import visible

HOST_HINT = "Check SWEETSPOT_SMTP_HOST / SWEETSPOT_SMTP_PORT (alerts.email.host, alerts.email.port)"
AUTH_HINT = "Check SWEETSPOT_SMTP_USER / SWEETSPOT_SMTP_PASSWORD"
# A reply, all its lines together (RFC 5321 allows 512 bytes a line; EHLO lists a few dozen): one of
# endless ``250-`` lines took the collector to 1.8 GB. The answer kept and stored is its head.
MAX_REPLY_BYTES = 64 * 1024
MAX_ANSWER_CHARS = 500
TLS_HINT = "Check SWEETSPOT_SMTP_TLS (alerts.email.tls: none, starttls or ssl) against what the server speaks on this port"


class MailError(SweetspotError):
    """An e-mail the SMTP server did not accept (or could not be reached for); the hint names the setting."""


class _Answering:
    """Keeps the server's answer to DATA (``250 2.0.0 Ok: queued as …``, its first
    :data:`MAX_ANSWER_CHARS` characters), which sendmail discards; and reads every reply through
    :class:`core.bounded.BoundedLines`: smtplib joins the lines of a ``250-`` reply without end."""

    answer = ""
    file: Any = None  # smtplib.SMTP's, as the class attribute it declares
    sock: Any = None

    def getreply(self) -> tuple[int, bytes]:
        if self.file is None and self.sock is not None:
            self.file = BoundedLines(self.sock.makefile("rb"), MAX_REPLY_BYTES, "the SMTP server")
        if isinstance(self.file, BoundedLines):
            self.file.reset()
        try:
            return super().getreply()  # type: ignore[misc]
        except TooLarge:
            self.close()  # type: ignore[attr-defined]
            raise

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        """The connection, its host looked up within the delivery's deadline (core/deadline.py):
        ``socket.create_connection`` would look it up in this thread with no deadline at all, and
        the watchdog has no socket to shut yet. TLS still checks the host's name (``_host``)."""
        error: OSError = OSError(f"cannot connect to {host}")
        for _, address in RESOLVER.resolve(host, port, timeout)[:MAX_ADDRESSES_TRIED]:
            try:
                return super()._get_socket(address, port, remaining(timeout))  # type: ignore[misc]
            except OSError as exc:
                error = exc
        raise error

    def data(self, msg: Any) -> tuple[int, bytes]:
        code, text = super().data(msg)  # type: ignore[misc]
        self.answer = visible(f"{code} {text.decode(errors='replace')}", MAX_ANSWER_CHARS)
        return code, text


class _SMTP(_Answering, smtplib.SMTP):
    pass


class _SMTPSSL(_Answering, smtplib.SMTP_SSL):
    pass


class Deadline:
    """Shuts ``session``'s socket down when ``seconds`` have passed (unless left before): the one
    way to end a read that a server feeds a byte at a time. ``passed`` says whether it fired."""

    def __init__(self, session: smtplib.SMTP, seconds: float) -> None:
        self.session, self.seconds, self.passed = session, seconds, False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def _fire(self) -> None:
        self.passed = True
        sock = getattr(self.session, "sock", None)
        if sock is not None:
            try:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)  # wakes the read blocked on it, TLS or not
            except OSError:
                pass


class DeadlineError(MailError):
    """A step that did not end within its deadline (retried with backoff, as any unreachable server)."""


def _late(where: str, seconds: float, step: str) -> DeadlineError:
    return DeadlineError(f"the SMTP server {where} did not finish {step} within {seconds:g} s (a server that "
                         "answers too slowly, or trickles its answer)", f"{HOST_HINT}; alerts.email.timeout_s is the deadline")


@contextmanager
def connect(email: EmailSettings, password: str) -> Iterator[_SMTP | _SMTPSSL]:
    """An open, logged-in SMTP session; every failure is a :class:`MailError`. Connecting, greeting,
    TLS and login together end within ``email.timeout_s``."""
    where = f"{email.host}:{email.effective_port}"
    context = ssl.create_default_context()
    session: _SMTP | _SMTPSSL = (_SMTPSSL(timeout=email.timeout_s, context=context) if email.tls == "ssl"
                                 else _SMTP(timeout=email.timeout_s))  # fmt: skip
    session._host = email.host  # type: ignore[union-attr] # the TLS server name, which __init__ sets only with a host
    deadline = Deadline(session, email.timeout_s)
    try:
        with deadline:
            code, greeting = session.connect(email.host, email.effective_port)
            if code != 220:  # as smtplib's constructor checks when it connects
                raise smtplib.SMTPConnectError(code, greeting)
            if email.tls == "starttls":
                session.starttls(context=context)
            if email.user:
                session.login(email.user, password)
    except Exception as exc:
        session.close()
        raise (_late(where, email.timeout_s, "the greeting and login") if deadline.passed else translate(exc, where)) from None
    try:
        yield session
    finally:
        _close(session, email.timeout_s)


def send(session: _SMTP | _SMTPSSL, message: EmailMessage, where: str, deadline_s: float | None = None) -> str:
    """Send one message within ``deadline_s`` (the session's timeout when not given); returns the
    server's answer. Raises :class:`MailError` (:class:`DeadlineError` past the deadline)."""
    seconds = deadline_s if deadline_s is not None else float(session.timeout or 0) or 10.0
    deadline = Deadline(session, seconds)
    try:
        with deadline:
            refused = session.send_message(message)
    except Exception as exc:
        if deadline.passed:
            raise _late(where, seconds, "taking one message") from None
        raise translate(exc, where) from None
    answer = session.answer or "accepted"
    return f"{answer} (refused: {', '.join(refused)})" if refused else answer


def _close(session: smtplib.SMTP, seconds: float = 10.0) -> None:
    try:
        if session.sock is None:
            return
        with Deadline(session, seconds):
            session.quit()
    except Exception:  # noqa: BLE001 - the conversation is over either way
        session.close()


def translate(exc: BaseException, where: str) -> MailError:
    """One line for a failed SMTP conversation, with the setting to check."""
    if isinstance(exc, MailError):
        return exc
    if isinstance(exc, LookupFailed):  # the host's lookup, within the delivery's deadline
        return MailError(f"cannot resolve the SMTP host of {where} ({exc})", HOST_HINT)
    if isinstance(exc, TooLarge):
        return MailError(f"the SMTP server {where} sent a reply longer than {MAX_REPLY_BYTES:,} bytes: refused", HOST_HINT)
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
