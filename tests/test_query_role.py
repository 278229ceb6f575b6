"""On PostgreSQL the ad-hoc queries (the Query page, ``python -m app query``) run as a role that reads
the query views and nothing else: deploy/query-role.sql makes it (before the views exist, as compose
does, or on an existing database); through the real query path pg_authid, pg_shadow,
pg_hba_file_rules, the raw tables and pg_stat_reset() are refused, and a db_url whose role can do
more is refused as the query's role, naming query.db_url."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests import query_db
from tests.conftest import _new_postgres_db

pytestmark = pytest.mark.postgres
ROOT = Path(__file__).resolve().parent.parent
NOW = time.time() // 60 * 60
READER = "sweetspot_reader"
SECRET = "reader-pw-7"


def _apply_role_sql(url: str) -> None:
    psql = shutil.which("psql") or next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"))), None)
    if psql is None:
        pytest.skip("psql not found")
    done = subprocess.run([str(psql), url, "-v", "ON_ERROR_STOP=1", "-v", "writer=sweetspot", "-v", f"reader={READER}",
                           "-v", f"reader_password={SECRET}", "-f", str(ROOT / "deploy" / "query-role.sql")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def _reader_url(url: str) -> str:
    parts = urlsplit(url)
    return f"postgresql://{READER}@{parts.hostname}:{parts.port}{parts.path}"


@pytest.fixture(scope="module", params=["before the views (compose)", "on an existing database"])
def database(request, postgres_server) -> tuple[str, str]:
    url = _new_postgres_db(postgres_server)
    if request.param.startswith("before"):
        _apply_role_sql(url)
        query_db.fill(url, NOW, hours=0.5)
    else:
        query_db.fill(url, NOW, hours=0.5)
        _apply_role_sql(url)
    return url, _reader_url(url)


def _query(writer: str, sql: str, reader: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEETSPOT_")}
    if reader:
        env["SWEETSPOT_QUERY_DB_URL"] = reader
        env["SWEETSPOT_QUERY_DB_PASSWORD"] = SECRET
    return subprocess.run([sys.executable, "-m", "app", "query", "--db", writer, "--format", "json", sql], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)


def test_the_views_are_read_as_the_reader(database) -> None:
    writer, reader = database
    done = _query(writer, "SELECT target FROM target_info ORDER BY target", reader)
    assert done.returncode == 0, done.stderr
    assert '"demo"' in done.stdout and '"edge"' in done.stdout


@pytest.mark.parametrize("sql", [
    "SELECT rolname, rolpassword FROM pg_authid",
    "SELECT usename, passwd FROM pg_shadow",
    "SELECT * FROM pg_hba_file_rules",
    "SELECT pg_stat_reset()",
    "SELECT pg_catalog.pg_stat_reset_shared('bgwriter')",
    "SELECT * FROM public.scrapes",
    "SELECT * FROM pg_catalog.pg_authid",
])  # fmt: skip
def test_what_is_not_a_view_is_refused_through_the_query_path(database, sql: str) -> None:
    writer, reader = database
    done = _query(writer, sql, reader)
    assert done.returncode != 0, done.stdout
    assert "SCRAM-SHA-256" not in done.stdout + done.stderr and "md5" not in done.stdout
    assert "ERROR" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize("sql", [
    "SELECT rolpassword FROM pg_authid", "SELECT passwd FROM pg_shadow", "SELECT * FROM pg_hba_file_rules",
    "SELECT pg_stat_reset()", "SELECT * FROM scrapes", "SELECT * FROM public.samples",
])  # fmt: skip
def test_the_role_itself_is_refused_without_the_guard(database, sql: str) -> None:
    """Straight to the server as the reader (no SQL guard in front): the server says no."""
    import psycopg

    _, reader = database
    with psycopg.connect(reader) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(sql)


def test_a_db_url_whose_role_reads_more_is_refused_naming_query_db_url(database) -> None:
    writer, _ = database
    done = _query(writer, "SELECT target FROM target_info", None)  # the test server's superuser
    assert done.returncode != 0
    assert "refused by rule query-role" in done.stderr and "query.db_url" in done.stderr, done.stderr


def test_every_view_and_canned_query_runs_as_the_reader(database) -> None:
    """The reader lacks nothing the views and canned queries need (their functions, types, schema)."""
    from db import canned, query_views
    from db.query_runner import Limits, run_query

    _, reader = database
    limits = Limits(timeout_s=20, row_limit=5, max_timeout_s=30)
    for view in query_views.VIEWS:
        assert run_query(reader, f"SELECT * FROM {view.name} LIMIT 1", limits).columns
    for c in canned.CANNED:
        assert run_query(reader, c.sql, limits, canned.bind(c, {}, NOW)).columns
