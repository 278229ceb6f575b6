"""A db_url password holding ``/ ? # @`` or a space (base64 passwords hold ``/``), written raw in the
URL, is never shown: ``config``, ``config --json``, ``status``, the start lines of ``collect`` and
``ui``, and the dashboard's sidebar; and it reaches the driver whole (no error quotes a piece of it
as the host). Masked up to the authority's last ``@`` (core/redact.py), the URL's userinfo
percent-encoded at load (core/settings.py ``userinfo_quoted``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import streamlit as st
from hypothesis import given, settings
from hypothesis import strategies as st_h
from streamlit.testing.v1 import AppTest

from core.redact import masked
from core.settings import read_settings
from tests.support.collector_process import first_line
from tests.support.http_server import closed_port_url
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
PASSWORDS = ["a/b?c#d e@fgh", "Zm9vYmFy/cXV4+eHl6==", "p@ssq w0rdq#7Z9K", "x?y=z&qzv@n/..", "   spq@cxe   "]


def _url(password: str) -> str:
    return f"postgresql://sweetspot:{password}@127.0.0.1:1/sweetspot"


def _pieces(password: str) -> list[str]:
    """Every run of 3+ characters of the password between its special characters: none may show."""
    return [p for p in re.split(r"[/?#@ =&+.]", password) if len(p) >= 3]


def _env(password: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWEETSPOT_", "PG"))}
    return {**env, "PYTHONPATH": str(ROOT), "SWEETSPOT_DB_URL": _url(password)}


@pytest.mark.parametrize("password", PASSWORDS)
def test_no_command_shows_a_piece_of_the_password(password: str) -> None:
    env, shown = _env(password), []
    for argv in (["config"], ["config", "--json"], ["status"]):
        done = subprocess.run([sys.executable, "-m", "app", *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=120)
        shown.append(done.stdout + done.stderr)
    assert "sweetspot:***@127.0.0.1:1/sweetspot" in shown[0], shown[0]
    assert "127.0.0.1" in shown[2] and "resolve host" not in shown[2], shown[2]  # the driver got the host right
    shown.append(first_line(env, "collect", "--vllm-url", closed_port_url(), "--interval", "1h"))
    shown.append(first_line(env, "ui", "--port", str(free_port()), "--address", "127.0.0.1"))
    leaks = [(text, piece) for text in shown for piece in _pieces(password) if piece in text]
    assert not leaks, leaks


@settings(max_examples=300, deadline=None)
@given(password=st_h.text(st_h.characters(codec="utf-8", exclude_characters="\n\r"), min_size=1, max_size=40))
def test_the_loaded_db_url_is_masked_whole_whatever_the_password(password: str) -> None:
    db_url = read_settings(None, {"SWEETSPOT_DB_URL": _url(password)}).db_url
    assert masked(db_url) == "postgresql://sweetspot:***@127.0.0.1:1/sweetspot"
    assert masked(_url(password)) == "postgresql://sweetspot:***@127.0.0.1:1/sweetspot"


@pytest.mark.parametrize("password", PASSWORDS[:2])
def test_the_sidebar_never_shows_it(password: str, monkeypatch) -> None:
    monkeypatch.setenv("SWEETSPOT_DB_URL", _url(password))
    for name in ("SWEETSPOT_CONFIG", "SWEETSPOT_UI_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(str(ROOT / "app" / "ui" / "main.py"), default_timeout=60).run()
    text = "\n".join(str(getattr(e, "value", "")) for e in at.main) + "\n".join(c.value for c in at.sidebar.caption)
    text += "\n".join(str(getattr(e, "value", "")) for e in at.error)
    assert "127.0.0.1" in text, text  # the page says where it read from
    assert not [piece for piece in _pieces(password) if piece in text], text
