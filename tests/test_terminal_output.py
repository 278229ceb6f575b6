"""What a command prints for a terminal holds text from outside (a model name from a /metrics page,
a target's error): every control character is shown as an escape and every line is bounded, for any
command, because stdout itself escapes (core/text.py TerminalWriter, installed by app/cli.py)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.text import MAX_LINE, TerminalWriter
from tests.support.http_server import serve

ROOT = Path(__file__).resolve().parent.parent
V1 = (Path(__file__).parent / "data" / "vllm_v1.txt").read_text()
MODEL = "meta-llama/Llama-3.3-70B-Instruct-AWQ"
_RAW_CONTROL = {chr(c) for c in [*range(0, 9), *range(11, 32), *range(0x7F, 0xA0)]} | {"\u2028", "\u202e", "\u200b"}


@settings(max_examples=300, deadline=None)
@given(chunks=st.lists(st.text(max_size=400), max_size=12), limit=st.integers(1, 300))
def test_the_writer_escapes_every_control_character_and_bounds_every_line(chunks: list[str], limit: int) -> None:
    out = io.StringIO()
    writer = TerminalWriter(out, limit)
    for chunk in chunks:
        writer.write(chunk)
    writer.write("\n")
    text = out.getvalue()
    assert not set(text) & _RAW_CONTROL
    assert text.count("\n") == "".join(chunks).count("\n") + 1  # no line added, none taken
    assert all(len(line.split(" … [")[0]) <= limit for line in text.split("\n"))


def _page(model: str) -> str:
    exposed = model.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return V1.replace(MODEL, exposed)


@pytest.mark.parametrize("model", [
    "evil\x1b[2J\x1b]0;owned\x07\rmodel",
    "two\nlines\u2028three\u202ereversed",
    "huge-" + "x" * 50_000,  # on each of the page's 404 lines of the model: a 20 MB page
])  # fmt: skip
def test_collect_once_prints_names_escaped_and_bounded(tmp_path, model: str) -> None:
    with serve({"/metrics": (200, "text/plain; version=0.0.4", _page(model))}) as base:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SWEETSPOT_")}
        done = subprocess.run([sys.executable, "-m", "app", "collect", "--once", "--vllm-url", f"{base}/metrics",
                               "--db", f"sqlite:///{tmp_path}/t.db"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not set(done.stdout) & _RAW_CONTROL, done.stdout[:2000]
    assert all(len(line) <= MAX_LINE + 60 for line in done.stdout.split("\n")), max(map(len, done.stdout.split("\n")))
    assert "owned" not in done.stdout or "\\x1b]0;owned\\x07" in done.stdout
    assert "\nlines" not in done.stdout
