"""HTTP fetching shared by every collector: one place that turns transport failures into ScrapeError.

Scrapes are plain GETs of small pages over kept-alive connections, every few seconds, three per
target. The CPU of a GET is most of the collector's budget, so plain ``http://`` GETs go through a
minimal HTTP/1.1 client on a raw socket: measured against the simulator (bench/bench_collector.py),
a kept-alive GET of vLLM's 21.5 KB /metrics cost 1.27 ms of CPU with httpx, 0.42 ms with
``http.client`` (most of it parsing headers through ``email``) and about 0.13 ms on a raw socket.
The raw client understands Content-Length, ``Transfer-Encoding: chunked``, bodies delimited by the
server closing, and ``Connection: close``; anything else (HTTPS, 1xx answers, other transfer codings,
a status line it cannot read) goes to ``http.client``, which stays the reference behaviour. httpx
stays the client of the load sweep, where streaming and asyncio matter more than CPU per GET.

A collector round sends every request first (:meth:`ScrapeClient.send`), then reads the answers in
the order they arrive (:meth:`ScrapeClient.arrivals`, :meth:`ScrapeClient.receive`): one slow or
unreachable source no longer delays the others, a round lasts about its slowest source, and the
process sleeps once per round rather than once per GET (each wake-up costs ~0.1-0.2 ms of CPU through
cold caches). No threads for the raw client's requests: each in flight has its own kept-alive
connection (a small pool per origin), and one ``poll`` waits for all of them. Host lookups run on
threads (collectors/resolver.py), since ``getaddrinfo`` cannot be waited for with a timeout, and so
does each GET through ``http.client``: it bounds each socket wait, not the whole answer, so the
round waits for it with the GET's deadline and shuts its socket down at that deadline. Both clients
look hosts up through the same resolver.
"""

from __future__ import annotations

import http.client
import math
import re
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

from app.errors import ScrapeError
from collectors import httpwire
from collectors.httpwire import AnswerTooSlow, RawConnection, Stale, Unsupported, ready
from collectors.resolver import Resolver, no_answer

# Ask for the classic text format: some servers answer OpenMetrics when the client allows it.
ACCEPT_TEXT = "text/plain;version=0.0.4;q=1.0, */*;q=0.1"
USER_AGENT = "sweetspot-collector"
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, http.client.CannotSendRequest)
_UNSAFE = re.compile(r"[\x00-\x20\x7f-\U0010ffff]")  # what may not go into a request line as is
_ROUTES_MAX = 256
_LAGGARD_WAIT_MAX_S = 0.02
_POOL_MAX = 4  # idle kept-alive connections per origin: one per source a round reads from it at once
Origin = tuple[str, str, int]
_Route = tuple[Origin, str, bytes | None]  # origin, path, the raw client's request (None: http.client)


class NotHttpUrl(ValueError):
    """A URL the client cannot GET (not http:// or https://, or no host)."""


class Pending:
    """A GET sent by :meth:`ScrapeClient.send` whose answer is not read yet.

    Holds the connection the request went out on. Its error, if sending failed, is raised by
    :meth:`ScrapeClient.receive`, where every answer is read, so failures surface in one place.
    """

    __slots__ = ("url", "timeout_s", "route", "connection", "reused", "error", "deadline", "expired", "fallback")

    def __init__(self, url: str, timeout_s: float) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.route: _Route | None = None
        # The raw connection carrying the request (None for a GET through http.client: see fallback).
        self.connection: RawConnection | None = None
        self.reused = False  # the raw connection was kept alive from an earlier GET (it may be stale)
        self.error: Exception | None = None
        self.deadline = 0.0  # time.monotonic() by which the answer (or the handshake) must begin, and the answer be complete
        self.expired = False  # arrivals() saw the deadline pass with nothing to read
        self.fallback: _Fallback | None = None  # the GET through http.client, under way on its thread


class ScrapeClient:
    """Kept-alive connections, a few per origin (scheme, host, port). Safe to share between threads.

    ``get`` is one GET start to finish. A round of several GETs sends them all with ``send``, then
    reads each answer with ``receive`` as ``arrivals`` yields it; a ``Pending`` belongs to the thread
    that sent it.
    """

    def __init__(self) -> None:
        self._idle: dict[Origin, list[RawConnection | http.client.HTTPConnection]] = {}
        self._fallback: set[Origin] = set()  # origins the raw client gave up on: straight to http.client
        self._routes: dict[str, _Route] = {}
        self._lags: dict[str, float] = {}  # URL → seconds from its request sent to its answer begun, last time
        self._lock = threading.Lock()
        self._resolver = Resolver()  # host lookups bounded in time and kept a minute (collectors/resolver.py)
        self._wake: tuple[socket.socket, socket.socket] | None = None  # see _wake_fd, made when first needed

    def get(self, url: str, timeout_s: float) -> tuple[int, bytes]:
        """GET ``url``; returns (status, body). Transport errors propagate as OSError/HTTPException."""
        return self.receive(self.send(url, timeout_s))

    def send(self, url: str, timeout_s: float) -> Pending:
        """Start a GET of ``url`` without waiting for anything; never raises (see :meth:`receive`).

        On the raw client the request leaves now, on an idle kept-alive connection of the origin or a
        new one (whose handshake may still be under way: the request then leaves once it completes,
        in ``arrivals`` or ``receive``). A GET for ``http.client`` (HTTPS, fallbacks) starts now on
        its own thread, and ``receive`` waits for it until the deadline.
        """
        pending = Pending(url, timeout_s)
        try:
            pending.route = route = self._routes.get(url) or self._route(url)
            self._send(pending, route)
        except Exception as exc:
            if isinstance(pending.connection, RawConnection):
                pending.connection.close()
                pending.connection = None
            pending.error = exc
        return pending

    def _send(self, pending: Pending, route: _Route) -> None:
        origin, _, request = route
        with self._lock:
            idle = self._idle.get(origin)
            connection = idle.pop() if idle else None
            raw_ok = origin not in self._fallback
        if not raw_ok or request is None:
            if isinstance(connection, RawConnection):
                connection.close()
                connection = None
            pending.deadline = time.monotonic() + pending.timeout_s
            self._start_fallback(pending, origin, connection)
            return
        if isinstance(connection, http.client.HTTPConnection):
            connection.close()
            connection = None
        pending.deadline = time.monotonic() + pending.timeout_s
        if connection is not None:
            try:
                connection.send(request, pending.timeout_s)
                pending.connection, pending.reused = connection, True
                return
            except (BrokenPipeError, ConnectionResetError):
                connection.close()  # closed by the server while idle: a fresh connection below
            except BaseException:
                connection.close()
                raise
        addresses = self._resolver.addresses(origin[1], origin[2], pending.timeout_s)
        pending.connection = connection = RawConnection.start(addresses, pending.timeout_s)
        if connection.connecting and ready(connection.sock, select.POLLOUT, 0.0):
            connection.connected()  # loopback and near hosts: the handshake is already done
        if not connection.connecting:
            connection.send(request, pending.timeout_s)

    def arrivals(self, pendings: Iterable[Pending]) -> Iterator[Pending]:
        """Yield each of ``pendings`` once :meth:`receive` can read it without waiting for it to begin.

        Answers come in the order they arrive, one ``poll`` waiting for all; a GET whose answer has
        not begun within its timeout is yielded expired (``receive`` raises TimeoutError). A GET that
        failed to send is yielded whenever no answer is ready to be read; a GET through
        ``http.client`` once its thread is done (the thread wakes this ``poll``) or its deadline has
        passed, so a slow one never holds the answers already in.

        Each wake-up costs CPU, and answers a few milliseconds apart would wake the process once
        each; so it first waits for the answer that came last in the previous round alone, up to
        twice its time then plus 2 ms (at most 20 ms): usually the others are in by then, and all
        are read after a single wake-up. A source that turns slow delays the others by 20 ms at most.
        """
        poller = select.poll()
        waiting: dict[int, Pending] = {}
        later: list[Pending] = []
        for pending in pendings:
            if pending.error is None and isinstance(pending.connection, RawConnection):
                self._watch(poller, waiting, pending)
            else:
                later.append(pending)
        # GETs through http.client finish on their own threads, which wake this poll when done
        wake = self._wake_fd() if waiting and any(p.fallback is not None for p in later) else None
        if wake is not None:
            poller.register(wake, select.POLLIN)
        laggard = self._wait_for_laggard(waiting) if len(waiting) > 1 and not later else None
        while waiting:
            if len(waiting) == 1 and not later:
                (pending,) = waiting.values()
                connection = pending.connection
                assert isinstance(connection, RawConnection)
                if not connection.connecting and pending.deadline - time.monotonic() > 0.9 * pending.timeout_s:
                    yield pending  # a lone GET just sent: its blocking read waits as well as poll would
                    return
            ready_later = [p for p in later if _readable(p)]
            left = min(p.deadline for p in (*waiting.values(), *later)) - time.monotonic()
            events = poller.poll(0 if ready_later else max(0, math.ceil(left * 1000)))
            if wake is not None and any(fd == wake for fd, _ in events):
                self._drain_wake()
                events = [(fd, event) for fd, event in events if fd != wake]
                ready_later = [p for p in later if _readable(p)]
            if not events:
                now = time.monotonic()
                # done, or past its deadline (``receive`` then gives it up)
                ready_later += [p for p in later if p.deadline <= now and p not in ready_later]
                if ready_later:
                    later.remove(ready_later[0])
                    yield ready_later[0]
                    continue
                for fd, pending in list(waiting.items()):
                    if pending.deadline <= now:
                        self._unwatch(poller, waiting, fd)
                        pending.expired = True
                        yield pending
                continue
            for fd, _ in events:
                pending = self._unwatch(poller, waiting, fd)
                connection = pending.connection
                assert isinstance(connection, RawConnection)
                if connection.connecting:
                    try:
                        self._connected(pending, connection)
                    except Exception as exc:
                        connection.close()
                        pending.error = exc
                        yield pending
                        continue
                    self._watch(poller, waiting, pending)
                    continue
                if laggard is None or pending is laggard:  # the others were in before we looked
                    self._lags[pending.url] = time.monotonic() - (pending.deadline - pending.timeout_s)
                yield pending
            laggard = None
        if wake is not None:
            poller.unregister(wake)
        yield from later  # each read waits for its thread, until its deadline at most

    def _wake_fd(self) -> int:
        """The file descriptor a GET's thread through ``http.client`` makes readable when done."""
        with self._lock:
            if self._wake is None:
                self._wake = socket.socketpair()
                for end in self._wake:
                    end.setblocking(False)
            return self._wake[0].fileno()

    def _drain_wake(self) -> None:
        assert self._wake is not None
        try:
            while self._wake[0].recv(4096):
                pass
        except BlockingIOError:
            pass

    def _fallback_done(self) -> None:
        """Called by a GET's thread through ``http.client`` when it is done: wake ``arrivals``."""
        wake = self._wake
        if wake is not None:
            try:
                wake[1].send(b"x")
            except OSError:
                pass  # full (a wake-up is pending anyway) or closed (the client is closing)

    def _wait_for_laggard(self, waiting: dict[int, Pending]) -> Pending | None:
        """Wait a little for the answer expected last (see ``arrivals``); returns it, None if none is known."""
        lags = self._lags
        laggard = max(waiting.values(), key=lambda p: lags.get(p.url, 0.0))
        lag = lags.get(laggard.url)
        connection = laggard.connection
        if lag is None or not isinstance(connection, RawConnection) or connection.connecting:
            return None
        ready(connection.sock, select.POLLIN, min(2 * lag + 0.002, _LAGGARD_WAIT_MAX_S))
        return laggard

    @staticmethod
    def _watch(poller: select.poll, waiting: dict[int, Pending], pending: Pending) -> None:
        connection = pending.connection
        assert isinstance(connection, RawConnection)
        fd = connection.sock.fileno()
        poller.register(fd, select.POLLOUT if connection.connecting else select.POLLIN)
        waiting[fd] = pending

    @staticmethod
    def _unwatch(poller: select.poll, waiting: dict[int, Pending], fd: int) -> Pending:
        poller.unregister(fd)
        return waiting.pop(fd)

    def _connected(self, pending: Pending, connection: RawConnection) -> None:
        """The socket of a connection under way became writable: send the request once connected."""
        connection.connected()
        if connection.connecting:  # that address failed: the next one is under way, with its own time
            pending.deadline = time.monotonic() + pending.timeout_s
            return
        assert pending.route is not None and pending.route[2] is not None
        connection.send(pending.route[2], pending.timeout_s)
        pending.deadline = time.monotonic() + pending.timeout_s

    def receive(self, pending: Pending) -> tuple[int, bytes]:
        """Read the answer to ``pending``, waiting for it if need be; returns (status, body).

        Transport errors propagate as OSError/HTTPException; TimeoutError when no answer began within
        the timeout. A kept-alive connection found closed by the server gets one fresh try.
        """
        if pending.error is not None:
            raise pending.error
        assert pending.route is not None
        origin, _, request = pending.route
        connection = pending.connection
        if isinstance(connection, RawConnection):
            assert request is not None
            try:
                return self._raw_receive(pending, connection, origin, request)
            except Unsupported:
                with self._lock:
                    self._fallback.add(origin)
                # asked again through http.client, in what is left of the GET's time
                self._start_fallback(pending, origin, None)
        assert pending.fallback is not None
        return pending.fallback.wait(pending.deadline)

    def abandon(self, pending: Pending) -> None:
        """Close the connection of a GET that will not be read (its answer would confuse the next one)."""
        if pending.fallback is not None:
            pending.fallback.cancel()
        elif pending.connection is not None and pending.error is None:
            pending.connection.close()

    def _raw_receive(
        self, pending: Pending, connection: RawConnection, origin: Origin, request: bytes
    ) -> tuple[int, bytes]:
        try:
            if pending.expired:
                raise TimeoutError("timed out")
            while connection.connecting:
                if not ready(connection.sock, select.POLLOUT, pending.deadline - time.monotonic()):
                    raise TimeoutError("timed out")
                self._connected(pending, connection)
            status, body, reusable = connection.read(pending.reused, pending.deadline)
        except Stale:
            # The server closed an idle kept-alive connection: one fresh try, as browsers do.
            connection.close()
            connection = RawConnection.dial(self._resolver.addresses(origin[1], origin[2], pending.timeout_s), pending.timeout_s)
            try:
                connection.send(request, pending.timeout_s)
                status, body, reusable = connection.read(False, time.monotonic() + pending.timeout_s)
            except BaseException:
                connection.close()
                raise
        except BaseException:
            connection.close()
            raise
        if reusable:
            self._keep(origin, connection)
        else:
            connection.close()
        return status, body

    def _route(self, url: str) -> _Route:
        """Origin, path and raw request bytes (None: not for the raw client) of ``url``, remembered.

        A collector GETs the same few URLs every round: splitting and checking them once saves
        ~10 µs of CPU per GET.
        """
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise NotHttpUrl("not an http(s) URL")
        origin = (parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = parts.netloc.rpartition("@")[2]
        request = None
        if parts.scheme == "http" and not _UNSAFE.search(path + host):
            request = (
                f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: {ACCEPT_TEXT}\r\n"
                f"User-Agent: {USER_AGENT}\r\nAccept-Encoding: identity\r\n\r\n"
            ).encode("ascii")
        with self._lock:
            if len(self._routes) >= _ROUTES_MAX:
                self._routes.clear()  # URLs built per call must not grow memory forever
                self._lags.clear()
            self._routes[url] = route = (origin, path, request)
        return route

    def close(self) -> None:
        with self._lock:
            for idle in self._idle.values():
                for connection in idle:
                    connection.close()
            self._idle.clear()
            if self._wake is not None:
                for end in self._wake:
                    end.close()
                self._wake = None

    def _keep(self, origin: Origin, connection: RawConnection | http.client.HTTPConnection) -> None:
        with self._lock:
            idle = self._idle.setdefault(origin, [])
            if len(idle) < _POOL_MAX:
                idle.append(connection)
                return
        connection.close()

    def _start_fallback(self, pending: Pending, origin: Origin, connection: http.client.HTTPConnection | None) -> None:
        """Start ``pending``'s GET through ``http.client`` on its own thread (``connection``: a kept
        one of the origin, or None for a new one)."""
        assert pending.route is not None
        path, timeout_s = pending.route[1], pending.timeout_s
        job = pending.fallback = _Fallback(timeout_s, self._fallback_done)
        threading.Thread(
            target=job.run, args=(lambda: self._client_get(job, origin, connection, path, timeout_s),),
            name="sweetspot-http", daemon=True,
        ).start()

    def _client_get(
        self, job: _Fallback, origin: Origin, connection: http.client.HTTPConnection | None, path: str, timeout_s: float
    ) -> tuple[int, bytes]:
        reused = connection is not None
        connection = job.use(connection or self._connect(origin, timeout_s, job))
        connection.timeout = timeout_s
        try:
            status, body = _request(connection, path, job)
        except _STALE:
            connection.close()
            if not reused:
                raise
            # The server closed an idle kept-alive connection: one fresh try, as browsers do.
            connection = job.use(self._connect(origin, timeout_s, job))
            status, body = _request(connection, path, job)
        except BaseException:
            connection.close()
            raise
        if job.finish(connection):
            self._keep(origin, connection)
        return status, body

    def _connect(self, origin: Origin, timeout_s: float, job: _Fallback) -> http.client.HTTPConnection:
        scheme, host, port = origin
        connection: http.client.HTTPConnection
        if scheme == "https":
            connection = http.client.HTTPSConnection(host, port, timeout=timeout_s, context=ssl.create_default_context())
        else:
            connection = http.client.HTTPConnection(host, port, timeout=timeout_s)

        def dial(address: Any, timeout: Any, source_address: Any = None) -> socket.socket:
            # http.client would look the host up itself, for as long as the system's resolver takes;
            # the client's resolver bounds lookups and keeps their answers, as for the raw client.
            job.looking_up = host
            addresses = self._resolver.addresses(host, port, timeout_s)
            job.looking_up = None
            return RawConnection.dial(addresses, timeout).sock

        # HTTPConnection.connect opens its socket through this attribute (HTTPS wraps it after)
        connection._create_connection = dial  # type: ignore[attr-defined]
        return connection


class _Fallback:
    """A GET through ``http.client``, run on a thread of its own so that the round can wait for it
    with the GET's deadline.

    http.client bounds each socket wait by the timeout, not the whole answer: a server trickling its
    answer in (HTTPS targets, or an origin the raw client gave up on) would hold the round, and every
    later round, for as long as it liked. At the deadline, :meth:`wait` shuts the socket down, which
    ends the thread's read, and the GET fails as a raw one would. A thread per GET costs ~0.1 ms of
    CPU (a thread started and joined: 0.10 ms best, 0.13 ms median on the development machine),
    small beside what TLS costs such a GET.
    """

    __slots__ = (
        "timeout_s", "notify", "done", "result", "error", "connection", "looking_up", "began", "cancelled", "lock",
    )

    def __init__(self, timeout_s: float, notify: Callable[[], None]) -> None:
        self.timeout_s = timeout_s
        self.notify = notify  # called once done (ScrapeClient.arrivals may be waiting for it)
        self.done = threading.Event()
        self.result: tuple[int, bytes] | None = None
        self.error: BaseException | None = None
        self.connection: http.client.HTTPConnection | None = None
        self.looking_up: str | None = None  # the host being looked up, while it is
        self.began = False  # the answer's head was read: a timeout now is a slow answer, not none
        self.cancelled = False
        self.lock = threading.Lock()

    def run(self, get: Callable[[], tuple[int, bytes]]) -> None:
        try:
            self.result = get()
        except BaseException as exc:  # handed to the waiting thread, which raises it
            self.error = exc
        self.done.set()
        self.notify()

    def use(self, connection: http.client.HTTPConnection) -> http.client.HTTPConnection:
        """Note the connection the GET goes on (for :meth:`cancel`); raises if given up already."""
        with self.lock:
            self.connection = connection
            cancelled = self.cancelled
        if cancelled:
            connection.close()
            raise TimeoutError("timed out")
        return connection

    def finish(self, connection: http.client.HTTPConnection) -> bool:
        """Whether ``connection`` may be kept for the next GET (not when the GET was given up)."""
        with self.lock:
            if not self.cancelled:
                return True
        connection.close()
        return False

    def wait(self, deadline: float) -> tuple[int, bytes]:
        """The answer, once the thread has it; past ``deadline``, the GET is given up and raises."""
        if not self.done.wait(max(0.0, deadline - time.monotonic())):
            self.cancel()
            host = self.looking_up
            if host is not None:  # as the resolver says it, when its own wait ends first
                raise no_answer(host, self.timeout_s)
            raise AnswerTooSlow("timed out") if self.began else TimeoutError("timed out")
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result

    def cancel(self) -> None:
        """Give the GET up: shut its socket down so that a read under way ends now."""
        with self.lock:
            self.cancelled = True
            sock = self.connection.sock if self.connection is not None else None
        if sock is not None:
            try:
                # the plain socket's shutdown, under TLS too: SSLSocket's own would drop its TLS state
                # while the GET's thread may be reading through it
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass  # already closed


def _readable(pending: Pending) -> bool:
    """Whether ``receive`` can read a GET not waited for by ``poll`` now: one that failed to send,
    or one through ``http.client`` whose thread is done."""
    return pending.fallback is None or pending.fallback.done.is_set()


def _request(connection: http.client.HTTPConnection, path: str, job: _Fallback) -> tuple[int, bytes]:
    connection.request("GET", path, headers={"Accept": ACCEPT_TEXT, "User-Agent": USER_AGENT})
    response = connection.getresponse()
    job.began = True
    body = response.read(httpwire.MAX_BODY_BYTES + 1)
    if len(body) > httpwire.MAX_BODY_BYTES:
        connection.close()
        raise ScrapeError(f"the answer is larger than the {httpwire.MAX_BODY_BYTES} bytes allowed")
    if response.will_close:
        connection.close()
    return response.status, body


def fetch_text(url: str, timeout_s: float, client: ScrapeClient | None = None, hint: str = "") -> str:
    """GET ``url`` and return its body as text; any failure raises ScrapeError naming the URL."""
    own = client is None
    client = client or ScrapeClient()
    try:
        return receive_text(client, client.send(url, timeout_s), hint)
    finally:
        if own:
            client.close()


def receive_text(client: ScrapeClient, pending: Pending, hint: str = "") -> str:
    """The body of a GET sent with :meth:`ScrapeClient.send`, as text; any failure raises ScrapeError
    naming the URL (and, for a timeout, the seconds allowed)."""
    url, timeout_s = pending.url, pending.timeout_s
    try:
        status, body = client.receive(pending)
    except NotHttpUrl:
        raise ScrapeError(f"{url!r} is not an http:// or https:// URL", hint) from None
    except ssl.SSLCertVerificationError as exc:  # before OSError; it is a ValueError too
        raise ScrapeError(
            f"cannot reach {url} (its TLS certificate is not trusted here: {exc.verify_message})",
            "Trust the server's CA on this machine: add it to the system's CA store, or point SSL_CERT_FILE at it",
        ) from None
    except AnswerTooSlow:
        raise ScrapeError(
            f"{url}: the answer began but was not complete within {timeout_s:g} s"
            " (a server that is only slow needs a larger scrape_timeout_s)", hint
        ) from None
    except TimeoutError:
        raise ScrapeError(f"cannot reach {url} (no answer within {timeout_s:g} s)", hint) from None
    except ConnectionRefusedError:
        raise ScrapeError(f"cannot reach {url} (connection refused)", hint) from None
    except ScrapeError as exc:
        raise ScrapeError(f"{url}: {exc}", hint) from None
    except (OSError, http.client.HTTPException) as exc:
        raise ScrapeError(f"cannot reach {url} ({_reason(exc)})", hint) from None
    if status != 200:
        raise ScrapeError(f"{url} answered HTTP {status}", hint)
    return body.decode("utf-8", errors="replace")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, socket.gaierror):
        return f"unknown host: {exc.strerror or exc}"
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]
