"""The SSE client and the closed-loop runner against a tiny real server on 127.0.0.1 (port 0).

The stub answers like vLLM's streaming API, and fails on purpose: every 4th request gets HTTP 429,
every 7th HTTP 500, every 9th is cut before ``[DONE]``. The end-to-end test against the simulator is
tests/test_sweep_e2e.py.
"""

import asyncio
import io
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from core.progress import SweepProgress
from sweep.client import RequestRecord, Served, SweepError, discover_served, request_body, stream_request
from sweep.runner import SweepConfig, make_client, run_level, run_sweep
from sweep.workload import RequestSpec, parse_mix
from tests.support.ports import refused_port

CHUNK_GAP_S = 0.005


class StubHandler(BaseHTTPRequestHandler):
    counter = 0
    lock = threading.Lock()

    def log_message(self, *args):  # keep test output quiet
        pass

    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "stub-70b", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        try:
            self._answer()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client cancelled the stream at the end of its level

    def _answer(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.lock:
            StubHandler.counter += 1
            n = StubHandler.counter
        if n % 4 == 0 or n % 7 == 0:
            self._fail(429 if n % 4 == 0 else 500)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        chat = "messages" in request
        tokens = min(request["max_tokens"], 5)
        for i in range(tokens):
            self._event(_chunk(chat, f" w{i}"))
            time.sleep(CHUNK_GAP_S)
            if n % 9 == 0 and i == 1:
                return  # the server goes away mid-stream
        self._event({"id": "x", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": tokens}})
        self.wfile.write(b"data: [DONE]\n\n")

    def _event(self, payload):
        self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
        self.wfile.flush()

    def _fail(self, status):
        body = json.dumps({"error": {"message": "busy", "code": status}}).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _chunk(chat, text):
    if chat:
        return {"id": "x", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return {"id": "x", "choices": [{"index": 0, "text": text, "finish_reason": None}]}


@pytest.fixture
def stub():
    StubHandler.counter = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), StubHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _one(base, api):
    async def go():
        record = RequestRecord("short", 0.0)
        spec = RequestSpec("short", "hello there", 2, 3)
        async with httpx.AsyncClient(timeout=5) as client:
            await stream_request(client, base, api, request_body(api, "stub-70b", spec), record, time.perf_counter())
        return record

    return asyncio.run(go())


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_one_streaming_request_is_timed(stub, api):
    record = _one(stub, api)
    assert record.error is None
    assert record.usage_tokens == 3 and len(record.chunk_times_s) == 3
    assert 0 < record.chunk_times_s[0] <= record.chunk_times_s[-1] <= record.end_s
    assert record.chunk_times_s == sorted(record.chunk_times_s)  # gaps are timing-dependent on a busy host


def test_closed_loop_counts_errors_without_stopping(stub):
    # 2 s: the stub's ninth request is the first that every kind of failure has been served by
    # (429 at 4, 500 at 7, a disconnect at 9); a loaded machine made 9 requests in 1 s
    config = SweepConfig(stub, "stub-70b", (3,), 2.0, parse_mix("short:1"), error_pause_s=0.01)

    async def go():
        async with make_client(config) as client:
            return await run_level(client, config, 3)

    level, records, engine = asyncio.run(go())
    errors = [r.error for r in records if r.error]
    assert any(e.startswith("HTTP 429") for e in errors)
    assert any(e.startswith("HTTP 500") for e in errors)
    assert any(e.startswith("disconnect") for e in errors)
    assert level.requests >= 9 and 0 < level.errors < level.requests
    assert level.error_rate == pytest.approx(level.errors / level.requests)
    assert level.tokens_per_s > 0 and level.ttft_p95_s is not None and level.itl_p95_s is not None
    assert all(r.end_s is not None for r in records)  # drained: no request left in flight
    assert level.duration_s >= 2.0 and max(r.end_s for r in records) == pytest.approx(level.duration_s)
    assert engine is None  # the stub has no vLLM /metrics: the engine's figures are left out


def test_model_discovery(stub):
    assert discover_served(stub, None) == Served("stub-70b", None)  # an OpenAI-like card: no context said
    assert discover_served(stub, "mine").model == "mine"


def test_the_error_lines_add_up_to_the_levels_error_count(stub):
    # "5 requests, 0 errors" once printed beside "5 × HTTP 400": the error kinds counted the warm-up's
    # requests too. Now the kinds under the line are the measured requests' and the warm-up's are apart.
    config = SweepConfig(stub, "stub-70b", (3,), 1.5, parse_mix("short:1"), error_pause_s=0.01, warmup_s=1.0)
    out = io.StringIO()
    levels = asyncio.run(run_sweep(config, SweepProgress(1, config.level_s, stream=out, tty=False)))
    lines = out.getvalue().splitlines()
    done = next(line for line in lines if " done: " in line)
    assert done.endswith(f"{levels[0].requests} requests, {levels[0].errors} errors")
    counted = [line for line in lines if line.startswith("  ") and " × " in line and "warm-up" not in line]
    assert sum(int(line.split(" × ")[0]) for line in counted) == levels[0].errors > 0  # 3 kinds at most: the stub's 3
    assert any(line.startswith("  warm-up, left out of the figures: ") for line in lines)


def test_unreachable_url_is_one_line_error_with_next_step(tmp_path):
    url = f"http://127.0.0.1:{refused_port()}/v1"
    with pytest.raises(SweepError, match="connection refused"):
        discover_served(url, None, timeout_s=2)
    done = subprocess.run(
        [sys.executable, "-m", "app", "sweep", "--url", url, "--duration", "1", "--db", f"sqlite:///{tmp_path}/x.db"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR: cannot reach")
    assert "Check --url" in lines[0]


def test_bad_arguments_are_usage_errors(stub):
    done = subprocess.run(
        [sys.executable, "-m", "app", "sweep", "--url", stub, "--duration", "1", "--concurrency", "0,x", "--no-store"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2 and "ERROR: --concurrency" in done.stderr


def test_command_writes_json_and_stores_the_run(stub, tmp_path):
    from db.queries import Reader

    db_url = f"sqlite:///{tmp_path}/sweeps.db"
    out = tmp_path / "sweep.json"
    args = ["--url", stub, "--concurrency", "2,1", "--duration", "0.6s", "--json", str(out), "--db", db_url]
    done = subprocess.run([sys.executable, "-m", "app", "sweep", *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("| concurrency | output tok/s | TTFT P95 | E2E mean |")
    doc = json.loads(out.read_text())
    assert [lv["concurrency"] for lv in doc["levels"]] == [1, 2]
    assert doc["model"] == "stub-70b" and "reason" in doc["recommendation"]
    (run,) = Reader(db_url).sweep_runs()
    assert run.url == stub and run.mix == "short:0.6,long:0.4" and run.ttft_slo_s == 3.0
    assert [lv.concurrency for lv in run.levels] == [1, 2]
    assert run.levels[1].errors == doc["levels"][1]["errors"] > 0
    assert run.recommendation == doc["recommendation"]
    assert f"stored as sweep run {run.id}" in done.stderr


# -- hostile servers: each answer is that request's error, bounded, never a traceback ---------------
def _hostile_stream(lines):
    """A server answering every POST with ``lines`` (bytes, or a callable writing to the socket)."""
    from tests.support.http_server import serving

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                if callable(lines):
                    lines(self.wfile)
                else:
                    self.wfile.write(lines)
            except (BrokenPipeError, ConnectionResetError):
                pass

    return serving(Handler)


def _one_request(base):
    record = RequestRecord("k", 0.0)
    body = request_body("completions", "m", RequestSpec("k", "hi", 1, 5))

    async def go():
        async with httpx.AsyncClient(timeout=30) as client:
            await stream_request(client, base, "completions", body, record, time.perf_counter())

    asyncio.run(go())
    return record


def _sse(*payloads):
    return b"".join(b"data: " + p + b"\n\n" for p in payloads) + b"data: [DONE]\n\n"


@pytest.mark.parametrize("payload, error", [
    (b'{"choices": 5}', "bad chunk: choices is not a list"),
    (b'{"choices": "abc"}', "bad chunk: choices is not a list"),
    (b'{"choices": [], "usage": {"completion_tokens": ' + b"9" * 400 + b"}}", "bad usage"),
    (b'{"choices": [], "usage": {"completion_tokens": -3}}', "bad usage: completion_tokens = -3"),
    (b'{"choices": [], "usage": {"completion_tokens": ' + b"1" * 5000 + b"}}", "bad chunk"),
    (b"[" * 100_000 + b"]" * 100_000, "bad chunk"),
    (b'{"a": ' * 50_000 + b"1" + b"}" * 50_000, "bad chunk"),
    (b'{"error": 5}', "stream error: 5"),
])
def test_a_hostile_chunk_is_that_requests_error(payload, error):
    with _hostile_stream(_sse(b'{"choices": [{"text": "a"}]}', payload)) as base:
        record = _one_request(base)
    assert record.error is not None and record.error.startswith(error), record.error
    assert record.usage_tokens is None or 0 <= record.usage_tokens <= 10_000_000


@given(tokens=st.integers(-10**12, 10**12))
@hsettings(max_examples=50, deadline=None)
def test_only_a_plausible_usage_count_is_kept(tokens):
    from sweep.client import MAX_USAGE_TOKENS, _apply_chunk

    record = RequestRecord("k", 0.0)
    error = _apply_chunk(json.dumps({"choices": [], "usage": {"completion_tokens": tokens}}), record, 1.0)
    if 0 <= tokens <= MAX_USAGE_TOKENS:
        assert error is None and record.usage_tokens == tokens
    else:
        assert error and record.usage_tokens is None


def test_a_line_without_end_is_cut_at_its_bound():
    from sweep.client import MAX_LINE_BYTES

    def endless(wfile):
        wfile.write(b"data: ")
        block = b"x" * 65536
        for _ in range(10_000):  # 650 MB if held
            wfile.write(block)

    with _hostile_stream(endless) as base:
        record = _one_request(base)
    assert record.error == f"bad stream: a stream line passed {MAX_LINE_BYTES // 2**20} MiB"


def test_a_line_at_its_bound_is_read():
    from sweep.client import MAX_LINE_BYTES

    chunk = json.dumps({"choices": [{"text": "a"}], "pad": ""}).encode()
    line = b"data: " + chunk[:-2] + b"p" * (MAX_LINE_BYTES - len(chunk) - 6) + b'"}'
    assert len(line) == MAX_LINE_BYTES
    with _hostile_stream(line + b"\n\ndata: [DONE]\n\n") as base:
        record = _one_request(base)
    assert record.error is None and len(record.chunk_times_s) == 1


def test_a_stream_without_end_is_cut_at_its_bound():
    from sweep.client import MAX_STREAM_BYTES

    def many(wfile):
        line = b"data: " + json.dumps({"choices": [{"text": "a" * 60_000}]}).encode() + b"\n\n"
        for _ in range(MAX_STREAM_BYTES // len(line) + 10):
            wfile.write(line)

    with _hostile_stream(many) as base:
        record = _one_request(base)
    assert record.error == f"bad stream: the stream: the answer is larger than the {MAX_STREAM_BYTES} bytes allowed"


def test_a_huge_metrics_page_is_no_reading_not_a_crash():
    from sweep.engine import read_engine
    from tests.support.http_server import serving

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            try:
                for _ in range(700):  # 45 MB, over the collector's page bound
                    self.wfile.write(b"# " + b"x" * 65534 + b"\n")
            except (BrokenPipeError, ConnectionResetError):
                pass

    async def go(base):
        async with httpx.AsyncClient(timeout=30) as client:
            return await read_engine(client, base + "/metrics")

    with serving(Handler) as base:
        assert asyncio.run(go(base)) is None
