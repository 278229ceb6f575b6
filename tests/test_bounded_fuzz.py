"""The bounded reader (core/bounded.py) and the error boundary (core/errors.py ``refusal``), held by
generated inputs: no stack of encodings, reply, file or result makes a reader hold more than its
cap, and no exception a command or job meets is more than one line or shows a secret."""

from __future__ import annotations

import gzip
import os
import socket
import threading
import time
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.bounded import BoundedLines, Budget, Inflater, TooLarge, read_file
from core.errors import MAX_REFUSAL_CHARS, refusal
from db.query_runner import Limits, fetch_bounded, row_size

CODINGS = st.lists(st.sampled_from(["gzip", "x-gzip", "deflate", "identity", "br", "GZIP", "compress"]), max_size=4)


def encode(data: bytes, codings: list[str]) -> bytes:
    for coding in codings:  # applied in order, as Content-Encoding lists them
        c = coding.lower()
        if c in ("gzip", "x-gzip"):
            data = gzip.compress(data, 1)
        elif c == "deflate":
            data = zlib.compress(data, 1)
    return data


@given(data=st.binary(max_size=20_000), repeat=st.integers(1, 60), codings=CODINGS, limit=st.integers(1, 600_000),
       chunk=st.integers(1, 5000))
@settings(max_examples=120, deadline=None)
def test_no_stack_of_encodings_inflates_past_the_limit(data, repeat, codings, limit, chunk):
    data *= repeat
    wire = encode(data, codings)
    out = bytearray()
    try:
        inflater = Inflater(", ".join(codings), limit, "t")
        for i in range(0, len(wire), chunk):
            out += inflater.feed(wire[i : i + chunk])
            assert len(out) <= limit
    except TooLarge as exc:
        assert "\n" not in str(exc)
        real = [c for c in codings if c.lower() != "identity"]
        assert len(real) > 1 or (real and real[0].lower() not in ("gzip", "x-gzip", "deflate")) or len(data) > limit
        return
    assert bytes(out) == data and len(data) <= limit


@given(lines=st.lists(st.binary(max_size=300).map(lambda b: b.replace(b"\n", b"")), max_size=400),
       limit=st.integers(1, 20_000))
@settings(max_examples=100, deadline=None)
def test_a_reply_is_never_read_past_its_cap(lines, limit, tmp_path_factory):
    path = tmp_path_factory.mktemp("reply") / "r"
    text = b"".join(b"250-" + line + b"\r\n" for line in lines)
    path.write_bytes(text)
    with path.open("rb") as raw:
        reader, got = BoundedLines(raw, limit, "t"), 0
        try:
            while line := reader.readline(8193):
                got += len(line)
                assert got <= limit
        except TooLarge:
            assert len(text) > limit
            return
    assert got == len(text) <= limit


@given(size=st.integers(0, 70_000), limit=st.integers(0, 70_000))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_regular_file_is_read_whole_or_refused_at_its_cap(size, limit, tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * size)
    try:
        assert read_file(path, limit) == b"x" * size and size <= limit
    except TooLarge as exc:
        assert size > limit and "\n" not in str(exc)


def test_what_is_not_a_regular_file_is_refused_without_reading_or_waiting(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "zero"
    link.symlink_to("/dev/zero")
    for path, kind in ((fifo, "a FIFO"), (link, "a device"), (Path("/dev/zero"), "a device"), (tmp_path, "a directory")):
        with pytest.raises(TooLarge, match=f"is {kind}, not a regular file"):
            read_file(path, 1000)


class Cursor:
    """A DB-API cursor over ``rows`` that records each batch it was asked for."""

    def __init__(self, rows):
        self.rows, self.asked = list(rows), []

    def fetchmany(self, n):
        self.asked.append(n)
        batch, self.rows = self.rows[:n], self.rows[n:]
        return batch


@given(widths=st.lists(st.integers(0, 5000), max_size=300), byte_limit=st.integers(16, 200_000), row_limit=st.integers(1, 400))
@settings(max_examples=150, deadline=None)
def test_query_rows_are_counted_by_bytes_as_they_stream(widths, byte_limit, row_limit):
    rows = [(i, "x" * w) for i, w in enumerate(widths)]
    cursor = Cursor(rows)
    kept, by_bytes = fetch_bounded(cursor, Limits(row_limit=row_limit, byte_limit=byte_limit))
    assert sum(row_size(r) for r in kept) <= byte_limit
    budget, fits = Budget(byte_limit), []  # the rows kept are exactly the longest prefix that fits
    for row in rows[: row_limit + 1]:
        if not budget.take(row):
            break
        fits.append(row)
    assert kept == fits and by_bytes == (len(fits) < min(len(rows), row_limit + 1))
    # each batch asks for no more rows than the bytes left hold at the largest row seen before it
    largest, seen, left = 0, 0, byte_limit
    for n in cursor.asked:
        assert n <= (1 if not largest else max(1, left // largest))
        for row in rows[seen : seen + n]:
            largest, left = max(largest, row_size(row)), left - row_size(row)
        seen += n


SECRET = "s3cr3t-Pa55"
EXCEPTIONS = st.sampled_from([ValueError, OverflowError, RecursionError, TypeError, KeyError, MemoryError, OSError,
                              UnicodeError, ZeroDivisionError, AttributeError, IndexError, RuntimeError])


# every form a secret takes in a URL (docs/security.md): a password (with quotes, semicolons, "@"),
# a user given alone or with an empty or placeholder password, a bare query value, a named one, a
# path parameter, a fragment
URLS = st.sampled_from([f"http://u:{SECRET}@h/x", f"https://{SECRET}@h/x", f"http://{SECRET}:@h/x",
                        f"https://{SECRET}:x-oauth-basic@github.example/x", f"http://u:p;'\"{SECRET}@h/x",
                        f"http://u:a@{SECRET}@h/x", f"http://h/x?{SECRET}", f"http://h/x?a=1&k={SECRET}",
                        f"http://h/x;jsessionid={SECRET}", f"http://h/x#access_token={SECRET}",
                        f"postgresql://role:{SECRET}@db/x?sslpassword={SECRET}"])  # fmt: skip


@given(kind=EXCEPTIONS, text=st.text(max_size=3000), url=URLS)
@settings(max_examples=200, deadline=None)
def test_every_failure_is_one_masked_line(kind, text, url):
    exc = kind(f"{text} {url} {text[:20]}")
    try:
        raise exc
    except BaseException as caught:  # noqa: BLE001 - any exception is what the boundary meets
        line = refusal(caught, "`status`")
    assert "\n" not in line and "\r" not in line and SECRET not in line and len(line) <= MAX_REFUSAL_CHARS + 1
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in line)


@given(kind=EXCEPTIONS, text=st.text(max_size=500))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_command_that_meets_any_exception_says_one_line_and_exits_2(kind, text, monkeypatch, capsys, tmp_path):
    from app import cli
    from app.commands import status

    def hostile(args, settings):
        raise kind(text)

    monkeypatch.setattr(status, "execute", hostile)
    monkeypatch.setenv("SWEETSPOT_DB_URL", f"sqlite:///{tmp_path}/s.db")
    capsys.readouterr()
    assert cli.main(["status"]) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in err and err.startswith("ERROR: ") and err.count("\n") == 1, err


def test_a_job_that_meets_any_exception_logs_one_line(caplog):
    from app.scheduler import Job, _guarded

    def hostile():
        raise OverflowError(f"int too large http://u:{SECRET}@h/\x1b[2J")

    _guarded(Job("collect", hostile, 5.0), {})()
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and errors[0].exc_info is None
    message = errors[0].getMessage()
    assert "OverflowError" in message and SECRET not in message and "\x1b" not in message


@pytest.fixture
def endless_smtp():
    """A server on 127.0.0.1 whose greeting is ``220-`` lines without end."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    stop = threading.Event()

    def serve():
        conn, _ = server.accept()
        line = b"220-" + b"x" * 500 + b"\r\n"
        try:
            while not stop.is_set():
                conn.sendall(line * 64)
        except OSError:
            pass
        finally:
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


def test_an_smtp_reply_without_end_is_refused_in_one_line(endless_smtp, monkeypatch, capsys):
    from app.cli import main

    for name, value in {"SWEETSPOT_SMTP_HOST": "127.0.0.1", "SWEETSPOT_SMTP_PORT": str(endless_smtp),
                        "SWEETSPOT_SMTP_TLS": "none", "SWEETSPOT_ALERT_FROM": "a@example.test",
                        "SWEETSPOT_ALERT_TO": "b@example.test"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    started = time.monotonic()
    assert main(["alerts", "test-email"]) == 2
    err = capsys.readouterr().err
    assert "sent a reply longer than 65,536 bytes" in err and err.count("\n") == 1, err
    assert time.monotonic() - started < 60  # refused at the cap, not at the deadline or in memory


@given(secret=st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~!$'()*+,;", min_size=6, max_size=30),
       form=st.sampled_from(["http://u:{s}@h/api", "http://{s}@h/api", "http://{s}:x-oauth-basic@h/api",
                             "http://h/api?token={s}", "http://h/api?{s}"]),
       echo=st.sampled_from(["{s}", "{q}", "Basic auth for {s} refused", "bad key '{q}'"]))
@settings(max_examples=150, deadline=None)
def test_a_configured_secret_echoed_back_by_a_server_is_scrubbed(secret, form, echo):
    from urllib.parse import quote

    from collectors.fetch import HttpSettings, scrubbed

    url = form.format(s=quote(secret, safe=""))
    body = echo.format(s=secret, q=quote(secret, safe=""))
    assert secret not in scrubbed(body, HttpSettings(), url) and quote(secret, safe="") not in scrubbed(body, HttpSettings(), url)


def test_docs_state_each_chokepoints_bound_as_the_code_has_it():
    from app.notify.smtp import MAX_ANSWER_CHARS, MAX_REPLY_BYTES
    from core.limits import LIMITS, MAX_SETTING_INT
    from db.query_runner import MAX_QUERY_MEMORY_BYTES

    doc = (Path(__file__).resolve().parents[1] / "docs" / "security.md").read_text()
    for text, holds in {
        "64 KiB (`MAX_REPLY_BYTES`": MAX_REPLY_BYTES == 64 * 1024,
        "stored: 500 characters": MAX_ANSWER_CHARS == 500,
        "1 GiB mapped beyond what it had (`MAX_QUERY_MEMORY_BYTES`": MAX_QUERY_MEMORY_BYTES == 2**30,
        "at most 2^53 (`MAX_SETTING_INT`)": MAX_SETTING_INT == 2**53,
        "at most 500 characters": MAX_REFUSAL_CHARS == 500,
        "(10 s, at most 10 min)": all(LIMITS[f"alerts.{c}.timeout_s"].high == 600 for c in ("email", "webhook", "alertmanager")),
    }.items():
        assert text in doc, f"docs/security.md no longer says {text!r}"
        assert holds, f"docs/security.md says {text!r}, the code another number"


NAME_CHARS = st.text(st.sampled_from(list("{}ab .$|\"'`-_")), min_size=1, max_size=16).map(lambda s: f"t{s}x")


def _exported(name: str) -> str:
    from app.alerts.promql import Options, export
    from core.settings import Settings, SweetSpotOverrides, TargetSettings

    target = TargetSettings(name=name, vllm_url="http://big:8000/metrics", sweetspot=SweetSpotOverrides(ttft_p95_slo_s=5.0))
    return export(Settings(targets=(target,)), Options())


def _go_expanded(text: str) -> str:
    """What Go's text/template makes of a text whose only actions are ``{{ "{{" }}``."""
    escape = '{{ "{{" }}'
    parts = text.split(escape)
    assert all("{{" not in part for part in parts), text  # no other action: nothing of the name runs
    return "{{".join(parts)


@given(name=NAME_CHARS)
@settings(max_examples=80, deadline=None)
def test_a_name_in_a_rule_file_is_a_go_template_that_expands_to_itself(name):
    import yaml

    rules = [r for g in yaml.safe_load(_exported(name))["groups"] for r in g["rules"] if "alert" in r]
    values = [v for r in rules for v in (*r["labels"].values(), *r["annotations"].values())]
    assert name in {_go_expanded(v) for v in values}


def test_promtool_loads_a_rule_file_of_a_name_full_of_template_delimiters(tmp_path):
    from tests.test_rules_export import run_promtool

    (tmp_path / "rules.yml").write_text(_exported('t{{ .Value }}{{{ printf "%s" "x" }}}x'))
    assert "SUCCESS" in run_promtool("check", "rules", str(tmp_path / "rules.yml"))


LOOKALIKES = {"a": "а", "o": "о", "e": "е", "p": "р", "c": "с", "x": "х"}  # Latin → Cyrillic twins


def _variants(name: str) -> list[str]:
    import unicodedata

    wide = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in name)  # full-width forms
    twin = "".join(LOOKALIKES.get(c, c) for c in name)
    return [v for v in (wide, twin, unicodedata.normalize("NFKD", name)) if v != name]


@given(name=st.text("abcopex-_0123456789", min_size=1, max_size=20))
@settings(max_examples=150, deadline=None)
def test_one_name_one_owner_whatever_its_spelling(name):
    from core.text import NameClaims

    claims = NameClaims(["configured-" + name])
    assert claims.claim(name, "source A") == ""
    assert claims.claim(name, "source A") == ""  # its own, round after round
    assert "reported by source A" in claims.claim(name, "source B")  # one instance, one target
    for variant in _variants(name):
        assert claims.claim(variant, "source A") and claims.claim(variant, "source B")
    for variant in ["configured-" + name, *_variants("configured-" + name)]:
        assert claims.claim(variant, "source A")


@given(width=st.integers(0, 10**12), align=st.sampled_from(["", ">", "<", "^", "0", "x^", ".", ">."]))
@settings(max_examples=100, deadline=None)
def test_a_rule_text_never_fills_past_its_bounded_width(width, align):
    from app.alerts.rules import MAX_FORMAT_WIDTH, fill, template_problem

    template = f"q {{window:{align}{width}}}"
    filled = fill(template, {"window": "5m"})
    assert len(filled) <= len(template) + MAX_FORMAT_WIDTH
    if width > MAX_FORMAT_WIDTH:
        assert template_problem(template) and filled == template
