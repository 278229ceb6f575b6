"""A PostgreSQL password is never shown: the commands' start lines, errors, `config`, logs and the
dashboard's sidebar, against a real PostgreSQL server that asks for the password (scram-sha-256).

Two ways of giving it: in the URL (a careless but working setting: masked wherever it is printed),
and apart from it (SWEETSPOT_DB_PASSWORD, as deploy/compose.yaml does; libpq's PGPASSWORD too).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests.conftest import started_postgres
from tests.support.collector_process import first_line
from tests.support.http_server import closed_port_url
from tests.support.ports import free_port
from tests.test_ui_pages import texts

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[1]
PASSWORD = "Pg-s3cret:@/x"  # characters that must be percent-encoded in a URL
QUOTED = "Pg-s3cret%3A%40%2Fx"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The base URL (no password) of a server whose database "sweetspot" holds one stored round."""
    import psycopg

    with started_postgres(PASSWORD) as base:
        with psycopg.connect(f"{base}/postgres", password=PASSWORD, autocommit=True) as conn:
            conn.execute('CREATE DATABASE "sweetspot"')
        yield f"{base}/sweetspot"


def _with_password(url: str) -> str:
    return url.replace("sweetspot@", f"sweetspot:{QUOTED}@", 1)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWEETSPOT_", "PG"))}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def app(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", "-v", *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def _leaks(text: str) -> bool:
    return PASSWORD in text or QUOTED in text or "s3cret" in text


@pytest.fixture(params=["in-url", "SWEETSPOT_DB_PASSWORD", "PGPASSWORD"])
def env(request: pytest.FixtureRequest, server: str) -> dict[str, str]:
    if request.param == "in-url":
        return _env(SWEETSPOT_DB_URL=_with_password(server))
    return _env(SWEETSPOT_DB_URL=server, **{request.param: PASSWORD})


def test_commands_work_and_never_show_the_password(env: dict[str, str]) -> None:
    shown = []
    migrate = app(env, "db", "migrate")
    assert migrate.returncode == 0, migrate.stderr  # the server asked for the password: it was given
    for argv in (["config"], ["config", "--json"], ["db", "info"], ["status", "--target", "nope"]):
        done = app(env, *argv)
        shown.append(done.stdout + done.stderr)
    assert "settings OK" in shown[0] and "sweetspot@127.0.0.1" in shown[0].replace(":***@", "@")
    assert "no target named 'nope'" in shown[3]
    vllm = closed_port_url()
    shown.append(first_line(env, "collect", "--vllm-url", vllm, "--interval", "1h"))
    shown.append(first_line(env, "ui", "--port", str(free_port()), "--address", "127.0.0.1"))
    assert shown[-2].startswith("collecting 1 target(s)") and shown[-1].startswith("Sweetspot dashboard")
    assert not [text for text in shown if _leaks(text)], shown


def test_a_wrong_password_is_one_line_without_it(server: str) -> None:
    done = app(_env(SWEETSPOT_DB_URL=server.replace("sweetspot@", "sweetspot:wrong-s3cret@")), "status")
    assert done.returncode == 2 and "password authentication failed" in done.stderr
    assert "Traceback" not in done.stderr and not _leaks(done.stderr), done.stderr


@pytest.mark.parametrize(("url", "why"), [
    ("sqlite:///x.db", "not a postgresql:// URL"),
    ("postgresql://u:other-s3cret@h/db", "holds a password too"),
    ("postgresql://h/db", "names no user"),
])  # fmt: skip
def test_sweetspot_db_password_is_refused_where_it_cannot_apply(url: str, why: str) -> None:
    done = app(_env(SWEETSPOT_DB_URL=url, SWEETSPOT_DB_PASSWORD=PASSWORD), "config")
    assert done.returncode == 2 and why in done.stderr and "SWEETSPOT_DB_PASSWORD" in done.stderr
    assert not _leaks(done.stderr), done.stderr


def test_the_sidebar_and_every_page_never_show_it(server: str, monkeypatch) -> None:
    from db.engine import open_engine
    from db.writer import Writer
    from tests.store_helpers import vllm_round

    engine = open_engine(_with_password(server))
    Writer(engine).write_rounds([vllm_round(1_700_000_000.0, 10.0)])
    engine.dispose()
    monkeypatch.setenv("SWEETSPOT_DB_URL", _with_password(server))
    for name in ("SWEETSPOT_CONFIG", "SWEETSPOT_UI_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(str(ROOT / "app" / "ui" / "main.py"), default_timeout=60).run()
    pages = ["views/fleet.py", "views/gpus.py", "views/operating_point.py", "views/alerts.py", "views/targets.py"]
    seen = []
    for page in [None, *pages]:
        if page:
            at.switch_page(page).run()
        assert not at.exception, (page, at.exception)
        sidebar = "\n".join(c.value for c in at.sidebar.caption)
        assert "sweetspot:***@127.0.0.1" in sidebar, (page, sidebar)
        seen.append(texts(at) + sidebar)
    assert not [text for text in seen if _leaks(text)]
