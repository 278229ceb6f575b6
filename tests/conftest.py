"""Shared fixtures: a database URL per test, on SQLite and on a real PostgreSQL.

PostgreSQL is started by the test tooling itself: ``initdb`` into a temporary folder, then
``pg_ctl start`` on 127.0.0.1 with a free port and the Unix socket inside that folder; it is stopped
at the end of the session. As root (CI containers) ``initdb`` refuses to run, so the server runs as
the ``postgres`` user. Without the binaries the PostgreSQL half of the tests is skipped, saying why.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import glob
import itertools
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# every child ends with its test, also when the run is killed: these hooks own and reap them
from tests.support.children import (  # noqa: F401
    pytest_configure,
    pytest_fixture_post_finalizer,
    pytest_fixture_setup,
    pytest_runtest_protocol,
)
from tests.support.ports import free_port

PG_USER = "sweetspot"


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None



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
    data, port = root / "data", free_port()
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


# The fast tier (`make check`): tests that need no server, browser or engine. A test module is in
# it unless it imports one of these (a server of its own, a browser, a real engine, the CLI or the
# collector as a process), or is marked postgres/browser/engine/gpu/slow, or is named in
# NOT_FAST with why. Every such item gets the marker `fast`; tests/test_fast_tier.py keeps the
# rule honest (every helper under tests/ that starts a process or a server is listed here).
NEEDS_SERVER = (
    "tests.support.http_server", "tests.support.smtp_server", "tests.support.sources", "tests.support.collector_process",
    "tests.support.vllm_bench", "tests.support.tiny_llama", "tests.support.certificates", "tests.browser", "tests.vllm_engine", "tests.prometheus_server",
    "tests.victoria_server", "tests.support.children",
    "tests.alertmanager_server", "http.server", "socketserver", "subprocess", "multiprocessing", "aiosmtpd",
    "streamlit.testing", "playwright", "simulator.server", "simulator.api",
)  # fmt: skip
# Modules that import none of NEEDS_SERVER and still take more than a few seconds: seconds per file
# of a serial `pytest -m fast -v` on the shared 2-core machine (2026-12-06, with other suites beside).
NOT_FAST: dict[str, str] = {
    "test_store_writer.py": "28 s: writes and reads back many SQLite databases",
    "test_query_pool.py": "21 s: starts query worker processes, kills runaways",
    "test_ui_charts.py": "19 s: builds Vega-Lite specs over long histories",
    "test_store_engine.py": "18 s: SQLite locking and writer-lease timing",
    "test_store_migrations.py": "16 s: migrates databases of every past layout",
    "test_sim_metrics.py": "15 s: simulates hours of engine history",
    "test_collect_engines.py": "13 s: collection rounds through the whole pipeline",
    "test_sim_history.py": "10 s: simulates days of history",
    "test_sim_engines.py": "7 s: simulated engines' pages",
    "test_store_engines.py": "7 s: one and many targets through the writer",
    "test_panels.py": "17 s with test_notify_declared.py: a simulated hour, every panel rendered twice",
    "test_notify_declared.py": "17 s with test_panels.py: a simulated history and PNG rendering",
}
_HEAVY_MARKS = ("postgres", "browser", "engine", "gpu", "slow")
_MODULE_MARK = re.compile(r"^pytestmark\s*=.*\b(?:postgres|browser|engine|gpu|slow)\b", re.MULTILINE)


@functools.cache
def module_needs(path: Path) -> tuple[str, ...]:
    """The modules of NEEDS_SERVER that the test module at ``path`` imports (anywhere in it)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return tuple(sorted(n for n in NEEDS_SERVER if any(m == n or m.startswith(n + ".") for m in names)))


def fast_module(path: Path) -> bool:
    """Whether the test module at ``path`` belongs to the fast tier (its items may still be marked out)."""
    return path.name not in NOT_FAST and not module_needs(path) and not _MODULE_MARK.search(path.read_text(encoding="utf-8"))


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``-m fast`` (make check) the other test modules are not even imported: collecting them
    all costs more than the fast tier's tests."""
    if config.option.markexpr.strip() == "fast" and collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        return not fast_module(collection_path)
    return None


def is_fast(item: pytest.Item) -> bool:
    return fast_module(item.path) and not any(item.get_closest_marker(m) for m in _HEAVY_MARKS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if is_fast(item):
            item.add_marker(pytest.mark.fast)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order

