"""One streaming request to an OpenAI-compatible server, timed from the client's side.

The request is sent like production traffic: ``stream=true`` with
``stream_options.include_usage`` so the server's own output-token count arrives in the last chunk.
Every failure (HTTP 429/5xx, an error object in the stream, a disconnect, a timeout) is recorded on
the :class:`RequestRecord`, never raised: a sweep counts errors, it does not stop on them.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from core import deadline
from core.bounded import TooLarge, body_chunks, read_body, read_head
from core.errors import SweetspotError
from core.redact import masked
from sweep.workload import RequestSpec

API_PATHS = {"completions": "/completions", "chat": "/chat/completions"}
_ERROR_BODY_CHARS = 200
# Bounds on what one server's answer may make the sweep hold (docs/security.md): a stream line, a
# whole stream, an error body; and the usage count it may claim (a 400-digit or negative one is not a count).
MAX_LINE_BYTES = 1024 * 1024
MAX_STREAM_BYTES = 64 * 1024 * 1024
MAX_USAGE_TOKENS = 10_000_000


class SweepError(SweetspotError):
    """The sweep cannot start: the server is unreachable, or it serves no model."""


@dataclass
class RequestRecord:
    """What the client saw of one request. Times are seconds since the level started (monotonic clock).

    ``end_s`` stays None while the request is in flight (e.g. given up by the level's drain).
    ``chunk_times_s`` holds the arrival of every chunk carrying generated text: the first one is the
    first token (TTFT = ``chunk_times_s[0] - start_s``), the gaps between them are inter-token latencies.
    ``usage_tokens`` is the server's ``completion_tokens`` when it sent usage, else None.
    """

    kind: str
    start_s: float
    chunk_times_s: list[float] = field(default_factory=list)
    usage_tokens: int | None = None
    end_s: float | None = None
    error: str | None = None

    @property
    def output_tokens(self) -> int:
        """Output tokens: the server's usage when present, else the count of text chunks."""
        return self.usage_tokens if self.usage_tokens is not None else len(self.chunk_times_s)


def request_body(api: str, model: str, spec: RequestSpec) -> dict[str, Any]:
    """The JSON body of a streaming request for ``api`` (``completions`` or ``chat``)."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": spec.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if api == "chat":
        body["messages"] = [{"role": "user", "content": spec.prompt}]
    else:
        body["prompt"] = spec.prompt
    return body


async def stream_request(
    client: httpx.AsyncClient, base_url: str, api: str, body: dict[str, Any], record: RequestRecord, t0: float
) -> None:
    """Send one streaming request and fill ``record`` as chunks arrive (``t0``: the level's start,
    ``time.perf_counter()`` seconds). Cancellation leaves the record as it was: in flight."""
    try:
        async with client.stream("POST", base_url + API_PATHS[api], json=body) as response:
            if response.status_code != 200:
                head = await read_head(response, _ERROR_BODY_CHARS * 4)
                record.error = f"HTTP {response.status_code}: {_snippet(head.decode('utf-8', errors='replace'))}"
            else:
                await _read_events(response, record, t0)
    except httpx.TimeoutException:
        record.error = "timeout"
    except httpx.HTTPError as exc:
        # Connection refused or reset, a stream cut before its end: the server went away under us.
        record.error = f"disconnect: {type(exc).__name__}"
    record.end_s = time.perf_counter() - t0


async def bounded_lines(response: httpx.Response) -> Any:
    """The answer's lines (``\n``, ``\r\n`` or ``\r`` ended), decoded by :mod:`core.bounded` (one
    layer of gzip or deflate), none over MAX_LINE_BYTES and all of them under MAX_STREAM_BYTES
    together; past either, :class:`core.bounded.TooLarge` (httpx's ``aiter_lines`` holds a line
    whatever its length, and its decoders inflate stacked gzip whole)."""
    pending = b""
    async for chunk in body_chunks(response, MAX_STREAM_BYTES, "the stream"):
        pending += chunk
        *lines, pending = pending.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        for line in lines:
            yield line.decode("utf-8", errors="replace")
        if len(pending) > MAX_LINE_BYTES:
            raise TooLarge(f"a stream line passed {MAX_LINE_BYTES // 2**20} MiB")
    if pending:
        yield pending.decode("utf-8", errors="replace")


async def _read_events(response: httpx.Response, record: RequestRecord, t0: float) -> None:
    try:
        await _events(response, record, t0)
    except TooLarge as exc:
        record.error = f"bad stream: {exc}"


async def _events(response: httpx.Response, record: RequestRecord, t0: float) -> None:
    done = False
    async for line in bounded_lines(response):
        if not line.startswith("data:"):
            continue  # blank separators, SSE comments and other fields carry nothing we time
        data = line[5:].strip()
        if data == "[DONE]":
            done = True
            break
        now = time.perf_counter() - t0
        error = _apply_chunk(data, record, now)
        if error:
            record.error = error
            return
    if not done:
        record.error = "disconnect: stream ended without [DONE]"


def _apply_chunk(data: str, record: RequestRecord, now: float) -> str | None:
    """Record one SSE ``data:`` payload; return an error text when the payload is an error."""
    try:
        chunk = json.loads(data)
    except (ValueError, RecursionError):  # not JSON, nested past the parser's depth, or a number of 4,300+ digits
        return f"bad chunk: {_snippet(data)}"
    if not isinstance(chunk, dict):
        return f"bad chunk: {_snippet(data)}"
    if "error" in chunk:
        return f"stream error: {_snippet(json.dumps(chunk['error']))}"
    choices = chunk.get("choices")
    if choices is not None and not isinstance(choices, list):
        return f"bad chunk: choices is not a list ({_snippet(data)})"
    if any(_chunk_text(choice) for choice in choices or ()):
        record.chunk_times_s.append(now)
    usage = chunk.get("usage")
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    if isinstance(tokens, int) and not isinstance(tokens, bool):
        if not 0 <= tokens <= MAX_USAGE_TOKENS:
            return f"bad usage: completion_tokens = {_snippet(str(tokens))[:40]} is not a count (0 to {MAX_USAGE_TOKENS:,})"
        record.usage_tokens = tokens
    return None


def _chunk_text(choice: Any) -> str:
    """The generated text of one choice: ``text`` (completions) or the delta's content (chat).
    Reasoning text counts too: those are output tokens the server generated."""
    if not isinstance(choice, dict):
        return ""
    if isinstance(choice.get("text"), str):
        return str(choice["text"])
    delta = choice.get("delta") or {}
    if not isinstance(delta, dict):
        return ""
    for key in ("content", "reasoning_content", "reasoning"):
        if isinstance(delta.get(key), str) and delta[key]:
            return str(delta[key])
    return ""


def _snippet(text: str) -> str:
    return " ".join(text.split())[:_ERROR_BODY_CHARS]


@dataclass(frozen=True)
class Served:
    """What ``GET /models`` says of the model to load: its name and context (``max_model_len``
    tokens, prompt and output together; None where the server does not say, as OpenAI's API)."""

    model: str
    max_model_len: int | None = None


def discover_served(base_url: str, model: str | None, timeout_s: float = 10.0) -> Served:
    """Check that ``base_url`` answers and return the model to load (``model``, or the first served
    one) with its ``max_model_len`` when the model list gives it.

    Raises SweepError (one line, with the next step) when the server cannot be reached, or when it
    serves no model and none was given.
    """
    url = base_url + "/models"
    shown = masked(url)  # --url may carry a user:password
    hint = "Is the server running? Check --url (an OpenAI-compatible base such as http://127.0.0.1:8000/v1)"
    try:
        status, body = asyncio.run(_model_list(url, timeout_s, shown))
    except TooLarge as exc:
        raise SweepError(str(exc), hint) from None
    except (TimeoutError, httpx.TimeoutException):
        raise SweepError(f"cannot reach {shown} (no answer within {timeout_s:g} s)", hint) from None
    except httpx.HTTPError as exc:
        raise SweepError(f"cannot reach {shown} ({masked(_reason(exc))})", hint) from None
    cards = _cards(body) if status == 200 else []
    if model:  # the list is only a convenience once the server answers
        return Served(model, next((_context(c) for c in cards if c.get("id") == model), None))
    if status != 200:
        more = "" if base_url.endswith("/v1") else f"; did you mean {masked(base_url)}/v1?"
        raise SweepError(f"{shown} answered HTTP {status}", f"Pass --model NAME{more}")
    if not cards or "id" not in cards[0]:
        raise SweepError(f"{shown} lists no model", "Pass --model NAME")
    return Served(str(cards[0]["id"])[:512], _context(cards[0]))


async def _model_list(url: str, timeout_s: float, shown: str) -> tuple[int, bytes]:
    """(status, body) of the model list, the whole of it (lookup to last byte) within ``timeout_s``:
    a server trickling its list defeats httpx's per-read timeout."""
    with deadline.bound(timeout_s):  # the lookup too (core/deadline.py)
        async with asyncio.timeout(timeout_s), deadline.client(timeout_s, trust_env=True) as client, \
                client.stream("GET", url) as response:
            return response.status_code, await read_body(response, MAX_LINE_BYTES, f"{shown} (its model list)")


def _cards(body: bytes) -> list[dict[str, Any]]:
    try:
        data = json.loads(body).get("data") or []
    except (ValueError, AttributeError, RecursionError):
        return []
    return [card for card in data if isinstance(card, dict)] if isinstance(data, list) else []


def _context(card: dict[str, Any]) -> int | None:
    """A model card's ``max_model_len`` (vLLM, SGLang), when it is a plausible count of tokens."""
    value = card.get("max_model_len")
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_USAGE_TOKENS:
        return value
    return None


def engine_tokens(base_url: str, api: str, model: str, prompt: str, timeout_s: float = 10.0) -> int | None:
    """How many tokens the engine's own tokenizer makes of ``prompt`` sent as ``api`` (vLLM's
    ``POST /tokenize`` beside ``/v1``, chat template included for ``chat``); None where the server
    has no such endpoint or answers anything else."""
    root = base_url.removesuffix("/v1")
    body: dict[str, Any] = {"model": model}
    body.update({"messages": [{"role": "user", "content": prompt}]} if api == "chat" else {"prompt": prompt})
    try:
        response = httpx.post(root + "/tokenize", json=body, timeout=timeout_s)
        count = response.json().get("count") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError, RecursionError):
        return None
    if isinstance(count, int) and not isinstance(count, bool) and 0 < count <= MAX_USAGE_TOKENS:
        return count
    return None


def _reason(exc: httpx.HTTPError) -> str:
    cause: BaseException = exc
    while cause.__cause__ is not None or cause.__context__ is not None:  # the async transport's cause is the OS error
        cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
    text = str(exc) or type(exc).__name__
    if "refused" in text.lower() or isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    return text.splitlines()[0][:200]
