"""Host name lookups for the scrape client: off the round's thread, bounded in time, kept a minute.

``socket.getaddrinfo`` blocks for as long as the system's resolver likes: with the DNS servers
unreachable that is 5 s per try and server, 10-30 s in all, well past the scrape timeout, and the
round's other requests wait behind it. A target that is down by name asks again at every round,
since it has no kept-alive connection to reuse. So each lookup runs on a daemon thread of its own
(one host's hanging lookup holds back no other's); a GET waits for its host's lookup no longer
than its timeout, and a lookup still under way from an earlier round is not waited for again (that
GET fails at once, saying so). Answers are kept :data:`KEEP_S`, and served up to :data:`STALE_S`
while a fresh lookup runs or when it fails; failures are kept :data:`FAILED_KEEP_S`. Addresses
written as numbers are not looked up at all.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

Address = tuple[Any, ...]  # one of socket.getaddrinfo's answers

KEEP_S = 60.0  # how long an answer is used without asking again (the system cache's TTLs are not known here)
STALE_S = 600.0  # how long an old answer is still used while a fresh lookup runs (or after it failed)
FAILED_KEEP_S = 10.0  # how long a failed lookup is given as the answer before asking again
_KEPT_MAX = 1024


class _Lookup:
    __slots__ = ("host", "port", "started", "done", "addresses", "error")

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.started = time.monotonic()
        self.done = threading.Event()
        self.addresses: list[Address] = []
        self.error: OSError | None = None


def no_answer(host: str, wait_s: float) -> OSError:
    """The error of a lookup that gave no answer within ``wait_s`` (the HTTP client's too)."""
    return OSError(f"looking up {host}: no answer within {wait_s:g} s (DNS)")


class Resolver:
    """Looks hosts up on daemon threads, one lookup per host and port at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, int], tuple[float, list[Address] | OSError]] = {}  # → (when, answer)
        self._under_way: dict[tuple[str, int], _Lookup] = {}

    def addresses(self, host: str, port: int, wait_s: float) -> list[Address]:
        """The addresses of ``host``, as ``getaddrinfo(host, port, 0, SOCK_STREAM)`` gives them.

        Raises the lookup's error (``socket.gaierror``), or OSError when no answer came within
        ``wait_s`` (the lookup goes on: a later call may have its answer).
        """
        numeric = _numeric(host, port)
        if numeric is not None:
            return numeric
        key = (host, port)
        now = time.monotonic()
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None:
                age, answer = now - kept[0], kept[1]
                if isinstance(answer, OSError):
                    if age < FAILED_KEEP_S:
                        raise answer
                elif age < KEEP_S:
                    return list(answer)
                elif age < STALE_S:
                    self._start(key)  # refresh in the background; the old answer serves meanwhile
                    return list(answer)
            fresh = key not in self._under_way
            lookup = self._start(key)
        if not fresh and now - lookup.started >= wait_s:
            raise OSError(f"looking up {host}: no answer for {now - lookup.started:.1f} s (DNS)")
        if not lookup.done.wait(max(0.0, lookup.started + wait_s - time.monotonic())):
            raise no_answer(host, wait_s)
        if lookup.error is not None:
            raise lookup.error
        return list(lookup.addresses)

    def _start(self, key: tuple[str, int]) -> _Lookup:
        """A lookup of ``key`` under way (the one already running, or a new one). Holds the lock."""
        lookup = self._under_way.get(key)
        if lookup is None:
            lookup = self._under_way[key] = _Lookup(*key)
            threading.Thread(target=self._look_up, args=(lookup,), name="sweetspot-dns", daemon=True).start()
        return lookup

    def _look_up(self, lookup: _Lookup) -> None:
        answer: list[Address] | OSError
        try:
            answer = lookup.addresses = list(socket.getaddrinfo(lookup.host, lookup.port, 0, socket.SOCK_STREAM))
        except OSError as exc:
            answer = lookup.error = exc
        key = (lookup.host, lookup.port)
        with self._lock:
            kept = self._kept.get(key)
            if isinstance(answer, OSError) and kept is not None and not isinstance(kept[1], OSError):
                pass  # a refresh failed (DNS down): the last answer serves on until it is STALE_S old
            else:
                if len(self._kept) >= _KEPT_MAX:
                    self._kept.clear()  # hosts are few; endless distinct ones must not grow memory
                self._kept[key] = (time.monotonic(), answer)
            del self._under_way[key]
        lookup.done.set()


def _numeric(host: str, port: int) -> list[Address] | None:
    """The address of a host written as a number (no lookup), or None for a name."""
    try:
        return list(socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST))
    except OSError:
        return None
