"""Decompression and size bombs against the collector's fetcher, on a real loopback server: every
encoding stack is refused with a message saying so, a single layer stops at the decoded-size bound,
and the bound itself is exact (a page of exactly MAX_BODY_BYTES passes, one byte more does not)."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors import fetch
from collectors.fetch import MAX_BODY_BYTES, BodyError, Fetcher
from core.bounded import Inflater
from core.errors import ScrapeError
from tests.support.http_server import serving

PAGE = b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n"


def encode(data: bytes, coding: str) -> bytes:
    if coding in ("gzip", "x-gzip"):
        return gzip.compress(data, compresslevel=9)
    return zlib.compress(data, 9)


def handler(body: Callable[[], bytes], encoding: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = body()
            self.send_response(200)
            if encoding:
                self.send_header("Content-Encoding", encoding)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def get(body: Callable[[], bytes], encoding: str) -> str:
    fetcher = Fetcher()
    try:
        with serving(handler(body, encoding)) as base:
            return fetcher.fetch(base + "/metrics", 10.0, hint="Check targets[].vllm_url")
    finally:
        fetcher.close()


@given(layers=st.lists(st.sampled_from(["gzip", "deflate", "x-gzip", "GZIP"]), min_size=2, max_size=4),
       spacing=st.sampled_from([", ", ",", " , "]))
@settings(max_examples=12, deadline=None)
def test_stacked_encodings_are_refused_whatever_they_are(layers, spacing):
    data = b"0" * 1_000_000
    for coding in layers:
        data = encode(data, coding.lower())
    with pytest.raises(ScrapeError, match=f"encoded {len(layers)} times over"):
        get(lambda: data, spacing.join(reversed(layers)))


def test_the_reported_bomb_two_gzip_layers_is_refused_before_inflating():
    # 4 GB of zeros would be ~4 MB once gzipped, ~4 KB twice: build the outer layers from 512 MB
    inner = gzip.compress(b"\0" * (512 * 1024 * 1024), compresslevel=9)
    bomb = gzip.compress(inner, compresslevel=9)
    assert len(bomb) < 1_000_000
    with pytest.raises(ScrapeError, match=r"encoded 2 times over \(gzip, gzip\)"):
        get(lambda: bomb, "gzip, gzip")


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_a_single_layer_is_decoded_up_to_the_bound_exactly(coding):
    at_bound = PAGE + b"#" * (MAX_BODY_BYTES - len(PAGE) - 1) + b"\n"
    assert len(at_bound) == MAX_BODY_BYTES
    assert len(get(lambda: encode(at_bound, coding), coding)) == MAX_BODY_BYTES
    with pytest.raises(ScrapeError, match=f"larger than the {MAX_BODY_BYTES} bytes allowed once decoded"):
        get(lambda: encode(at_bound + b"#", coding), coding)


def test_a_plain_page_over_the_bound_is_refused_and_at_it_accepted():
    at_bound = b"#" * MAX_BODY_BYTES
    assert len(get(lambda: at_bound, "")) == MAX_BODY_BYTES
    with pytest.raises(ScrapeError, match="larger than the"):
        get(lambda: at_bound + b"#", "identity")


@pytest.mark.parametrize("coding, says", [("br", "'br', which is not read here"), ("compress", "'compress'")])
def test_an_encoding_not_asked_for_is_refused_by_name(coding, says):
    with pytest.raises(ScrapeError, match=says):
        get(lambda: PAGE, coding)


def test_a_corrupt_stream_is_one_line():
    with pytest.raises(ScrapeError, match="gzip answer is corrupt"):
        get(lambda: b"\x1f\x8b" + b"junk" * 10, "gzip")


def test_raw_deflate_from_a_server_that_gets_it_wrong_is_read():
    raw = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    data = raw.compress(PAGE) + raw.flush()
    assert get(lambda: data, "deflate") == PAGE.decode()


@given(size=st.integers(0, 300_000), chunk=st.integers(1, 70_000), limit=st.integers(1, 400_000))
@settings(max_examples=60, deadline=None)
def test_the_inflater_never_holds_more_than_its_limit(size, chunk, limit):
    data = bytes(range(256)) * (size // 256 + 1)
    data = data[:size]
    wire = gzip.compress(data)
    inflater, out = Inflater("gzip", limit, "t"), bytearray()
    try:
        for i in range(0, len(wire), chunk):
            piece = inflater.feed(wire[i : i + chunk])
            assert len(piece) <= limit + 1
            out += piece
    except BodyError:
        assert size > limit
        return
    assert size <= limit and bytes(out) == data


def test_the_collector_asks_only_for_what_it_decodes():
    assert fetch._headers(fetch.HttpSettings())["Accept-Encoding"] == "gzip, deflate"


def test_the_bounds_written_in_the_security_doc_are_the_codes():
    from pathlib import Path

    from app.notify import hooks
    from app.prometheus_source import FUTURE_SKEW_S
    from collectors import expfmt, prometheus
    from db import query_runner
    from sweep import client

    doc = (Path(__file__).resolve().parents[1] / "docs" / "security.md").read_text()
    table = doc[doc.index("## Memory and time bounds"):doc.index("## Exposing the dashboard safely")]
    written = {
        "32 MiB (`MAX_BODY_BYTES`)": fetch.MAX_BODY_BYTES == 32 * 2**20,
        f"{fetch.MAX_BODY_BYTES} bytes allowed": True,
        "16 KiB after its name (`MAX_LINE_CHARS`)": expfmt.MAX_LINE_CHARS == 16 * 1024,
        "1,024 characters (`MAX_LABEL_VALUE_CHARS`)": expfmt.MAX_LABEL_VALUE_CHARS == 1024,
        "1,000 (`MAX_BUCKETS`)": expfmt.MAX_BUCKETS == 1000,
        "64 MiB (`MAX_ANSWER_BYTES`)": prometheus.MAX_ANSWER_BYTES == 64 * 2**20,
        "60 s ahead": FUTURE_SKEW_S == 60,
        "16 MiB in all (`MAX_RESULT_BYTES`": query_runner.MAX_RESULT_BYTES == 16 * 2**20,
        "10 MB (`MAX_VALUE_BYTES`)": query_runner.MAX_VALUE_BYTES == 10_000_000,
        "64 KiB read (`MAX_ANSWER_BYTES` of `app/notify/hooks.py`)": hooks.MAX_ANSWER_BYTES == 64 * 1024,
        "1 MiB / 64 MiB": (client.MAX_LINE_BYTES, client.MAX_STREAM_BYTES) == (2**20, 64 * 2**20),
        "0 to 10,000,000 tokens": client.MAX_USAGE_TOKENS == 10_000_000,
    }
    for text, holds in written.items():
        assert text in table, f"docs/security.md no longer says {text!r}"
        assert holds, f"docs/security.md says {text!r}, the code another number"
