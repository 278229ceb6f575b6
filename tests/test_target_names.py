"""Target names that read the same (a zero-width space, a Cyrillic о for o, a space at the end, a
full-width letter) or as nothing (U+200B, NUL, blanks) are refused when the settings load, in one line
naming the key; names are compared normalised (NFKC, stripped, look-alike letters). Names a Prometheus
answer carries go through the same test: backfill never registers "" or " "."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from app.cli import main
from app.loader import load_settings
from core.settings import ConfigError
from core.text import name_key, name_problem
from db import schema
from db.engine import open_engine
from tests.support.http_server import started

ROOT = Path(__file__).resolve().parent.parent
BASE = "prod-70b"
_INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u200e", "\u202e", "\x00", "\x07", "\u00ad"]
_LOOKALIKE = {"o": ["о", "ο"], "p": ["р", "ρ"], "d": ["ԁ"], "b": ["Ь"]}


@st.composite
def reads_the_same(draw: st.DrawFn) -> str:
    """``BASE`` changed in a way a reader cannot see."""
    kind = draw(st.sampled_from(["invisible", "lookalike", "space", "fullwidth"]))
    if kind == "invisible":
        at = draw(st.integers(0, len(BASE)))
        return BASE[:at] + draw(st.sampled_from(_INVISIBLE)) + BASE[at:]
    if kind == "lookalike":
        at = draw(st.sampled_from([i for i, c in enumerate(BASE) if c in "op"]))
        return BASE[:at] + draw(st.sampled_from(_LOOKALIKE[BASE[at]])) + BASE[at + 1:]
    if kind == "space":
        return draw(st.sampled_from(["", " ", "\t", "\u00a0", "\u3000"])) + BASE + draw(st.sampled_from([" ", "\u00a0", "\u2003", "\n"]))
    return "".join(chr(ord(c) + 0xFEE0) if c.isalnum() and draw(st.booleans()) else c for c in BASE) or BASE


def _config(tmp_path: Path, *names: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text("".join(f'[[targets]]\nname = {json.dumps(n)}\nvllm_url = "http://127.0.0.1:{i + 1}/metrics"\n'
                            for i, n in enumerate(names)))
    return path


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(twin=reads_the_same())
def test_a_name_that_reads_like_another_is_refused_in_one_line(tmp_path, twin: str) -> None:
    if twin == BASE:
        return
    with pytest.raises(ConfigError) as caught:
        load_settings(_config(tmp_path, BASE, twin), {})
    message = str(caught.value)
    assert message.startswith("targets[1].name: ") and "\n" not in message and "\x00" not in message
    assert "\u200b" not in message and "\u202e" not in message  # shown escaped, never raw


@pytest.mark.parametrize("name", ["", " ", "\u200b", "\x00", "\u200b\u200b", "\u3000", "\u2028"])
def test_a_name_that_reads_as_nothing_is_refused(tmp_path, name: str) -> None:
    with pytest.raises(ConfigError, match=r"^targets\[0\]\.name: "):
        load_settings(_config(tmp_path, name), {})


@pytest.mark.parametrize("name", ["prod-70b", "Prod-70B", "llama 3 / 70b", "生产-70b", "прод-1", "ναι", "a.b_c:d"])
def test_names_of_one_script_stay_as_they_are(tmp_path, name: str) -> None:
    assert not name_problem(name)
    assert load_settings(_config(tmp_path, name, "other"), {}).targets[0].name == name


def test_the_cli_says_it_in_one_line(tmp_path) -> None:
    env = {**os.environ, "SWEETSPOT_DB_URL": f"sqlite:///{tmp_path}/x.db"}
    done = subprocess.run([sys.executable, "-m", "app", "--config", str(_config(tmp_path, BASE, "prоd-70b")), "config"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) <= 2 and "targets[1].name" in lines[0] and "CYRILLIC" in lines[0], done.stderr


def test_name_key_sees_what_reads_the_same() -> None:
    assert name_key("ｐｒｏｄ") == name_key("prod") == name_key("рrоd") == name_key(" prod\u00a0")


# -- backfill from a Prometheus answering hostile target labels ------------------------------------------
HOSTILE = ["", " ", "\u200b", "\x00bad", "ok\u202e", "fine"]


def _answer(path: str, query: dict[str, list[str]]) -> dict:
    if path.endswith("/series"):
        return {"status": "success", "data": [{"__name__": "vllm:num_requests_running", "instance": n} for n in HOSTILE]}
    start, end, step = (float(query[k][0]) for k in ("start", "end", "step"))
    stamps = [start + i * step for i in range(int((end - start) / step) + 1)]
    return {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "vllm:num_requests_running", "instance": n, "model_name": "m"},
         "values": [[t, "1"] for t in stamps]} for n in HOSTILE]}}


class FakePrometheus(ThreadingHTTPServer):
    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                parts = urlsplit(self.path)
                body = json.dumps(_answer(parts.path, parse_qs(parts.query))).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)


@pytest.fixture
def prometheus() -> Iterator[str]:
    for start in started(FakePrometheus):
        server = start()
        yield f"http://127.0.0.1:{server.server_address[1]}"


def test_backfill_registers_no_name_that_reads_as_nothing_or_hides(prometheus, tmp_path, capsys) -> None:
    db = f"sqlite:///{tmp_path}/b.db"
    assert main(["backfill", "--prometheus", prometheus, "--since", "30s", "--step", "10s", "--db", db]) == 0, \
        capsys.readouterr().err
    engine = open_engine(db)
    with engine.connect() as conn:
        names = sorted(conn.execute(select(schema.targets.c.name)).scalars())
    engine.dispose()
    assert names == ["fine"]
