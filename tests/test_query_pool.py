"""The Query page's warm query workers (db/query_runner.py ``_Pool``): in a threaded process (the
dashboard's server) each SQLite query runs in a worker process kept warm between queries; the time
limit still ends any query, one inside a single SQLite call included, by killing its worker, which
is replaced so the next query finds a started one."""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

import pytest

from core.errors import QueryError
from db import query_runner
from db.query_runner import Limits, run_query
from tests import query_db
from tests.test_query_safety import DIALECT_ONLY, HOSTILE, TEXT_9M, fingerprint

NOW = 1_790_000_000.0
SIMPLE = "SELECT time, target, tokens_per_s FROM minutes ORDER BY ts DESC, target LIMIT 20"
# quadratic work inside one function call: only the worker's end stops it (no progress handler call)
ONE_CALL = f"SELECT instr({TEXT_9M}, substr({TEXT_9M}, 1, 4500000) || 'y')"


@pytest.fixture(scope="module")
def url():
    return query_db.fill(f"sqlite:///{tempfile.mkdtemp(prefix='sweetspot-pool-')}/p.db", NOW, hours=1.0)


@pytest.fixture
def threaded():
    """A second thread while the test runs, as Streamlit's server has: queries go to the pool."""
    done = threading.Event()
    thread = threading.Thread(target=done.wait, daemon=True)
    thread.start()
    yield
    done.set()
    thread.join()


def _pool_workers() -> list[query_runner._Worker]:
    return list(query_runner._POOL._idle)


def _started(worker: query_runner._Worker) -> bool:
    deadline = time.monotonic() + 30
    while not worker.warm():
        assert time.monotonic() < deadline, "a query worker did not start in 30 s"
        time.sleep(0.01)
    return True


def test_pooled_answers_equal_the_in_process_runner_and_reuse_one_process(url, threaded):
    limits = Limits(timeout_s=10)
    path = Path(url.removeprefix("sqlite:///"))
    columns, rows, by_bytes = query_runner._sqlite_in_process(path, SIMPLE, limits, {})
    assert not by_bytes and len(rows) <= limits.row_limit  # the whole answer, as run_query returns it
    expected = (columns, rows, by_bytes)
    first = run_query(url, SIMPLE, limits)
    workers = _pool_workers()
    assert len(workers) == query_runner.POOL_SIZE
    pids = {w.process.pid for w in workers}
    for _ in range(5):
        result = run_query(url, SIMPLE, limits)
        assert (list(result.columns), result.rows, result.by_bytes) == expected
    assert (list(first.columns), first.rows, first.by_bytes) == expected
    # no process per query: the same workers answered, all still alive
    assert {w.process.pid for w in _pool_workers()} == pids
    assert all(w.process.poll() is None for w in _pool_workers())


def test_a_runaway_inside_one_call_is_killed_at_its_limit_and_its_worker_replaced(url, threaded):
    query_runner._POOL.fill()
    before = _pool_workers()
    assert all(_started(w) for w in before)
    started = time.monotonic()
    with pytest.raises(QueryError) as caught:
        run_query(url, ONE_CALL, Limits(timeout_s=0.5))
    elapsed = time.monotonic() - started
    assert caught.value.rule == "time-limit", caught.value.one_line()
    assert elapsed < 0.5 + query_runner.KILL_GRACE_S + 1.0, elapsed
    # the worker that ran it is dead; the pool holds POOL_SIZE live workers again
    dead = [w for w in before if w.process.poll() is not None]
    assert len(dead) == 1
    assert len(_pool_workers()) == query_runner.POOL_SIZE
    assert dead[0] not in _pool_workers() and all(w.process.poll() is None for w in _pool_workers())
    assert run_query(url, SIMPLE, Limits(timeout_s=10)).rows


def test_a_worker_killed_from_outside_costs_one_query_not_the_pool(url, threaded):
    query_runner._POOL.fill()
    for worker in _pool_workers():
        worker.process.kill()
        worker.process.wait()
    result = run_query(url, SIMPLE, Limits(timeout_s=10))  # dead idle workers are skipped, not asked
    assert result.rows


@pytest.mark.parametrize("name,sql,rule", [h for h in HOSTILE if DIALECT_ONLY.get(h[0], "sqlite") == "sqlite"],
                         ids=[h[0] for h in HOSTILE if DIALECT_ONLY.get(h[0], "sqlite") == "sqlite"])
def test_hostile_sql_through_the_pool_is_refused_or_stopped_and_nothing_changes(url, threaded, name, sql, rule):
    before = fingerprint(url)
    started = time.monotonic()
    with pytest.raises(QueryError) as caught:
        run_query(url, sql, Limits(timeout_s=0.5))
    assert time.monotonic() - started < 5
    assert caught.value.rule in rule.split("|"), caught.value.one_line()
    assert fingerprint(url) == before
    assert run_query(url, SIMPLE, Limits(timeout_s=10)).rows  # the next query is answered
