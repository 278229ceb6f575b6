"""The HTTP face of the simulator: OpenAI API, vLLM /metrics, the gateway and dcgm-exporter, one port.

Paths: ``/v1/*`` and ``/metrics`` are vLLM; ``/gateway/v1/*`` goes through the gateway's FIFO and
``/gateway/metrics`` is its queue depth; ``/dcgm/metrics`` is dcgm-exporter. stdlib
ThreadingHTTPServer, one thread per connection: 64 streaming clients cost 64 mostly idle threads.
Streams use chunked transfer encoding and SSE framing exactly as vLLM sends them.
"""

from __future__ import annotations

import json
import logging
import queue
import random
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs

from prometheus_client.exposition import choose_encoder

from simulator.engine import Sequence
from simulator.expo import _Families, gateway_families, vllm_families
from simulator.gateway import Gateway
from simulator.live import LiveEngine
from simulator.openai import DONE, ApiError, ParsedRequest, ResponseBuilder, parse_request, tokenize
from simulator.options import SimOptions
from simulator.workload import SHORT_OUTPUT, answer_length, token_text

log = logging.getLogger("simulator.http")
POLL_S = 0.5  # how often a waiting handler checks whether the simulator is stopping


class Simulator(Protocol):
    """What the HTTP handlers read of the running simulator (simulator/api.py ``RunningSim``)."""

    options: SimOptions
    live: LiveEngine
    gateway: Gateway
    stopping: threading.Event

    def request_rng(self) -> tuple[random.Random, int]: ...

    def dcgm_page(self) -> bytes: ...

    def models_body(self) -> dict[str, Any]: ...


class SimHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # A sweep opens dozens of connections at once; the default backlog of 5 resets some of them.
    request_queue_size = 128
    allow_reuse_address = True
    sim: Simulator

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a scraper's timeout, a sweep's client stopped) is the client's business:
        one debug line, not socketserver's traceback on the terminal of `make run`."""
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError):
            log.debug("client %s went away: %s", client_address, exc)
            return
        super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: SimHTTPServer
    server_version = "sweetspot-sim"
    # An answer leaves in one send with Nagle's algorithm off, as from the servers this stands in for
    # (asyncio, under vLLM's uvicorn, and Go's net/http, under dcgm-exporter, both set TCP_NODELAY).
    # With the stdlib's defaults the body waited in the kernel until the client acknowledged the
    # headers: a round trip, and a second wake-up per GET, that real servers don't cost a scraper.
    # handle_one_request flushes the buffer once the answer is written.
    disable_nagle_algorithm = True
    wbufsize = 256 * 1024

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        log.debug("%s " + format, self.address_string(), *args)

    # -- routing ------------------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        sim = self.server.sim
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._metrics(vllm_families(sim.live.view()))
        elif path == "/gateway/metrics":
            self._metrics(gateway_families(sim.gateway.view()))
        elif path == "/dcgm/metrics":
            self._send(200, sim.dcgm_page(), "text/plain; version=0.0.4; charset=utf-8")
        elif path in ("/v1/models", "/gateway/v1/models"):
            self._json(200, sim.models_body())
        elif path in ("/health", "/ping"):
            self._send(200, b"", "text/plain")
        elif path == "/version":
            self._json(200, {"version": "0.11.0" if sim.options.vllm_version == "v1" else "0.6.3"})
        else:
            self._json(404, {"error": {"message": f"no route {path}", "type": "NotFoundError", "param": None,
                                       "code": 404}})

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        path = self.path.split("?", 1)[0]
        gateway = path.startswith("/gateway/")
        route = path.removeprefix("/gateway")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if path in ("/sleep", "/wake_up") and self._sleep(path):
            return
        if path == "/admin/slowdown":
            self._slowdown()
            return
        if route == "/tokenize":
            self._tokenize(body)
            return
        if route not in ("/v1/completions", "/v1/chat/completions"):
            self._json(404, {"error": {"message": f"no route {path}", "type": "NotFoundError", "param": None,
                                       "code": 404}})
            return
        sim = self.server.sim
        try:
            request = parse_request(body, route.endswith("chat/completions"), sim.options.model,
                                    sim.live.config.max_model_len)
        except ApiError as exc:
            self._send(exc.status, exc.body(), "application/json")
            return
        if gateway:
            self._through_gateway(request)
        else:
            self._generate(request)

    def _sleep(self, path: str) -> bool:
        """vLLM's dev-mode POST /sleep?level=1|2 and POST /wake_up (engine_sleep_state follows)."""
        live = self.server.sim.live
        if path == "/wake_up":
            live.wake_up()
        else:
            query = self.path.partition("?")[2]
            level = 2 if "level=2" in query else 1
            live.sleep(level)
        self._send(200, b"", "text/plain")
        return True

    def _tokenize(self, body: bytes) -> None:
        sim = self.server.sim
        try:
            self._json(200, tokenize(body, sim.options.model, sim.live.config.max_model_len))
        except ApiError as exc:
            self._send(exc.status, exc.body(), "application/json")

    def _slowdown(self) -> None:
        """POST /admin/slowdown?fraction=0.3: the fault knob, mid-run (0 ends the fault)."""
        values = parse_qs(self.path.partition("?")[2]).get("fraction", ["0"])
        try:
            self.server.sim.live.slow_down(float(values[0]))
        except ValueError as exc:
            self._json(400, {"error": {"message": str(exc), "type": "BadRequestError", "param": "fraction", "code": 400}})
            return
        self._json(200, {"slowdown": float(values[0])})

    # -- generation ---------------------------------------------------------------------------------
    def _through_gateway(self, request: ParsedRequest) -> None:
        sim = self.server.sim
        admitted = threading.Event()
        ticket = sim.gateway.enter(admitted.set)
        while not admitted.wait(POLL_S):
            if sim.stopping.is_set() and sim.gateway.cancel(ticket):
                self._send(503, b'{"error": {"message": "gateway shutting down", "code": 503}}', "application/json")
                return
        outcome = "error"
        try:
            outcome = self._generate(request)
        finally:
            sim.gateway.leave(outcome)

    def _generate(self, request: ParsedRequest) -> str:
        """Run one request in the engine and answer it; returns "ok" or "error" (for the gateway)."""
        sim = self.server.sim
        events: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
        rng, request_seed = sim.request_rng()
        if request.max_tokens is None:
            target, reason = rng.randint(*SHORT_OUTPUT), "stop"  # no cap: a natural answer length
        else:
            target, reason = answer_length(rng, request.max_tokens)
        seq = Sequence(f"req-{request_seed}", request.prompt_tokens, target, reason, 0.0,
                       lambda s, n, t: events.put(("tok", "")), lambda s, r, t: events.put(("end", r)))
        seq.extra["seed"] = request_seed
        sim.live.submit(seq)
        builder = ResponseBuilder(request)
        try:
            return self._stream(seq, events, builder) if request.stream else self._collect(seq, events, builder)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            sim.live.abort(seq)
            self.close_connection = True
            return "error"

    def _next_events(self, events: queue.SimpleQueue[tuple[str, str]]) -> list[tuple[str, str]] | None:
        """Block for the next engine events (all that are ready); None when the simulator stops."""
        while True:
            try:
                first = events.get(timeout=POLL_S)
                break
            except queue.Empty:
                if self.server.sim.stopping.is_set():
                    return None
        batch = [first]
        while True:
            try:
                batch.append(events.get_nowait())
            except queue.Empty:
                return batch

    def _stream(self, seq: Sequence, events: queue.SimpleQueue[tuple[str, str]], builder: ResponseBuilder) -> str:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()  # a stream's headers go out at once, as vLLM's do
        sent = 0
        while True:
            batch = self._next_events(events)
            if batch is None or any(kind == "end" and reason not in ("stop", "length") for kind, reason in batch):
                self.close_connection = True  # vLLM went away or dropped the request: the stream is cut
                return "error"
            new_tokens = sum(1 for kind, _ in batch if kind == "tok")
            out = _token_chunks(builder, seq, sent, new_tokens)
            sent += new_tokens
            if sent >= seq.target_output:
                if builder.request.include_usage:
                    out.append(builder.usage_chunk(sent))
                out.append(DONE)
                self._chunk(b"".join(out))
                self._chunk(b"")
                return "ok"
            if out:
                self._chunk(b"".join(out))

    def _collect(self, seq: Sequence, events: queue.SimpleQueue[tuple[str, str]], builder: ResponseBuilder) -> str:
        while True:
            batch = self._next_events(events)
            if batch is None or any(kind == "end" and reason not in ("stop", "length") for kind, reason in batch):
                self._send(503, ApiError(503, "the engine restarted or stopped", "ServiceUnavailableError").body(),
                           "application/json")
                return "error"
            if seq.generated >= seq.target_output:
                break
        seed = int(seq.extra["seed"])  # type: ignore[call-overload]
        text = "".join(token_text(seed, i) for i in range(seq.target_output))
        self._send(200, builder.full_body(text, seq.target_output, seq.finish_reason), "application/json")
        return "ok"

    # -- plumbing -----------------------------------------------------------------------------------
    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data: Any) -> None:
        self._send(status, json.dumps(data).encode(), "application/json")

    def _metrics(self, families: list[Any]) -> None:
        encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
        self._send(200, encoder(_Families(families)), content_type)


def _token_chunks(builder: ResponseBuilder, seq: Sequence, sent: int, count: int) -> list[bytes]:
    """SSE chunks for ``count`` new tokens after ``sent``; the last token carries the finish reason."""
    seed = int(seq.extra["seed"])  # type: ignore[call-overload]
    out = []
    for index in range(sent, sent + count):
        if index == 0 and builder.request.chat:
            out.append(builder.role_chunk())
        last = index + 1 >= seq.target_output
        out.append(builder.token_chunk(token_text(seed, index), seq.finish_reason if last else None))
    return out


def request_rng(seed: int, number: int) -> random.Random:
    """The random source of request ``number`` (deterministic for a seed)."""
    return random.Random(f"request:{seed}:{number}")
