"""The bounded reader: every byte Sweetspot takes from outside passes here, with a byte cap.

One module, one job (docs/security.md, "Chokepoints"): an HTTP body (scraped pages, Prometheus
answers, gateways, sweeps, receivers), a line-framed reply (SMTP), a file named on the command line
or in the settings, and the rows of an ad-hoc query are each read through one of the readers
below, which never hold more than their cap and raise :class:`TooLarge` (a one-line
:class:`~core.errors.SweetspotError`) the moment the cap is passed:

- :class:`Inflater` decodes ``Content-Encoding`` (none, one layer of ``gzip`` or ``deflate``) in
  steps that never pass the cap; stacked codings (``gzip, gzip``) and others are refused;
- :func:`read_body` / :func:`read_body_sync` / :func:`body_chunks`: an httpx answer, decoded by
  the Inflater, whole or chunk by chunk (the caller's deadline bounds the time);
- :class:`BoundedLines`: a binary file object (a socket's) whose reads count against a cap;
- :func:`read_file`: a regular file only (never a device, a FIFO, a socket: their size is not
  what ``stat`` says, and their read may never end or never start), at most ``limit`` bytes;
- :class:`Budget`: bytes of values as they stream (query rows), refused past the cap.

Property tests (tests/test_bounded_fuzz.py) hold each: no generated input makes one of them hold
more than its cap, and each refusal is this module's one-line error.
"""

from __future__ import annotations

import os
import stat
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, BinaryIO

from core.errors import SweetspotError

DECODED = ("gzip", "x-gzip", "deflate")  # the codings decoded here, one layer at most


class TooLarge(SweetspotError):
    """Input refused while it was read: past its byte cap, encoded in a way not decoded here, or
    not a regular file."""


BodyError = TooLarge  # the name collectors/fetch.py gave it first


def _mib(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n:,} bytes"


class Inflater:
    """Decodes a body's ``Content-Encoding`` (none, ``gzip`` or ``deflate``, one layer) as it arrives,
    never holding more than ``limit`` decoded bytes: each step asks zlib for at most what is left.
    Stacked codings (``gzip, gzip``) and others are refused: no server needs them, a bomb does."""

    def __init__(self, encoding: str, limit: int, what: str) -> None:
        codings = [c.strip().lower() for c in encoding.split(",") if c.strip() and c.strip().lower() != "identity"]
        self.limit, self.what, self.size = limit, what, 0
        if len(codings) > 1:
            raise TooLarge(f"{what}: the answer is encoded {len(codings)} times over ({', '.join(codings[:4])}): refused, "
                           "a server compresses once")  # fmt: skip
        if codings and codings[0] not in DECODED:
            raise TooLarge(f"{what}: the answer is encoded as {codings[0][:40]!r}, which is not read here (gzip and deflate are)")
        self.coding = codings[0] if codings else ""
        # gzip: its header; deflate: a zlib stream (or, from servers that get it wrong, raw deflate: tried on failure)
        self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS if self.coding != "deflate" else zlib.MAX_WBITS) if self.coding else None
        self._raw_tried = False

    def feed(self, chunk: bytes) -> bytes:
        """The decoded bytes of ``chunk``; raises :class:`TooLarge` past the limit or on a corrupt stream."""
        if self._zlib is None:
            return self._count(chunk)
        out = bytearray()
        data = chunk
        while data:
            try:
                piece = self._zlib.decompress(data, self.limit - self.size + 1)
            except zlib.error as exc:
                if self.coding == "deflate" and not self._raw_tried and self.size == 0:
                    self._raw_tried, self._zlib = True, zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise TooLarge(f"{self.what}: the {self.coding} answer is corrupt ({exc})") from None
            out += self._count(piece)
            data = self._zlib.unconsumed_tail
            if self._zlib.eof:
                break  # what follows a gzip member (padding, a second member) is not read
        return bytes(out)

    def _count(self, piece: bytes) -> bytes:
        self.size += len(piece)
        if self.size > self.limit:
            raise TooLarge(f"{self.what}: the answer is larger than the {self.limit} bytes allowed"
                           + (f" once decoded ({self.coding})" if self.coding else ""))
        return piece


async def body_chunks(response: Any, limit: int, what: str) -> AsyncIterator[bytes]:
    """The decoded chunks of a streamed httpx ``response``, at most ``limit`` bytes together, else
    :class:`TooLarge`. Reads the raw bytes: httpx's own decoders inflate a chunk whole."""
    inflater = Inflater(response.headers.get("Content-Encoding", ""), limit, what)
    async for chunk in response.aiter_raw():
        piece = inflater.feed(chunk)
        if piece:
            yield piece


async def read_body(response: Any, limit: int, what: str) -> bytes:
    """The body of a streamed httpx ``response``, decoded and at most ``limit`` bytes, else
    :class:`TooLarge`. The caller's deadline bounds the time (a trickle)."""
    body = bytearray()
    async for piece in body_chunks(response, limit, what):
        body += piece
    return bytes(body)


def read_body_sync(response: Any, limit: int, what: str) -> bytes:
    """:func:`read_body` for a synchronous httpx stream."""
    inflater = Inflater(response.headers.get("Content-Encoding", ""), limit, what)
    body = bytearray()
    for chunk in response.iter_raw():
        body += inflater.feed(chunk)
    return bytes(body)


async def read_head(response: Any, limit: int, what: str = "the answer") -> bytes:
    """The first ``limit`` decoded bytes of a streamed httpx ``response`` (the rest is not read); an
    encoding not decoded here gives b"" rather than an error (only its head was wanted)."""
    head = bytearray()
    try:
        async for piece in body_chunks(response, 1 << 62, what):
            head += piece[: limit - len(head)]
            if len(head) >= limit:
                break
    except TooLarge:
        pass
    return bytes(head)


class BoundedLines:
    """A binary file object (``sock.makefile('rb')``) whose reads, since the last :meth:`reset`,
    count against ``limit`` bytes; past it :class:`TooLarge`. smtplib reads a reply's lines through
    it: a reply of endless ``250-`` lines ends at the cap, not in the memory of the collector."""

    def __init__(self, raw: BinaryIO, limit: int, what: str) -> None:
        self.raw, self.limit, self.what, self.size = raw, limit, what, 0

    def reset(self) -> None:
        self.size = 0

    def _count(self, data: bytes) -> bytes:
        self.size += len(data)
        if self.size > self.limit:
            raise TooLarge(f"{self.what}: the reply is longer than the {_mib(self.limit)} allowed")
        return data

    def readline(self, size: int = -1) -> bytes:
        left = self.limit - self.size + 1
        return self._count(self.raw.readline(left if size < 0 else min(size, left)))

    def read(self, size: int = -1) -> bytes:
        left = self.limit - self.size + 1
        return self._count(self.raw.read(left if size < 0 else min(size, left)))

    def close(self) -> None:
        self.raw.close()


def read_file(path: str | Path, limit: int, what: str = "") -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them, else :class:`TooLarge`.

    A device, a FIFO, a socket or a directory is refused without reading it (``/dev/zero`` has size 0
    and no end; a FIFO's open waits for a writer): the file is opened non-blocking and judged by
    ``fstat`` of what was opened, not by the name (a link is judged by what it points to). Errors of
    the system (missing, permission) are raised as the ``OSError`` they are."""
    shown = what or str(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = ("a directory" if stat.S_ISDIR(info.st_mode) else "a FIFO" if stat.S_ISFIFO(info.st_mode)
                    else "a socket" if stat.S_ISSOCK(info.st_mode) else "a device")  # fmt: skip
            raise TooLarge(f"{shown} is {kind}, not a regular file: refused (only regular files are read)")
        if info.st_size > limit:
            raise TooLarge(f"{shown} is {info.st_size:,} bytes, over the {limit:,} allowed")
        data = bytearray()
        while len(data) <= limit:  # a file that grows while it is read stops at the cap too
            piece = os.read(fd, min(1 << 20, limit + 1 - len(data)))
            if not piece:
                break
            data += piece
        if len(data) > limit:
            raise TooLarge(f"{shown} grew past the {limit:,} bytes allowed while it was read")
        return bytes(data)
    finally:
        os.close(fd)


def value_size(value: Any) -> int:
    """A value's size as :class:`Budget` counts it: characters of a text, bytes of a blob, 8 otherwise."""
    return len(value) if isinstance(value, (str, bytes, bytearray, memoryview)) else 8


class Budget:
    """Bytes of values taken one row at a time against ``limit``: :meth:`take` says whether a row
    still fits (its size counted as :func:`value_size` of each value, plus 8 for the row)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.size = limit, 0

    def take(self, row: tuple[Any, ...]) -> bool:
        size = sum(value_size(v) for v in row) + 8
        if self.size + size > self.limit:
            return False
        self.size += size
        return True
