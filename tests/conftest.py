"""Shared fixtures: a database URL per test, on SQLite and on a real PostgreSQL.

PostgreSQL is started by the test tooling itself: ``initdb`` into a temporary folder, then
``pg_ctl start`` on 127.0.0.1 with a free port and the Unix socket inside that folder; it is stopped
at the end of the session. As root (CI containers) ``initdb`` refuses to run, so the server runs as
the ``postgres`` user. Without the binaries the PostgreSQL half of the tests is skipped, saying why.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_USER = "sweetspot"


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--", *cmd]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """Base URL (``postgresql://sweetspot@127.0.0.1:PORT``) of a throwaway PostgreSQL server."""
    with started_postgres() as base:
        yield base


@contextlib.contextmanager
def started_postgres(password: str = "") -> Iterator[str]:
    """A throwaway PostgreSQL server's base URL (no password in it); with ``password``, the server
    asks every client for it (scram-sha-256), as a production server does."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        if os.environ.get("CI"):  # CI installs postgresql (.ci/run): a skip there would hide a broken install
            pytest.fail("PostgreSQL binaries not found although CI is set; .ci/run should have installed postgresql")
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) not found on PATH or in /usr/lib/postgresql/*/bin")
    if os.geteuid() == 0 and not shutil.which("runuser"):
        pytest.skip("running as root and runuser is missing: cannot start PostgreSQL as the postgres user")
    root = Path(tempfile.mkdtemp(prefix="sweetspot-pg-"))
    root.chmod(0o755)
    auth = ["--auth=trust"]
    if password:
        (root / "pw").write_text(password)
        auth = ["--auth=scram-sha-256", f"--pwfile={root / 'pw'}"]
    if os.geteuid() == 0:
        for path in (root, *root.iterdir()):
            shutil.chown(path, "postgres", "postgres")
    data, port = root / "data", _free_port()
    run = lambda cmd: subprocess.run(_as_server_user(cmd), check=True, capture_output=True, timeout=120)  # noqa: E731
    try:
        run([initdb, "-D", str(data), "-U", PG_USER, *auth, "-E", "UTF8", "--no-sync"])
        opts = f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={root} -c fsync=off"
        run([pg_ctl, "-D", str(data), "-o", opts, "-l", str(root / "log"), "-w", "start"])
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"could not start PostgreSQL: {exc.stderr.decode(errors='replace')[-500:]}")
    try:
        yield f"postgresql://{PG_USER}@127.0.0.1:{port}"
    finally:
        subprocess.run(_as_server_user([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]), capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


_db_counter = itertools.count()


def _new_postgres_db(base: str) -> str:
    import psycopg

    name = f"t{os.getpid()}_{next(_db_counter)}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{base}/{name}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database URL as users write it (a new SQLite file, or a new PostgreSQL database)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/sweetspot.db"
    return _new_postgres_db(request.getfixturevalue("postgres_server"))


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Headless Debian Chromium through Playwright, one per test module (tests/browser.py launches it)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    from tests.browser import launch

    with sync_api.sync_playwright() as playwright:
        chromium = launch(playwright)
        yield chromium
        chromium.close()


# The files that take longest in a whole run (`pytest --durations=0`, summed per file), longest
# first. `make test` spreads whole files over workers (pytest-xdist --dist loadfile, in collection
# order): started first, none of them is left to run alone at the end. Only the run's length
# depends on this list.
LONGEST_FIRST = ("test_real_engine.py", "test_ui_every_range.py", "test_notify_e2e.py", "test_ui_browser.py", "test_prometheus_source.py",
                 "test_alerts_e2e.py", "test_ui_app.py", "test_docs_commands.py", "test_fleet.py")  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
