"""One slow receiver costs only itself: an SMTP server and an HTTP receiver on 127.0.0.1 that
trickle their answer a byte at a time (or send one without end), beside a healthy channel that
still delivers, and a job that returns within the longest deadline."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlalchemy import select

from app.loader import load_settings
from app.notify import hooks
from app.notify.notifier import JOIN_GRACE_S, Notifier
from core.channels.webhook import CHANNEL as WEBHOOK
from db import schema
from db.engine import open_engine
from tests.notify_helpers import T0, state, write_states
from tests.support.http_server import serving
from tests.support.smtp_server import Mailbox, serve
from tests.test_notify_hooks import Clock, Sink

DEADLINE_S = 1.0
GAP_S = 0.05  # between two bytes of a trickle: each read gets something, far below any per-read timeout
SMTP_SCRIPT = {"greeting": b"220 slow.test ESMTP\r\n", "EHLO": b"250-slow.test\r\n250 8BITMIME\r\n", "HELO": b"250 ok\r\n",
               "MAIL": b"250 ok\r\n", "RCPT": b"250 ok\r\n", "DATA": b"354 go on\r\n", ".": b"250 2.0.0 queued\r\n",
               "QUIT": b"221 bye\r\n", "RSET": b"250 ok\r\n", "NOOP": b"250 ok\r\n"}  # fmt: skip


class Trickle:
    """An SMTP server that answers the step ``slow`` (``greeting``, ``EHLO``, ``MAIL``, ``DATA`` or
    ``.``: the answer to the message) one byte at a time, never ending it; others at once."""

    def __init__(self, slow: str) -> None:
        self.slow, self.stop, self.reached = slow, threading.Event(), threading.Event()

    def _answer(self, sock: socket.socket, step: str) -> None:
        if step != self.slow:
            sock.sendall(SMTP_SCRIPT[step])
            return
        self.reached.set()
        line = SMTP_SCRIPT[step].split(b"\r\n")[0][:3] + b"-"
        while not self.stop.is_set():  # a multi-line answer that never reaches its last line
            for byte in line + b"x" * 40 + b"\r\n":
                sock.sendall(bytes([byte]))
                if self.stop.wait(GAP_S):
                    return

    def handler(self) -> type[socketserver.BaseRequestHandler]:
        trickle = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock, data = self.request, False
                with contextlib.suppress(OSError):
                    trickle._answer(sock, "greeting")
                    reader = sock.makefile("rb")
                    for raw in reader:
                        if data:
                            if raw.rstrip(b"\r\n") == b".":
                                data = False
                                trickle._answer(sock, ".")
                            continue
                        verb = raw.split()[0].decode().upper() if raw.split() else ""
                        trickle._answer(sock, verb if verb in SMTP_SCRIPT else "NOOP")
                        data = data or verb == "DATA"
                        if verb == "QUIT":
                            return

        return Handler


@contextlib.contextmanager
def trickling_smtp(slow: str) -> Iterator[tuple[int, Trickle]]:
    trickle = Trickle(slow)
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), trickle.handler())
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.server_address[1], trickle
    finally:
        trickle.stop.set()
        server.shutdown()
        server.server_close()


def trickling_http(phase: str, stop: threading.Event) -> type[BaseHTTPRequestHandler]:
    """A receiver that trickles its status line, its headers, or a body without end; or sends a
    huge body fast (``flood``); or redirects (``redirect``)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            with contextlib.suppress(OSError):
                if phase == "redirect":
                    self.send_response(308)
                    self.send_header("Location", "https://moved.example.test/hook?token=s3cret")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if phase == "status":
                    self._drip(b"HTTP/1.1 200 OK\r\n" * 1000)
                    return
                self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                if phase == "headers":
                    self._drip(b"X-Slow: " + b"y" * 100_000)
                    return
                self.wfile.write(b"Content-Length: 10000000000\r\n\r\n")
                if phase == "flood":  # 10 GB announced and sent as fast as taken
                    block = b"z" * 65536
                    while not stop.is_set():
                        self.wfile.write(block)
                    return
                self._drip(b"ok " * 100_000)

        def _drip(self, data: bytes) -> None:
            for byte in data:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                if stop.wait(GAP_S):
                    return

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


def channels(tmp_path, smtp_port: int, hook_url: str) -> Any:
    path = tmp_path / "channels.toml"
    path.write_text(f"""
[alerts.email]
host = "127.0.0.1"
port = {smtp_port}
tls = "none"
from_address = "sweetspot@example.test"
to = ["ops@example.test"]
group_wait_s = "0s"
timeout_s = "{DEADLINE_S}s"

[alerts.webhook]
url = "{hook_url}"
group_wait_s = "0s"
timeout_s = "{DEADLINE_S}s"
""")
    return load_settings(path, {})


def rows(engine) -> dict[str, dict[str, Any]]:
    n = schema.notifications
    with engine.connect() as conn:
        return {r["channel"]: dict(r) for r in conn.execute(select(n)).mappings()}


def run_timed(notifier: Notifier) -> tuple[str, float]:
    start = time.monotonic()
    line = notifier.run_once()
    return line, time.monotonic() - start


# The longest deadline, the join's grace, and room for a loaded machine (composing the e-mail's charts
# alone took 1.5-2.7 s at load 14, and 1.5 s of room failed there): the trickles never end, so
# without the deadline a run would never return, and any finite bound shows the deadline held
BOUND_S = DEADLINE_S + JOIN_GRACE_S + 20.0


@pytest.mark.parametrize("slow", ["greeting", "EHLO", "MAIL", "DATA", "."])
def test_a_trickling_smtp_server_costs_only_the_email(tmp_path, slow):
    engine = open_engine(f"sqlite:///{tmp_path}/slow.db")
    sink = Sink()
    with trickling_smtp(slow) as (port, trickle), serving(sink.handler()) as base:
        notifier = Notifier(engine, channels(tmp_path, port, base + "/hook"), Clock(T0 + 1))
        write_states(engine, state("preemptions"))
        line, took = run_timed(notifier)
        assert trickle.reached.is_set()  # the server did reach its slow step
        assert took < BOUND_S, (line, took)
        assert len(sink.requests) == 1  # the webhook delivered all the same
        got = rows(engine)
        assert got["webhook"]["status"] == "sent"
        assert got["email"]["status"] == "queued" and got["email"]["due_at"] is not None
        assert f"within {DEADLINE_S:g} s" in got["email"]["last_error"]
    engine.dispose()


@pytest.mark.parametrize("phase", ["status", "headers", "body"])
def test_a_trickling_webhook_costs_only_the_webhook(tmp_path, phase):
    engine = open_engine(f"sqlite:///{tmp_path}/slow.db")
    mailbox, stop = Mailbox(), threading.Event()
    try:
        with serve(mailbox) as port, serving(trickling_http(phase, stop)) as base:
            notifier = Notifier(engine, channels(tmp_path, port, base + "/hook"), Clock(T0 + 1))
            write_states(engine, state("preemptions"), state("kv_cache", target="prod-8b"))
            line, took = run_timed(notifier)
            assert took < BOUND_S, (line, took)
            assert len(mailbox.messages) == 2
            n = schema.notifications
            with engine.connect() as conn:
                hooked = conn.execute(select(n.c.status, n.c.last_error).where(n.c.channel == "webhook")).all()
            # each POST passed its own deadline (the receiver trickles every answer): each waits for a retry
            assert len(hooked) == 2 and all(s == "queued" and f"within {DEADLINE_S:g} s" in e for s, e in hooked)
    finally:
        stop.set()
        engine.dispose()


def test_a_webhook_answer_without_end_is_read_bounded_and_delivery_counts(tmp_path):
    engine, stop = open_engine(f"sqlite:///{tmp_path}/flood.db"), threading.Event()
    try:
        with serve(Mailbox()) as port, serving(trickling_http("flood", stop)) as base:
            notifier = Notifier(engine, channels(tmp_path, port, base + "/hook"), Clock(T0 + 1))
            write_states(engine, state("preemptions"))
            line, took = run_timed(notifier)
            assert line == "2 queued, 2 sent, 0 failed" and took < BOUND_S
            assert rows(engine)["webhook"]["answer"].startswith("HTTP 200 zzzz")
            assert len(rows(engine)["webhook"]["answer"]) <= len("HTTP 200 ") + 200
    finally:
        stop.set()
        engine.dispose()


def test_a_redirecting_webhook_says_where_it_points(tmp_path):
    engine, stop = open_engine(f"sqlite:///{tmp_path}/moved.db"), threading.Event()
    with serve(Mailbox()) as port, serving(trickling_http("redirect", stop)) as base:
        notifier = Notifier(engine, channels(tmp_path, port, base + "/hook"), Clock(T0 + 1))
        write_states(engine, state("preemptions"))
        notifier.run_once()
        row = rows(engine)["webhook"]
    assert row["status"] == "failed"  # given up at once: re-POSTing to the same URL cannot help
    assert "HTTP 308" in row["last_error"] and "https://moved.example.test/hook?token=***" in row["last_error"]
    assert "s3cret" not in row["last_error"]
    engine.dispose()


@given(deadline=st.sampled_from([0.3, 0.6, 0.9]), slow=st.sampled_from(["greeting", "DATA", "."]))
@hsettings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_smtp_deadline_holds_at_the_bound_whatever_it_is(deadline, slow):
    """At the bound: a delivery ends no sooner than its deadline and not much later."""
    from app.notify import smtp
    from core.settings import EmailSettings

    email = EmailSettings(host="127.0.0.1", port=0, tls="none", from_address="a@example.test", to=("b@example.test",),
                          timeout_s=deadline)  # fmt: skip
    with trickling_smtp(slow) as (port, _):
        email = EmailSettings(**{**email.__dict__, "port": port})
        start = time.monotonic()
        with pytest.raises(smtp.MailError, match=f"within {deadline:g} s"):
            with smtp.connect(email, "") as session:
                from email.message import EmailMessage

                msg = EmailMessage()
                msg["From"], msg["To"], msg["Subject"] = "a@example.test", "b@example.test", "t"
                smtp.send(session, msg, "here", deadline)
        took = time.monotonic() - start
    assert deadline <= took < deadline + 1.0


def test_the_webhook_deadline_holds_at_the_bound():
    from core.settings import WebhookSettings

    stop = threading.Event()
    try:
        with serving(trickling_http("body", stop)) as base:
            sender = hooks.Sender(WEBHOOK, WebhookSettings(url=base + "/hook", timeout_s=0.5), "")
            from app.notify.outbox import Notification

            item = Notification(id=1, group_key="g", kind="firing", status="queued", recipients=(), subject="s",
                                body_text="b", body_html="", images={}, alerts=(), created_at=T0, due_at=T0, attempts=0,
                                last_error=None, sent_at=None, answer=None, channel="webhook")  # fmt: skip
            start = time.monotonic()
            with pytest.raises(hooks.DeadlineError, match="within 0.5 s"):
                sender.send(item, T0)
            assert 0.5 <= time.monotonic() - start < 1.5
    finally:
        stop.set()
