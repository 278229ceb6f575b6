"""Hostile SQL is refused or stopped, with the rule named, and the database is unchanged afterwards:
the SQLite file byte for byte, the PostgreSQL database by its tables' contents, schema, functions
and the settings of a fresh session; no file appears on the server."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from core.errors import QueryError
from db import query_guard
from db.query_runner import Limits, run_query
from tests import query_db
from tests.conftest import _new_postgres_db

NOW = float(int(time.time()))
ROOT = Path(__file__).resolve().parents[1]
SPY = Path(tempfile.gettempdir()) / f"sweetspot-hostile-{os.getpid()}"

TEXT_9M = "printf('%.*c', 9000000, 'x')"  # a 9 MB text, under the 10 MB value cap
# (name, SQL, the rule expected to refuse it: "guard:<rule>", or a rule name any layer may report)
HOSTILE = [
    ("insert", "INSERT INTO targets (name) VALUES ('x')", "select-only"),
    ("delete-in-cte", "WITH gone AS (DELETE FROM samples RETURNING *) SELECT count(*) FROM gone", "no-writes"),
    ("update-in-cte-odd-case", "wItH x AS (uPdAtE targets SET name = 'x' RETURNING 1) SELECT * FROM x", "no-writes"),
    ("two-statements", "SELECT 1; DROP TABLE samples", "one-statement"),
    ("two-statements-comment", "SELECT 1 /* ; */ ; DELETE FROM samples --", "one-statement"),
    ("hidden-by-line-comment", "SELECT 1 --\n; DELETE FROM samples", "one-statement"),
    ("keyword-after-comment", "SELECT * FROM minutes/**/WHERE 1=1; PRAGMA writable_schema=1", "one-statement"),
    ("attach", f"ATTACH DATABASE '{SPY}.db' AS spy", "select-only"),
    ("attach-in-select", f"SELECT 1 FROM (SELECT 1) WHERE 0 AND (ATTACH '{SPY}')", "no-files"),
    ("pragma", "PRAGMA journal_mode=DELETE", "select-only"),
    ("pragma-function", "SELECT * FROM pragma_table_info('samples')", "no-settings"),
    ("pragma-function-quoted", 'SELECT * FROM "PRAGMA_DATABASE_LIST"', "no-settings"),
    ("vacuum-into", f"VACUUM INTO '{SPY}.db'", "select-only"),
    ("load-extension", "SELECT load_extension('/tmp/evil.so')", "no-file-or-setting-functions"),
    ("load-extension-quoted", "SELECT \"LOAD_EXTENSION\"('/tmp/evil.so')", "no-file-or-setting-functions"),
    ("readfile", "SELECT readfile('/etc/passwd')", "no-file-or-setting-functions"),
    ("writefile", f"SELECT writefile('{SPY}', 'x')", "no-file-or-setting-functions"),
    ("fts3-tokenizer", "SELECT fts3_tokenizer('simple')", "no-file-or-setting-functions"),
    ("copy-to-file", f"COPY targets TO '{SPY}'", "select-only"),
    ("copy-from-program", "COPY targets FROM PROGRAM 'touch /tmp/x'", "select-only"),
    ("pg-read-file", "SELECT pg_read_file('/etc/passwd')", "no-file-or-setting-functions"),
    ("pg-read-binary-file", "SELECT pg_catalog.pg_read_binary_file('/etc/passwd')", "no-file-or-setting-functions"),
    ("pg-ls-dir", "SELECT * FROM pg_ls_dir('.')", "no-file-or-setting-functions"),
    ("lo-export", f"SELECT lo_export(1, '{SPY}')", "no-file-or-setting-functions"),
    ("lo-import", "SELECT lo_import('/etc/passwd')", "no-file-or-setting-functions"),
    ("dblink", "SELECT * FROM dblink('dbname=postgres', 'DROP TABLE samples') AS t(x text)", "no-file-or-setting-functions"),
    ("query-to-xml", "SELECT query_to_xml('DELETE FROM samples RETURNING 1', true, true, '')", "no-file-or-setting-functions"),
    ("set-config", "SELECT set_config('statement_timeout', '0', false)", "no-file-or-setting-functions"),
    ("set", "SET statement_timeout = 0", "select-only"),
    ("set-read-write", "SET TRANSACTION READ WRITE", "select-only"),
    ("do-block", "DO $$ BEGIN DELETE FROM samples; END $$", "select-only|one-statement"),
    ("call", "CALL anything()", "select-only"),
    ("select-into", "SELECT * INTO stolen FROM targets", "no-writes"),
    ("for-update", "SELECT * FROM targets FOR UPDATE", "no-writes"),
    ("dollar-quote-hides-nothing", "SELECT $x$ text $x$ ; DELETE FROM samples", "one-statement"),
    ("e-string-escape", "SELECT E'\\'' ; DELETE FROM samples --'", "one-statement"),
    ("unicode-escape", 'SELECT U&"\\0070g_read_file"(\'/etc/passwd\')', "readable|sql-error"),
    ("unclosed-comment", "SELECT 1 /* DELETE FROM samples", "readable"),
    ("nextval", "SELECT nextval('targets_id_seq')", "no-file-or-setting-functions"),
    ("advisory-lock", "SELECT pg_advisory_lock(1)", "no-file-or-setting-functions"),
    ("empty", "  -- nothing\n ", "one-statement"),
    ("runaway-recursive-cte", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c", "time-limit"),
    ("runaway-cross-join", "SELECT count(*) FROM minutes a, minutes b, minutes c, minutes d", "time-limit"),
    ("huge-value", "SELECT length(zeroblob(2000000000))", "sql-error|time-limit"),
    # work done inside one function call, between two looks at the clock (SQLite) or inside the server
    ("printf-width", "SELECT printf('%.*c', 2147483647, 'x')", "sql-error|time-limit"),
    ("format-width", "SELECT length(format('%.*c', 2147483647, 'x'))", "sql-error|time-limit"),
    ("randomblob", "SELECT length(randomblob(2000000000))", "sql-error|time-limit"),
    ("replace-amplified", f"SELECT length(replace(replace(replace({TEXT_9M}, 'x', 'xxxx'), 'x', 'xxxx'), 'x', 'xxxx'))",
     "sql-error|time-limit"),
    ("instr-quadratic", f"SELECT instr({TEXT_9M}, substr({TEXT_9M}, 1, 4500000) || 'y')", "sql-error|time-limit"),
    ("substr-huge", f"SELECT length(substr({TEXT_9M} || {TEXT_9M}, 1, 2147483647))", "sql-error|time-limit"),
    ("pg-repeat", "SELECT length(repeat(repeat('x', 100000000), 10))", "sql-error|time-limit"),
    ("pg-lpad", "SELECT sum(length(md5(lpad('x', 10000000 + g, 'y')))) FROM generate_series(1, 10000) g", "time-limit"),
]
DIALECT_ONLY = {"pg-ls-dir": "postgresql", "huge-value": "sqlite", "printf-width": "sqlite", "pg-repeat": "postgresql",
                "pg-lpad": "postgresql", "instr-quadratic": "sqlite", "replace-amplified": "sqlite",
                "substr-huge": "sqlite", "randomblob": "sqlite"}  # fmt: skip


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request):
    if request.param == "sqlite":
        target = f"sqlite:///{tempfile.mkdtemp(prefix='sweetspot-hostile-')}/h.db"
    else:
        target = _new_postgres_db(request.getfixturevalue("postgres_server"))
    return query_db.fill(target, NOW, hours=1.0)


def fingerprint(url: str) -> str:
    """SQLite: the file's bytes (and its WAL's); PostgreSQL: every table's rows, the schema,
    functions and large objects."""
    if url.startswith("sqlite"):
        path = Path(url.removeprefix("sqlite:///"))
        parts = [p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists()]
        return hashlib.sha256(b"".join(parts)).hexdigest()
    import psycopg

    with psycopg.connect(url) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")]
        digest = [conn.execute(f'SELECT md5(coalesce(string_agg(t::text, \'|\' ORDER BY t::text), \'\')) FROM "{t}" t').fetchone()[0] for t in tables]  # noqa: E501
        schema = conn.execute("SELECT string_agg(c.relname || ':' || c.relkind::text, ',' ORDER BY c.relname) FROM pg_class c "
                              "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname IN ('public', 'sweetspot_query')").fetchone()  # fmt: skip
        procs = conn.execute("SELECT count(*) FROM pg_proc").fetchone()
        objects = conn.execute("SELECT count(*) FROM pg_largeobject_metadata").fetchone()
    return repr((tables, digest, schema, procs, objects))


@pytest.mark.parametrize("name,sql,rule", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_sql_is_refused_or_stopped_and_nothing_changes(url, name, sql, rule):
    dialect = "sqlite" if url.startswith("sqlite") else "postgresql"
    if DIALECT_ONLY.get(name, dialect) != dialect:
        pytest.skip(f"{name} is a {DIALECT_ONLY[name]} case")
    before = fingerprint(url)
    started = time.monotonic()
    with pytest.raises(QueryError) as caught:
        run_query(url, sql, Limits(timeout_s=0.5), any_role=True)
    # the limit, the kill's grace (SQLite) and the start of a process or connection on a loaded machine
    assert time.monotonic() - started < 5
    assert caught.value.rule in rule.split("|"), caught.value.one_line()
    assert "\n" not in caught.value.one_line()
    assert fingerprint(url) == before
    assert not SPY.exists() and not Path(f"{SPY}.db").exists()


def test_a_huge_result_is_cut_at_the_row_limit(url):
    before = fingerprint(url)
    result = run_query(url, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000) SELECT x FROM c", Limits(row_limit=250), any_role=True)
    assert len(result.rows) == 250 and result.truncated
    assert fingerprint(url) == before


def test_the_timeout_is_capped_by_the_server_maximum(url):
    with pytest.raises(QueryError, match="time-limit") as caught:
        run_query(url, "SELECT 1", Limits(timeout_s=60, max_timeout_s=30), any_role=True)
    assert "query.max_timeout_s" in caught.value.one_line()


@pytest.mark.postgres
def test_postgres_session_settings_are_not_changed_and_views_only_on_the_path(url):
    if url.startswith("sqlite"):
        pytest.skip("PostgreSQL only")
    with pytest.raises(QueryError, match='relation "samples" does not exist'):  # tables are off the path
        run_query(url, "SELECT * FROM samples", Limits(), any_role=True)
    assert run_query(url, "SELECT current_setting('transaction_read_only') AS ro", Limits(), any_role=True).rows == [("on",)]
    with pytest.raises(QueryError, match="time-limit"):
        run_query(url, "SELECT pg_sleep(5)", Limits(timeout_s=0.3), any_role=True)


def test_cli_refusal_is_one_line_and_exits_non_zero(url):
    before = fingerprint(url)
    for sql in ("DELETE FROM samples", "SELECT 1; SELECT 2", "SELECT * FROM no_such_view"):
        done = subprocess.run([sys.executable, "-m", "app", "query", "--db", url, sql], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode != 0
        assert done.stderr.startswith("ERROR: ") and done.stderr.count("\n") == 1, done.stderr
    assert fingerprint(url) == before


def test_the_guard_lets_ordinary_queries_through():
    for sql in ("SELECT 'it''s; DELETE' AS s", "select * from minutes -- delete\n", "VALUES (1)",
                "WITH x AS (SELECT 1 AS a) SELECT a FROM x;", 'SELECT "comment", "ends_at" FROM silence_list'):  # fmt: skip
        assert query_guard.check(sql, "sqlite")
