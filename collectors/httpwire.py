"""One HTTP/1.1 connection on a plain socket: the wire side of the scrape client (collectors/http.py).

Kept-alive GETs of small pages, one request at a time: Content-Length, ``Transfer-Encoding: chunked``
and bodies delimited by the server closing. Anything it cannot vouch for raises :class:`Unsupported`,
and the scrape client redoes the request with ``http.client``; a kept-alive connection the server
closed while idle raises :class:`Stale`, and the client tries once more on a fresh one.
"""

from __future__ import annotations

import errno
import http.client
import math
import os
import select
import socket
import time
from typing import Any, overload

from app.errors import ScrapeError

MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_HEADER_BYTES = 64 * 1024
_RECV = 65536
_QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only; elsewhere acknowledgements are the OS's
_Address = tuple[Any, ...]  # one of socket.getaddrinfo's answers


class Unsupported(Exception):
    """The raw client met something it does not handle; the request is redone with http.client."""


class Stale(Exception):
    """A kept-alive connection was closed by the server before it answered (safe to retry a GET)."""


class AnswerTooSlow(TimeoutError):
    """The answer began in time but did not complete within the GET's timeout (it trickled in)."""


class RawConnection:
    """One kept-alive HTTP/1.1 connection on a plain socket; one request at a time.

    ``start`` leaves the TCP handshake under way (``connecting``) so that a round's other requests
    need not wait for it; ``connected`` finishes it once the socket is writable, trying the host's
    next address on failure, as ``socket.create_connection`` does.
    """

    def __init__(self, sock: socket.socket, timeout_s: float, addresses: list[_Address] | None = None) -> None:
        self.sock = sock
        self.timeout_s = timeout_s
        self.addresses = addresses or []  # the host's addresses not tried yet
        self.connecting = False
        self.buf = b""
        self.deadline = math.inf  # time.monotonic() by which the answer being read must be complete
        # As http.client does: the request goes out in one send, so Nagle only adds latency.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @classmethod
    def dial(cls, addresses: list[_Address], timeout_s: float) -> RawConnection:
        """A connection to the first of ``addresses`` that answers, waiting up to ``timeout_s`` for
        each handshake (as ``socket.create_connection``, the host already looked up)."""
        connection = cls.start(addresses, timeout_s)
        while connection.connecting:
            if not ready(connection.sock, select.POLLOUT, timeout_s):
                connection.close()
                raise TimeoutError("timed out")
            connection.connected()
        return connection

    @classmethod
    def start(cls, addresses: list[_Address], timeout_s: float) -> RawConnection:
        """A connection to the first of ``addresses`` (``getaddrinfo``'s answers) that takes one,
        its handshake perhaps still under way; raises when no address can be tried."""
        addresses = list(addresses)
        first_error: OSError | None = None
        while addresses:
            family, kind, proto, _, address = addresses.pop(0)
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            code = sock.connect_ex(address)
            if code in (0, errno.EINPROGRESS):
                connection = cls(sock, timeout_s, addresses)
                connection.connecting = code != 0
                if code == 0:
                    sock.settimeout(timeout_s)
                return connection
            sock.close()
            first_error = first_error or OSError(code, os.strerror(code))
        raise first_error or OSError("no address to connect to")

    def connected(self) -> None:
        """Finish the handshake once the socket is writable: connected, or the next address under way.

        Raises the error (ConnectionRefusedError...) when the last address failed.
        """
        code = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code == 0:
            self.connecting = False
            self.sock.settimeout(self.timeout_s)
            return
        self.sock.close()
        error = OSError(code, os.strerror(code))  # OSError picks the subclass: ConnectionRefusedError...
        while self.addresses:
            family, kind, proto, _, address = self.addresses.pop(0)
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            if sock.connect_ex(address) in (0, errno.EINPROGRESS):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.sock = sock
                return
            sock.close()
        raise error

    def close(self) -> None:
        self.sock.close()

    def send(self, request: bytes, timeout_s: float) -> None:
        if timeout_s != self.timeout_s:  # settimeout is a syscall: skip it when nothing changes
            self.sock.settimeout(timeout_s)
            self.timeout_s = timeout_s
        self.sock.sendall(request)

    def read(self, reused: bool, deadline: float) -> tuple[int, bytes, bool]:
        """Read the answer to the request sent, complete by ``deadline`` (``time.monotonic()``);
        returns (status, body, whether the connection can be reused).

        Each wait for more of the answer is bounded by the time left, so a server that trickles its
        answer in, a byte now and then, raises :class:`AnswerTooSlow` at the deadline instead of
        holding the round for as long as it likes.
        """
        self.deadline = deadline
        sock = self.sock
        try:
            data = sock.recv(_RECV)
        except (BrokenPipeError, ConnectionResetError):
            if reused:
                raise Stale from None
            raise
        if not data:
            if reused:
                raise Stale
            raise http.client.RemoteDisconnected("Remote end closed connection without response")
        while True:
            end = data.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(data) > MAX_HEADER_BYTES:
                raise Unsupported
            self._ack_now()
            more = self._more()
            if not more:
                raise http.client.RemoteDisconnected("Remote end closed connection in the headers")
            data += more
        status, version11, length, chunked, close = read_head(data[:end])
        self.buf = data[end + 4:]
        if status not in (204, 304) and (length is None or len(self.buf) < length):
            self._ack_now()
        if status in (204, 304):
            body, framed = b"", True
        elif chunked:
            body, framed = self._chunked(), True
        elif length is not None:
            body, framed = self._exactly(length), True
        else:
            body, framed = self._until_close(), False
        reusable = framed and version11 and not close and not self.buf
        return status, body, reusable

    def _ack_now(self) -> None:
        """Acknowledge what arrived at once, before waiting for the rest of the answer.

        Servers that write the headers and the body in two sends without TCP_NODELAY (Python's
        http.server, wsgiref, hence prometheus_client's own exporter) hold the body back (Nagle)
        until the headers are acknowledged, and Linux delays that acknowledgement by 40 ms: every
        GET then waited 40 ms, and the collector slept twice per GET, paying the cold caches of a
        wake-up twice. Setting TCP_QUICKACK sends the pending acknowledgement now and acknowledges
        the following segments as they are read, until the next request.
        """
        if _QUICKACK is not None:
            try:
                self.sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
            except OSError:
                pass  # a kernel without it: the answer only comes later, as before

    def _wait_limit(self) -> None:
        """Before waiting for more of the answer: fail at the deadline, and wait no later than it."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise AnswerTooSlow("timed out")
        # Tighten the socket's timeout only once the time left is clearly shorter (settimeout costs
        # syscalls, and the next send() sets it back): a wait then overshoots the deadline by at most
        # a tenth of the time left, and an answer arriving in a few pieces costs no syscall more.
        if left < 0.9 * self.timeout_s:
            self.sock.settimeout(left)
            self.timeout_s = left

    @overload
    def _more(self) -> bytes: ...
    @overload
    def _more(self, into: memoryview) -> int: ...

    def _more(self, into: memoryview | None = None) -> bytes | int:
        """More of the answer by the deadline: bytes, or with ``into`` how many were written there."""
        self._wait_limit()
        try:
            return self.sock.recv(_RECV) if into is None else self.sock.recv_into(into)
        except TimeoutError:
            raise AnswerTooSlow("timed out") from None

    def _exactly(self, length: int) -> bytes:
        if length > MAX_BODY_BYTES:
            raise ScrapeError(f"the answer is larger than the {MAX_BODY_BYTES} bytes allowed")
        have = self.buf
        if len(have) >= length:
            self.buf = have[length:]
            return have[:length]
        body = bytearray(length)
        body[: len(have)] = have
        view = memoryview(body)
        got = len(have)
        while got < length:
            n = self._more(view[got:])
            if not n:
                raise http.client.IncompleteRead(bytes(body[:got]), length - got)
            got += n
        self.buf = b""
        return bytes(body)

    def _until_close(self) -> bytes:
        parts = [self.buf]
        size = len(self.buf)
        while True:
            data = self._more()
            if not data:
                break
            size += len(data)
            if size > MAX_BODY_BYTES:
                raise ScrapeError(f"the answer is larger than the {MAX_BODY_BYTES} bytes allowed")
            parts.append(data)
        self.buf = b""
        return b"".join(parts)

    def _line(self) -> bytes:
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            if len(self.buf) > MAX_HEADER_BYTES:
                raise http.client.HTTPException("chunk size line too long")
            data = self._more()
            if not data:
                raise http.client.IncompleteRead(b"", None)
            self.buf += data

    def _take(self, n: int) -> bytes:
        buf = self.buf
        if len(buf) >= n:
            self.buf = buf[n:]
            return buf[:n]
        # Pieces joined once: growing one bytes object per recv would be quadratic in a big chunk.
        pieces = [buf]
        have = len(buf)
        while have < n:
            data = self._more()
            if not data:
                raise http.client.IncompleteRead(b"".join(pieces), n - have)
            pieces.append(data)
            have += len(data)
        joined = b"".join(pieces)
        self.buf = joined[n:]
        return joined[:n]

    def _chunked(self) -> bytes:
        parts: list[bytes] = []
        size = 0
        while True:
            line = self._line()
            size_text = line.split(b";", 1)[0].strip()
            try:
                n = int(size_text, 16)
            except ValueError:
                n = -1
            if n < 0 or not size_text.isalnum():
                raise http.client.HTTPException(f"bad chunk size line {line[:40]!r}")
            if n == 0:
                while self._line():  # trailer fields, up to the empty line
                    pass
                return b"".join(parts)
            size += n
            if size > MAX_BODY_BYTES:
                raise ScrapeError(f"the answer is larger than the {MAX_BODY_BYTES} bytes allowed")
            parts.append(self._take(n))
            if self._take(2) != b"\r\n":
                raise http.client.HTTPException("chunk not followed by CRLF")


def read_head(block: bytes) -> tuple[int, bool, int | None, bool, bool]:
    """(status, HTTP/1.1?, Content-Length, chunked?, Connection: close?) of a response's header block."""
    lines = block.split(b"\r\n")
    status_line = lines[0].split(None, 2)
    if len(status_line) < 2 or status_line[0] not in (b"HTTP/1.1", b"HTTP/1.0") or not status_line[1].isdigit():
        raise Unsupported
    status = int(status_line[1])
    if status < 200:
        raise Unsupported  # 1xx: interim answers, http.client knows how to skip them
    length = None
    chunked = close = False
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or name != name.strip():
            raise Unsupported  # obsolete line folding or a malformed field
        name = name.lower()
        if name == b"content-length":
            value = value.strip()
            if not value.isdigit() or (length is not None and int(value) != length):
                raise Unsupported
            length = int(value)
        elif name == b"transfer-encoding":
            if value.strip().lower() != b"chunked":
                raise Unsupported  # gzip, chunked and the like
            chunked = True
        elif name == b"connection":
            close = b"close" in value.lower()
    # HTTP/1.0 answers are not reused (keep-alive there is an opt-in we do not ask for).
    return status, status_line[0] == b"HTTP/1.1", length, chunked, close


def ready(sock: socket.socket, event: int, timeout_s: float) -> bool:
    """Whether ``sock`` is ready for ``event`` (select.POLLIN / POLLOUT, errors count) within ``timeout_s``."""
    poller = select.poll()
    poller.register(sock, event)
    return bool(poller.poll(max(0, math.ceil(timeout_s * 1000))))
