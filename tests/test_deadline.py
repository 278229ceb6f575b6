"""Chokepoint (b): one deadline per job, drawn on by every lookup (core/deadline.py).

Host names whose lookups never answer (an injected lookup that blocks until the test ends) cost
their own GET, their own notification, their own thread, never another target's lookup or round,
however many rounds pass; a hypothesis fuzzer holds the resolver for any mix of names."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlalchemy import select

from app.notify.notifier import Notifier
from collectors.fetch import Fetcher, Get
from core import deadline
from core.deadline import Deadline, LookupFailed, Resolver
from core.settings import HttpSettings
from db import schema
from db.engine import open_engine
from tests.notify_helpers import T0, state, write_states
from tests.support.http_server import serving
from tests.support.smtp_server import Mailbox, serve
from tests.test_notify_deadline import DEADLINE_S, channels
from tests.test_notify_hooks import Clock

PAGE = b"vllm:num_requests_running 1\n"


class Hanging:
    """A lookup that never answers for names ending in ``.hang`` (until :meth:`release`), counts
    the lookups it was asked for, and answers every other name as 127.0.0.1."""

    def __init__(self) -> None:
        self.released, self.asked, self._lock = threading.Event(), 0, threading.Lock()

    def __call__(self, host: str, port: int, **_: object) -> list[tuple[object, ...]]:
        with self._lock:
            self.asked += 1
        if host.endswith(".hang"):
            self.released.wait(120)
            raise socket.gaierror(socket.EAI_AGAIN, "released")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    def release(self) -> None:
        self.released.set()


@pytest.fixture
def hanging(monkeypatch: pytest.MonkeyPatch) -> Iterator[Hanging]:
    lookup = Hanging()
    resolver = Resolver(lookup, limit=64)
    monkeypatch.setattr(deadline, "RESOLVER", resolver)
    try:
        yield lookup
    finally:
        lookup.release()


def page_handler() -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


def test_names_whose_lookups_never_answer_hold_no_other_target_in_any_round(hanging) -> None:
    # 30 names that never answer beside a target named "localhost.test" (looked up as well): every
    # round reads the target, the hung ones fail in their own round, and the threads they hold
    # stay one per name however many rounds ask for them again.
    fetcher = Fetcher()
    try:
        with serving(page_handler()) as base:
            port = base.rsplit(":", 1)[1]
            for _ in range(4):
                gets = [Get(f"h{i}", f"http://n{i}.hang:{port}/metrics", HttpSettings()) for i in range(30)]
                gets.append(Get("ok", f"http://localhost.test:{port}/metrics", HttpSettings()))
                answers = {a.key: a for a in fetcher.fetch_many(gets, 0.5)}
                assert answers["ok"].text == PAGE.decode()
                hung = [answers[f"h{i}"].error for i in range(30)]
                assert all(e is not None and "no answer within 0.5 s" in e.one_line() for e in hung)
                assert deadline.RESOLVER.in_flight() == 30  # one lookup a name, not one a round
    finally:
        fetcher.close()


def test_a_lookup_waits_only_what_the_job_has_left(hanging) -> None:
    resolver = deadline.RESOLVER
    with deadline.bound(0.3) as job:
        with pytest.raises(LookupFailed, match=r"the lookup of 'a.hang' did not answer within"):
            resolver.resolve("a.hang", 80, timeout_s=60)  # 60 s asked, the job's 0.3 s given
        assert job.passed
    assert resolver.resolve("fine.test", 80, 1) == [(socket.AF_INET, "127.0.0.1")]
    assert resolver.resolve("::1", 80, 0) == [(socket.AF_INET6, "::1")]  # an address: no lookup, no wait


def test_past_the_cap_a_lookup_is_refused_at_once_not_a_thread_more() -> None:
    lookup = Hanging()
    resolver = Resolver(lookup, limit=3)
    try:
        for i in range(3):
            with pytest.raises(LookupFailed):
                resolver.resolve(f"x{i}.hang", 80, 0.01)
        with pytest.raises(LookupFailed, match="3 lookups are unanswered already"):
            resolver.resolve("y.test", 80, 5)
        assert lookup.asked == 3 and resolver.in_flight() == 3
    finally:
        lookup.release()


names = st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.booleans()), min_size=1, max_size=12)


@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=names, budget=st.floats(0.0, 0.05))
def test_any_mix_of_names_costs_each_its_own_deadline_and_one_thread_a_name(names, budget) -> None:
    lookup = Hanging()
    resolver = Resolver(lookup, limit=64)

    async def ask(name: str) -> object:
        with deadline.bound(budget if name.endswith(".hang") else 60):  # one that answers is not raced
            try:
                return await resolver.aresolve(name, 80, timeout_s=3600)
            except LookupFailed as exc:
                return exc

    async def all_of() -> list[object]:
        return await asyncio.gather(*(ask(f"{n}.hang" if hung else f"{n}.test") for n, hung in names))

    try:
        start = time.monotonic()
        got = asyncio.run(all_of())
        took = time.monotonic() - start
        for (_, hung), answer in zip(names, got, strict=True):
            assert isinstance(answer, LookupFailed) if hung else answer == [(socket.AF_INET, "127.0.0.1")]
        hung_names = {n for n, hung in names if hung}
        assert resolver.in_flight() == len(hung_names)  # never more than one lookup a name
        assert took < 30  # each gave up at its budget (≤ 0.05 s): never the lookup's own end
    finally:
        lookup.release()


def test_the_deadline_a_block_sets_never_outlives_the_one_around_it() -> None:
    with deadline.bound(0.2) as outer, deadline.bound(30) as inner:
        assert inner is outer and deadline.remaining(10) <= 0.2
    assert deadline.remaining(10) == 10 and deadline.remaining() == float("inf")
    assert Deadline(-5).passed


class OneHang:
    """A webhook receiver that never answers the first notification it is sent (until the test
    ends) and answers every other at once."""

    def __init__(self) -> None:
        self.stop, self.received, self.first = threading.Event(), [], threading.Lock()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if sink.first.acquire(blocking=False):  # the first one only, whichever it is
                    sink.stop.wait(60)
                    return
                sink.received.append(body)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


def test_a_receiver_hanging_on_one_notification_holds_no_other_of_the_channel(tmp_path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path}/one.db")
    receiver = OneHang()
    try:
        with serve(Mailbox()) as port, serving(receiver.handler()) as base:
            notifier = Notifier(engine, channels(tmp_path, port, base + "/hook"), Clock(T0 + 1))
            write_states(engine, state("preemptions", target="hang-me"), state("kv_cache", target="a"),
                         state("kv_cache", target="b"), state("preemptions", target="c"))
            notifier.run_once()
            n = schema.notifications
            with engine.connect() as conn:
                hooked = conn.execute(select(n.c.status, n.c.last_error).where(n.c.channel == "webhook")).all()
            late = [(s, e) for s, e in hooked if s != "sent"]
            # the one it hangs on failed alone, at its own deadline, and waits for a retry
            assert len(late) == 1 and late[0][0] == "queued" and f"within {DEADLINE_S:g} s" in late[0][1]
            # every other notification of the channel was sent in the same turn
            assert len(hooked) >= 3 and len(receiver.received) == len(hooked) - 1
    finally:
        receiver.stop.set()
        engine.dispose()


@contextlib.contextmanager
def smtp_hanging_on_the_first() -> Iterator[tuple[int, list[bytes]]]:
    """An SMTP server that never answers the end of the first message it is sent and accepts others."""
    import socketserver

    stop, accepted, first = threading.Event(), [], threading.Lock()

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            with contextlib.suppress(OSError):
                self.wfile.write(b"220 hang.test ESMTP\r\n")
                data, message = False, b""
                for raw in self.rfile:
                    if data:
                        if raw.rstrip(b"\r\n") == b".":
                            data = False
                            if first.acquire(blocking=False):
                                stop.wait(60)
                                return
                            accepted.append(message)
                            self.wfile.write(b"250 2.0.0 queued\r\n")
                        else:
                            message += raw
                        continue
                    verb = raw.split()[0].upper() if raw.split() else b""
                    answer = {b"EHLO": b"250 hang.test\r\n", b"DATA": b"354 go on\r\n", b"QUIT": b"221 bye\r\n"}
                    self.wfile.write(answer.get(verb, b"250 ok\r\n"))
                    data, message = verb == b"DATA", b"" if verb == b"DATA" else message
                    if verb == b"QUIT":
                        return

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.server_address[1], accepted
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


def test_an_smtp_server_hanging_on_one_message_holds_no_other(tmp_path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path}/mail.db")
    receiver = OneHang()
    try:
        with smtp_hanging_on_the_first() as (port, accepted), serving(receiver.handler()) as base:
            notifier = Notifier(engine, channels(tmp_path, port, base + "/hook"), Clock(T0 + 1))
            write_states(engine, state("preemptions", target="a"), state("kv_cache", target="b"), state("preemptions", target="c"))
            assert notifier.queue(T0 + 1)
            notifier.deliver(T0 + 1)
            n = schema.notifications
            with engine.connect() as conn:
                mails = conn.execute(select(n.c.status, n.c.last_error).where(n.c.channel == "email")).all()
            late = [(s, e) for s, e in mails if s != "sent"]
            assert len(late) == 1 and late[0][0] == "queued" and f"within {DEADLINE_S:g} s" in late[0][1]
            assert len(mails) >= 2 and len(accepted) == len(mails) - 1
    finally:
        receiver.stop.set()
        engine.dispose()
