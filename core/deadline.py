"""One deadline per job, drawn on by every network step inside it: host lookups, connections, reads.

A job (a scrape's GET, one notification's delivery, a Prometheus request, a sweep's request) sets
its :class:`Deadline` with :func:`bound`; every step below it asks :func:`remaining` how long it may
still take, so no step can outlive the job that started it (docs/security.md, chokepoint (b)).

Host lookups are the step the standard library cannot bound: ``getaddrinfo`` has no timeout, and
asyncio runs it in the event loop's default executor, whose few threads a hostname that never
answers takes for good (a ``localhost`` target was then up 1 round in 12, and ``asyncio.run``
waits for those threads at its end). Here every lookup of a name goes through :class:`Resolver`:

- an address written as such (``127.0.0.1``, ``::1``) is used without a lookup;
- a name is looked up in a daemon thread of its own, never a pool shared with other names; a name
  already being looked up is not looked up again (the callers wait on the one lookup), so a name
  whose lookup never answers holds one thread, whatever the rounds, never another name's;
- the caller waits at most what is left of its job's deadline, and gets a one-line error;
- at most :data:`MAX_LOOKUPS_IN_FLIGHT` names are looked up at once: past it a lookup is refused
  at once rather than starting a thread more.

:class:`DeadlineBackend` is httpcore's network backend with that resolver, and :func:`transport`
an httpx transport using it: every HTTP client of the product is made through :func:`transport`.
File opens are bounded by :func:`core.bounded.read_file` (regular files only, opened without blocking).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import ipaddress
import math
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

from core.errors import SweetspotError
from core.text import visible

MAX_LOOKUPS_IN_FLIGHT = 256  # names looked up at once (a thread each); a hung resolver holds at most these
MAX_ADDRESSES_TRIED = 4  # of one name's addresses, tried in turn within the deadline

Address = tuple[int, str]  # (family, address as text)
Lookup = Callable[..., list[Any]]  # socket.getaddrinfo's signature


class Deadline:
    """The moment a job must be over by (monotonic seconds)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.end = clock() + max(0.0, seconds)

    def remaining(self) -> float:
        return max(0.0, self.end - self.clock())

    @property
    def passed(self) -> bool:
        return self.remaining() <= 0.0


_current: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("sweetspot_deadline", default=None)


@contextmanager
def bound(deadline: Deadline | float) -> Iterator[Deadline]:
    """Run the block under ``deadline`` (seconds from now, or a Deadline); a deadline already set
    around it and ending sooner still wins: a step never gets more time than its job has left."""
    mine = deadline if isinstance(deadline, Deadline) else Deadline(deadline)
    outer = _current.get()
    if outer is not None and outer.end < mine.end:
        mine = outer
    token = _current.set(mine)
    try:
        yield mine
    finally:
        _current.reset(token)


def remaining(default: float | None = None) -> float:
    """Seconds the running job has left (``default``, or no limit, outside a job); at most ``default``."""
    deadline = _current.get()
    limit = math.inf if default is None else default
    return limit if deadline is None else min(limit, deadline.remaining())


class LookupFailed(SweetspotError):
    """A host name that could not be looked up within its job's deadline, or at all."""


def literal(host: str) -> Address | None:
    """``host`` as an address when it is written as one (no lookup needed), else None."""
    try:
        address = ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None
    return (socket.AF_INET6 if address.version == 6 else socket.AF_INET, host.strip("[]"))


class Resolver:
    """Host lookups that draw on the caller's deadline (see the module's text). Safe to share."""

    def __init__(self, lookup: Lookup | None = None, limit: int = MAX_LOOKUPS_IN_FLIGHT) -> None:
        self.lookup, self.limit = lookup, limit
        self._in_flight: dict[tuple[str, int], concurrent.futures.Future[list[Address]]] = {}
        self._lock = threading.Lock()

    def in_flight(self) -> int:
        """Names being looked up now (each holds one thread)."""
        with self._lock:
            return len(self._in_flight)

    def _start(self, host: str, port: int) -> concurrent.futures.Future[list[Address]]:
        key = (host.lower(), port)
        with self._lock:
            future = self._in_flight.get(key)
            if future is not None:
                return future  # the same name's lookup under way: wait on it, start none
            if len(self._in_flight) >= self.limit:
                raise LookupFailed(f"cannot look up {visible(host)!r}: {self.limit} lookups are unanswered already "
                                   "(a DNS server that does not answer)", "Check this machine's DNS (/etc/resolv.conf)")
            future = self._in_flight[key] = concurrent.futures.Future()
            future.set_running_or_notify_cancel()  # a waiter giving up (a cancel) leaves it for the others
        threading.Thread(target=self._run, args=(key, future), name="sweetspot-lookup", daemon=True).start()
        return future

    def _run(self, key: tuple[str, int], future: concurrent.futures.Future[list[Address]]) -> None:
        try:
            infos = (self.lookup or socket.getaddrinfo)(key[0], key[1], type=socket.SOCK_STREAM)
            found = list(dict.fromkeys((int(info[0]), str(info[4][0])) for info in infos))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiters, whatever it is
            with self._lock:
                self._in_flight.pop(key, None)
            future.set_exception(exc)
            return
        with self._lock:
            self._in_flight.pop(key, None)
        future.set_result(found)

    def resolve(self, host: str, port: int, timeout_s: float | None = None) -> list[Address]:
        """``host``'s addresses, within ``timeout_s`` and the job's deadline; raises :class:`LookupFailed`."""
        address = literal(host)
        if address is not None:
            return [address]
        seconds = remaining(timeout_s)
        try:
            return self._addresses(host, self._start(host, port).result(timeout=seconds))
        except concurrent.futures.TimeoutError:
            raise _late(host, seconds) from None
        except OSError as exc:
            raise _unknown(host, exc) from None

    async def aresolve(self, host: str, port: int, timeout_s: float | None = None) -> list[Address]:
        """:meth:`resolve` for a coroutine: the event loop goes on while the lookup runs."""
        address = literal(host)
        if address is not None:
            return [address]
        seconds = remaining(timeout_s)
        waited = asyncio.wrap_future(self._start(host, port))
        try:
            return self._addresses(host, await asyncio.wait_for(asyncio.shield(waited), seconds))
        except TimeoutError:
            raise _late(host, seconds) from None
        except OSError as exc:
            raise _unknown(host, exc) from None

    @staticmethod
    def _addresses(host: str, found: list[Address]) -> list[Address]:
        if not found:
            raise LookupFailed(f"unknown host: {visible(host)!r} has no address")
        return found


def _late(host: str, seconds: float) -> LookupFailed:
    return LookupFailed(f"the lookup of {visible(host)!r} did not answer within {seconds:.3g} s",
                        "Check the host name and this machine's DNS")


def _unknown(host: str, exc: OSError) -> LookupFailed:
    return LookupFailed(f"unknown host: {visible(host)!r} ({exc.strerror or exc})", "Check the host name")


RESOLVER = Resolver()  # the process's one resolver (tests give it a lookup of their own)


class DeadlineBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, its host lookups made by :data:`RESOLVER` within the job's
    deadline; the connection is then made to the address (TLS still checks the host's name)."""

    def __init__(self, resolver: Resolver | None = None) -> None:
        self.resolver = resolver
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        deadline = Deadline(remaining(timeout))
        resolver = self.resolver or RESOLVER
        try:
            found = await resolver.aresolve(host, port, deadline.remaining())
        except LookupFailed as exc:
            late = "did not answer" in str(exc)
            raise (httpcore.ConnectTimeout if late else httpcore.ConnectError)(exc.one_line()) from None
        error: Exception = httpcore.ConnectError(f"cannot connect to {visible(host)!r}")
        for _, address in found[:MAX_ADDRESSES_TRIED]:
            if deadline.passed:
                raise httpcore.ConnectTimeout(f"connecting to {visible(host)!r} took longer than the deadline")
            try:
                return await self.inner.connect_tcp(address, port, timeout=deadline.remaining(),
                                                    local_address=local_address, socket_options=socket_options)
            except httpcore.ConnectError as exc:  # the next address (IPv6 then IPv4, say)
                error = exc
        raise error

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        return await self.inner.connect_unix_socket(path, timeout=remaining(timeout), socket_options=socket_options)

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def transport(**kwargs: Any) -> httpx.AsyncHTTPTransport:
    """An httpx transport (``verify``, ``proxy``, ``limits``... as httpx takes them) whose lookups
    and connections draw on the job's deadline. Give it to the client as ``transport=``, with the
    proxy here rather than on the client."""
    made = httpx.AsyncHTTPTransport(**{"trust_env": False, **kwargs})
    made._pool._network_backend = DeadlineBackend()  # httpx takes no backend of its own choosing
    return made


def client(timeout: Any = 5.0, **kwargs: Any) -> httpx.AsyncClient:
    """An httpx client over :func:`transport`: ``verify``, ``proxy``, ``limits`` go to the transport,
    the rest (``auth``, ``headers``, ``base_url``...) to the client."""
    moved = {k: kwargs.pop(k) for k in ("verify", "proxy", "limits", "http2") if k in kwargs}
    if moved.get("proxy") is None:
        moved.pop("proxy", None)
    trust_env = kwargs.pop("trust_env", False)  # the environment's proxy and CA: the sweep's only
    return httpx.AsyncClient(transport=transport(trust_env=trust_env, **moved), timeout=timeout, trust_env=trust_env, **kwargs)
