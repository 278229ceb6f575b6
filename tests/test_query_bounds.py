"""A query's result is capped in total, in rows and in bytes: one `?sql=` link returning 300 MB took
the dashboard to 3.4 GB. The caps hold at their bound exactly, whatever the shape of the rows, and the
CLI says where it cut ("truncated at N rows / M MB")."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from db.engine import open_engine
from db.query_runner import MAX_RESULT_BYTES, Limits, row_size, run_query
from tests.test_cli import ROOT


@pytest.fixture(scope="module")
def db_url(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('q')}/q.db"
    open_engine(url).dispose()
    return url


def rows_of(n: int, width: int) -> str:
    return (f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n}) "
            f"SELECT i, printf('%.*c', {width}, 'x') AS t FROM n")  # fmt: skip


def test_300_mb_of_rows_stop_at_the_byte_cap(db_url):
    result = run_query(db_url, rows_of(3000, 100_000), Limits(timeout_s=20, max_timeout_s=30))
    assert result.truncated and result.by_bytes
    assert result.size <= MAX_RESULT_BYTES < result.size + row_size((1, "x" * 100_000))
    assert len(result.rows) == MAX_RESULT_BYTES // row_size((1, "x" * 100_000))


@given(n=st.integers(1, 60), width=st.integers(1, 3000), slack=st.integers(-1, 1))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_byte_cap_holds_at_its_bound_exactly(db_url, n, width, slack):
    one = row_size((1, "x" * width))
    limit = n * one + slack  # all n rows fit exactly (slack 0), with a byte to spare (1), or one byte short (-1)
    result = run_query(db_url, rows_of(n, width), Limits(row_limit=10_000, byte_limit=limit))
    if slack >= 0:
        assert not result.truncated and len(result.rows) == n and result.size == n * one
    else:
        assert result.truncated and result.by_bytes and len(result.rows) == n - 1


@pytest.mark.parametrize("n, limit, truncated", [(100, 100, False), (101, 100, True), (99, 100, False)])
def test_the_row_cap_holds_at_its_bound(db_url, n, limit, truncated):
    result = run_query(db_url, rows_of(n, 1), Limits(row_limit=limit))
    assert result.truncated is truncated and not result.by_bytes and len(result.rows) == min(n, limit)


def test_the_cli_says_where_it_cut(db_url):
    done = subprocess.run([sys.executable, "-m", "app", "query", "--db", db_url, "--timeout", "20",
                           rows_of(3000, 100_000)], capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    kept = MAX_RESULT_BYTES // row_size((1, "x" * 100_000))
    size = kept * row_size((1, "x" * 100_000)) / 2**20
    assert f"truncated at {kept:,} rows / {size:.1f} MiB" in last and "the 16 MiB a result may hold" in last, last
    assert len(done.stdout) < 2 * MAX_RESULT_BYTES


def test_the_row_notice_names_its_limit(db_url):
    done = subprocess.run([sys.executable, "-m", "app", "query", "--db", db_url, "--limit", "5", rows_of(10, 1)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)  # fmt: skip
    assert "truncated at 5 rows: more rows exist than the limit of 5" in done.stdout
