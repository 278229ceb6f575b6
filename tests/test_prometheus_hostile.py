"""A hostile Prometheus on 127.0.0.1: answers of the wrong shape, times in the future, a name that a
configured target has, an answer without end or one that trickles. Each is one line (the CLI as a
process) or a round of that target only, never a traceback, never a blocked target."""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlalchemy import select

from app.prometheus_backfill import backfill, rounds_from_matrix
from app.prometheus_source import FUTURE_SKEW_S, PrometheusSource
from collectors.prometheus import MAX_ANSWER_BYTES, PrometheusClient, PrometheusError, TooLarge
from core.settings import PrometheusSettings, Settings, TargetSettings
from db import schema
from db.engine import open_engine
from db.writer import Writer
from tests.support.http_server import serving

Answer = Callable[[str, dict[str, list[str]]], tuple[int, dict[str, str], Any]]
NOW = time.time()


def series_list(_path: str, _q: dict[str, list[str]]) -> list[dict[str, str]]:
    return [{"__name__": "vllm:num_requests_running", "instance": "a"}]


def prometheus(answer: Answer) -> type[BaseHTTPRequestHandler]:
    """Answers /api/v1/series with one series, every other path with ``answer``; a body that is
    bytes is sent as it is, anything else as JSON; a callable body is a writer (trickle, flood)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            if parts.path == "/api/v1/series":
                status, headers, body = 200, {}, {"status": "success", "data": series_list(parts.path, query)}
            elif parts.path == "/federate":
                status, headers, body = 404, {}, b"no federate here"
            else:
                status, headers, body = answer(parts.path, query)
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            if callable(body):
                self.end_headers()
                try:
                    body(self.wfile)
                except OSError:
                    pass
                return
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def matrix(values: list[list[Any]], instance: str = "a") -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "vllm:num_requests_running", "instance": instance}, "values": values}]}}


def vector(ts: float, instance: str = "a") -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"__name__": "vllm:num_requests_running", "instance": instance}, "value": [ts, "3"]}]}}


def nested(depth: int) -> bytes:
    return b'{"status": "success", "data": ' + b"[" * depth + b"]" * depth + b"}"


def run_backfill(tmp_path, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", "backfill", "--prometheus", url, "--since", "1h", "--step", "60s",
                           "--db", f"sqlite:///{tmp_path}/b.db"], capture_output=True, text=True, timeout=120)  # fmt: skip


HOSTILE = {
    "a JSON list": [1, 2, 3],
    "null data": {"status": "success", "data": None},
    "a result that is not a list": {"status": "success", "data": {"result": 5}},
    "deep nesting": nested(100_000),
    "not JSON": b"<html>hello</html>",
    "a string body": "success",
}


KIND_LOGGED = re.compile(r"\S+ \S+ INFO collectors\.prometheus: prometheus http://127\.0\.0\.1:\d+: a prometheus server")


@pytest.mark.parametrize("name", list(HOSTILE))
def test_backfill_refuses_a_hostile_answer_in_one_line(tmp_path, name):
    body = HOSTILE[name]
    with serving(prometheus(lambda _p, _q: (200, {}, body))) as base:
        done = run_backfill(tmp_path, base)
    assert done.returncode != 0, done.stderr
    # the one line before the refusal is the server-kind probe's log record (plan-ahead's kind()); the
    # refusal itself is one line, the last, with no traceback
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr and lines[-1].startswith("ERROR: "), done.stderr
    assert all(KIND_LOGGED.fullmatch(line) for line in lines[:-1]) and len(lines) <= 2, done.stderr


def port_reading(digits: str) -> int:
    """A free 127.0.0.1 port whose number holds ``digits`` (42217 holds "422")."""
    for port in sorted({int(f"{digits}{tail:02d}") for tail in range(100)} | {int(f"{head}{digits}") for head in range(1, 7)}):
        with contextlib.suppress(OSError), socket.socket() as probe:
            probe.bind(("127.0.0.1", port))
            return port
    pytest.skip(f"no free port holding {digits}")


@pytest.mark.parametrize("digits", ["422", "503"])
def test_a_port_that_reads_like_a_status_is_not_taken_for_one(tmp_path, digits):
    """The backfill asks for fewer steps on a 422 or 503 answer. It decided on the error's text, which
    holds the URL: on port 42217 a hostile answer was retried in ever smaller chunks, 14 log lines
    before the refusal (a CI run). It decides on the answer's status now."""
    port = port_reading(digits)
    with serving(prometheus(lambda _p, _q: (200, {}, HOSTILE["null data"])), port=port) as base:
        done = run_backfill(tmp_path, base)
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and lines[-1].startswith("ERROR: ") and f":{port}/" in lines[-1], done.stderr
    assert "steps at once" not in done.stderr and len(lines) <= 2, done.stderr


def test_a_422_answer_is_retried_in_smaller_chunks_and_then_named(tmp_path):
    refused = {"status": "error", "errorType": "execution", "error": "query processing would load too many samples"}
    with serving(prometheus(lambda _p, _q: (422, {}, refused))) as base:
        done = run_backfill(tmp_path, base)
    assert done.returncode != 0 and "refused the query (422: query processing would load too many samples" in done.stderr
    assert "the server refused 2 steps at once; trying 1" in done.stderr, done.stderr  # halved down to one step


@given(points=st.lists(st.tuples(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5),
                                           st.none(), st.integers(-10**30, 10**30)),
                                 st.one_of(st.text(max_size=8), st.floats(), st.none(), st.just("1\nvllm:x 9"))),
                       max_size=20))
@hsettings(max_examples=150, deadline=None)
def test_matrix_points_of_any_shape_never_raise_and_only_finite_past_ones_count(points):
    result = matrix([list(p) for p in points])["data"]["result"]
    rounds = list(rounds_from_matrix(result, PrometheusSettings(url="http://p:9090"), NOW))
    for r in rounds:
        assert math.isfinite(r.ts) and r.ts <= NOW + FUTURE_SKEW_S


def test_backfill_leaves_out_points_from_the_future_and_keeps_the_rest(tmp_path):
    end = math.floor(NOW / 60) * 60
    values = [[end - 600 + 60 * i, "2"] for i in range(5)] + [[NOW + 10 * 365 * 86400, "9"], [float("nan"), "1"]]
    engine = open_engine(f"sqlite:///{tmp_path}/f.db")
    with serving(prometheus(lambda _p, _q: (200, {}, matrix(values)))) as base:
        result = backfill(engine, PrometheusSettings(url=base, selector='{job="vllm"}'), 3600, 60, NOW, timeout_s=5)
    with engine.connect() as conn:
        stamps = sorted(conn.execute(select(schema.scrapes.c.ts)).scalars())
    assert result.rounds == 5 and stamps and max(stamps) <= NOW


def test_backfill_never_mixes_a_discovered_target_into_a_configured_one(tmp_path):
    engine = open_engine(f"sqlite:///{tmp_path}/m.db")
    writer = Writer(engine)
    writer.register_target(TargetSettings(name="a", vllm_url="http://10.0.0.5:8000/metrics"))
    writer.close()
    end = math.floor(NOW / 60) * 60
    with serving(prometheus(lambda _p, _q: (200, {}, matrix([[end - 120, "12500000000"]])))) as base:
        result = backfill(engine, PrometheusSettings(url=base, selector='{job="vllm"}'), 3600, 60, NOW, timeout_s=5)
    with engine.connect() as conn:
        assert conn.execute(select(schema.scrapes)).first() is None
        assert conn.execute(select(schema.targets.c.discovered_by)).scalars().all() == [None]
    assert result.rounds == 0


def settings_with(target: str = "") -> Settings:
    targets = (TargetSettings(name=target, vllm_url="http://10.0.0.5:8000/metrics"),) if target else ()
    return Settings(targets=targets, scrape_timeout_s=10.0)  # local answers: no timeout under load


def test_a_future_stamped_live_page_is_a_down_round_saying_so_and_does_not_block_the_next():
    stamps = [NOW + 3600, NOW + 5]  # the first page an hour ahead, the next one as it should be
    clock = [NOW]

    def answer(path: str, q: dict[str, list[str]]) -> tuple[int, dict[str, str], Any]:
        body = vector(NOW)
        if "timestamp(" in q.get("query", [""])[0]:  # when Prometheus scraped the target: the page's time
            body["data"]["result"][0]["value"] = [NOW, str(stamps[0])]
        return 200, {}, body

    with serving(prometheus(answer)) as base:
        source = PrometheusSource(settings_with(), PrometheusSettings(url=base), clock=lambda: clock[0])
        first = source.read()
        stamps.pop(0)
        clock[0] = NOW + 5
        second = source.read()
        source.close()
    (down,) = first.rounds
    assert down.vllm is None and "in the future" in (down.vllm_status.error or "") and down.ts <= NOW + 1
    (up,) = second.rounds
    assert up.vllm is not None and up.ts == pytest.approx(NOW + 5, abs=0.01)


def test_a_live_target_named_as_a_configured_one_is_left_out_with_a_line(caplog):
    with serving(prometheus(lambda _p, q: (200, {}, vector(NOW, instance="prod-70b")))) as base:
        source = PrometheusSource(settings_with("prod-70b"), PrometheusSettings(url=base), clock=lambda: NOW)
        out = source.read()
        source.close()
    assert out.rounds == [] and out.discovered == []
    assert "a configured target's name" in caplog.text


def trickle(wfile: Any) -> None:
    for _ in range(10_000):
        wfile.write(b" ")
        wfile.flush()
        time.sleep(0.05)


def flood(wfile: Any) -> None:
    block = b" " * 65536
    for _ in range(200_000):  # 13 GB if read whole
        wfile.write(block)


@pytest.mark.parametrize("body, error", [(trickle, "did not answer within 0.5 s"), (flood, f"larger than the {MAX_ANSWER_BYTES}")])
def test_an_answer_that_trickles_or_never_ends_is_cut_at_its_bound(body, error):
    with serving(prometheus(lambda _p, _q: (200, {"Content-Type": "application/json"}, body))) as base:
        client = PrometheusClient(PrometheusSettings(url=base), 0.5 if body is trickle else 60)
        start = time.monotonic()
        with pytest.raises(PrometheusError, match=error):
            client.query("up")
        took = time.monotonic() - start
        client.close()
    assert took < (1.5 if body is trickle else 30)


def test_an_answer_at_the_size_bound_is_read_and_one_byte_over_is_not():
    def sized(extra: int) -> Answer:
        head = json.dumps(vector(NOW)).encode()[:-1] + b', "pad": "'
        tail = b'"}'
        pad = MAX_ANSWER_BYTES - len(head) - len(tail) + extra
        return lambda _p, _q: (200, {"Content-Encoding": "gzip"}, gzip.compress(head + b"x" * pad + tail))

    with serving(prometheus(sized(0))) as base:
        client = PrometheusClient(PrometheusSettings(url=base), 60)
        assert len(client.query("up")) == 1
        client.close()
    with serving(prometheus(sized(1))) as base:
        client = PrometheusClient(PrometheusSettings(url=base), 60)
        with pytest.raises(TooLarge):
            client.query("up")
        client.close()


def test_stacked_gzip_from_prometheus_is_refused():
    body = gzip.compress(gzip.compress(json.dumps(vector(NOW)).encode()))
    with serving(prometheus(lambda _p, _q: (200, {"Content-Encoding": "gzip, gzip"}, body))) as base:
        client = PrometheusClient(PrometheusSettings(url=base), 5)
        with pytest.raises(PrometheusError, match="encoded 2 times over"):
            client.query("up")
        client.close()


def test_backfill_halves_its_chunk_when_an_answer_is_too_large(tmp_path, monkeypatch):
    import collectors.prometheus as prom

    monkeypatch.setattr(prom, "MAX_ANSWER_BYTES", 4000)
    asked: list[int] = []

    def answer(_p: str, q: dict[str, list[str]]) -> tuple[int, dict[str, str], Any]:
        start, stop = float(q["start"][0]), float(q["end"][0])
        steps = int((stop - start) / 60) + 1
        asked.append(steps)
        return 200, {}, matrix([[start + 60 * i, "1"] for i in range(steps)])

    engine = open_engine(f"sqlite:///{tmp_path}/h.db")
    with serving(prometheus(answer)) as base:
        result = backfill(engine, PrometheusSettings(url=base, selector='{job="vllm"}'), 6 * 3600, 60, NOW, timeout_s=5)
    assert result.rounds == 360 and max(asked) > min(asked)
    assert threading.active_count() < 50


@pytest.mark.parametrize("ahead_s, healthy", [(FUTURE_SKEW_S + 5, False), (3600.0, False), (10 * 365 * 86400.0, False),
                                              (FUTURE_SKEW_S - 5, True)])
def test_health_says_a_round_from_the_future_is_not_health(tmp_path, ahead_s, healthy):
    """A round stored in the future (by an older version) read as "0 s old" for ever: health now says so."""
    from app.commands.health import collector_health
    from tests.store_helpers import vllm_round

    settings = Settings(db_url=f"sqlite:///{tmp_path}/h.db", interval_s=5.0)
    writer = Writer(open_engine(settings.db_url))
    now = float(int(NOW))
    writer.write_rounds([vllm_round(now + ahead_s, 10.0)])
    writer.close()
    ok, reason = collector_health(settings, now)
    assert ok is healthy and (healthy or "in the future" in reason), reason
