"""Running a user's ad-hoc SQL safely: the one place it reaches a database (docs/query.md).

Three layers, each enough on its own to keep the database unchanged:

1. :func:`db.query_guard.check`: one statement, a SELECT, no refused word or function;
2. the connection: SQLite opened ``mode=ro`` with ``query_only``, an authorizer that allows only
   reading tables and calling functions outside a deny list (so no write, ATTACH, PRAGMA, VACUUM
   INTO, load_extension) and a 10 MB cap on any value; PostgreSQL in a ``READ ONLY`` transaction
   that is always rolled back, read through a cursor (one SELECT or VALUES only), with
   ``statement_timeout`` and a search path of the ``sweetspot_query`` schema (the views) alone,
   as a role that can read the views and nothing else (:data:`ROLE_CHECK`, ``query.db_url``);
3. limits: the time limit really interrupts (SQLite: a progress handler; PostgreSQL: the server
   cancels), and at most ``row_limit`` rows are fetched (``fetchmany(limit + 1)`` → ``truncated``).

A refusal or failure is a :class:`core.errors.QueryError` whose message names the rule.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import pickle
import re
import select
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.bounded import Budget, value_size
from core.errors import QueryError
from core.redact import masked
from db import query_functions, query_guard

_ROOT = Path(__file__).resolve().parents[1]  # the child process imports this module from here

MAX_VALUE_BYTES = 10_000_000  # a text or blob bigger than this is an error, not gigabytes of memory
# All the rows of one result together (texts by characters, blobs by bytes, 8 a number): one ?sql= link
# returning 300 MB took the dashboard to 3.4 GB and past Streamlit's message size. docs/security.md.
MAX_RESULT_BYTES = 16 * 1024 * 1024
FETCH_BATCH = 500
# What a query's process may map beyond what it had when the query began: the result it may send
# (16 MiB) many times over, SQLite's page cache, libpq's buffers; a 1 GB PostgreSQL value is refused.
MAX_QUERY_MEMORY_BYTES = 1024 * 1024 * 1024
_MEMORY_LIMITED = False
PROGRESS_EVERY = 1000  # SQLite virtual-machine steps between two looks at the clock
KILL_GRACE_S = 0.5  # after the time limit, a query still inside one long function call is killed
STARTUP_S = 30.0  # the most a spawned query process may take to start (imports, on a loaded machine)
# Each SQLite query runs in a process of its own. A process running one thread (the CLI) forks itself:
# a few milliseconds. A threaded one (the dashboard's server) never forks (another thread may hold a
# lock, SQLite's or the allocator's, that the child would wait on forever) and does not use
# multiprocessing's spawn either (it re-runs the parent's __main__, which Streamlit sets to the page
# script): it asks a warm worker, ``python -m db.query_runner`` started ahead (about 0.3 s to start)
# and reused for query after query; one that outlives the limit is killed and replaced (_Pool).
_READY = b"R"
_HELLO = b"H"  # a worker's first byte: started
_SIZE = 8  # bytes of a frame's length
POOL_SIZE = 2  # idle workers kept warm: a query and the next one's replacement


@dataclass(frozen=True)
class Limits:
    """``timeout_s`` per query (never above ``max_timeout_s``) and the row cap."""

    timeout_s: float = 2.0
    row_limit: int = 10_000
    max_timeout_s: float = 30.0
    byte_limit: int = MAX_RESULT_BYTES

    def checked(self) -> Limits:
        if not 0 < self.timeout_s <= self.max_timeout_s:
            raise QueryError(
                f"refused by rule time-limit: a timeout of {self.timeout_s:g} s is outside (0, {self.max_timeout_s:g}] s",
                "Lower --timeout, or raise query.max_timeout_s in the settings",
                "time-limit",
            )
        if self.row_limit < 1:
            raise QueryError("refused by rule row-limit: the row limit must be at least 1", "Use --limit 1 or more", "row-limit")
        return self


@dataclass(frozen=True)
class Result:
    """Rows of one query; ``truncated`` when more rows existed than ``row_limit``, or when their size
    passed ``byte_limit`` (``by_bytes``: the rows kept are those that fit)."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    truncated: bool
    elapsed_s: float
    row_limit: int
    by_bytes: bool = False
    size: int = 0  # of the rows kept, counted as for byte_limit
    byte_limit: int = MAX_RESULT_BYTES


def row_size(row: tuple[Any, ...]) -> int:
    """A row's size as the byte limit counts it: characters of texts, bytes of blobs, 8 a number or NULL."""
    return sum(value_size(v) for v in row) + 8


def fetch_bounded(cursor: Any, limits: Limits) -> tuple[list[tuple[Any, ...]], bool]:
    """Up to ``row_limit + 1`` rows (the one more says that more exist), stopped before their size
    passes ``byte_limit`` (:class:`core.bounded.Budget`): (rows, stopped by size).

    Bytes are counted as the rows stream, not after a batch: a batch holds as many rows as the
    bytes left allow at the size of the largest row seen so far (the first batch one row), so 500
    rows of 10 MB are never asked for at once. What one row may hold is bounded by the value cap
    (SQLite) and by the query process's memory limit (:func:`limit_memory`)."""
    rows: list[tuple[Any, ...]] = []
    budget, largest = Budget(limits.byte_limit), 0
    while len(rows) <= limits.row_limit:
        wanted = 1 if not largest else max(1, (limits.byte_limit - budget.size) // largest)
        batch = cursor.fetchmany(min(FETCH_BATCH, wanted, limits.row_limit + 1 - len(rows)))
        if not batch:
            break
        for row in batch:
            largest = max(largest, row_size(row))
            if not budget.take(row):
                return rows, True
            rows.append(row)
    return rows, False


def limit_memory(extra_bytes: int = MAX_QUERY_MEMORY_BYTES) -> None:
    """Cap this process's address space at what it uses now plus ``extra_bytes``: a query's process
    (never the dashboard's or the CLI's own) that a hostile result would grow gets MemoryError (or
    the allocator's failure, translated to "out of memory?") instead of taking the machine. Once per
    process; where the platform has no such limit, nothing is done."""
    global _MEMORY_LIMITED
    if _MEMORY_LIMITED:
        return
    _MEMORY_LIMITED = True
    try:
        import resource

        with open("/proc/self/statm", "rb") as statm:  # noqa: PTH123 - a proc file, its first field the pages mapped
            mapped = int(statm.read(64).split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (mapped + extra_bytes, resource.RLIM_INFINITY))
    except (ImportError, OSError, ValueError):
        pass


def run_query(db_url: str, sql: str, limits: Limits, params: Mapping[str, Any] | None = None, *,
              any_role: bool = False) -> Result:
    """Run one read-only query. ``params`` bind ``:name`` placeholders (canned queries).

    On PostgreSQL the role of ``db_url`` must read the query views and nothing else (no superuser, no
    table outside the views' schema, no ``pg_authid``, no ``pg_stat_reset()``), else the query is
    refused by rule ``query-role`` (:data:`ROLE_CHECK`); ``any_role`` lifts that for tests that
    run as the test server's superuser on purpose."""
    from db.engine import normalize_url  # here: the query's child process (below) need not import SQLAlchemy

    limits = limits.checked()
    url = normalize_url(db_url)
    dialect = url.get_backend_name()
    statement = query_guard.check(sql, dialect)
    started = time.monotonic()
    if dialect == "sqlite":
        path = Path(str(url.database))
        if not path.exists():
            raise QueryError(f"no database at {path}", "Check db_url / --db / SWEETSPOT_DB_URL", "database")
        source: Source = path
    else:
        source = (url.set(drivername="postgresql").render_as_string(hide_password=False), any_role)
    columns, rows, by_bytes = _in_child(source, statement, limits, dict(params or {}))
    truncated = len(rows) > limits.row_limit or by_bytes
    rows = rows[: limits.row_limit]
    return Result(tuple(columns), rows, truncated, time.monotonic() - started, limits.row_limit, by_bytes,
                  sum(row_size(r) for r in rows), limits.byte_limit)  # fmt: skip


# --- SQLite --------------------------------------------------------------------------------------
_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
_ACTION_NAMES = {
    getattr(sqlite3, n): n.removeprefix("SQLITE_")
    for n in ("SQLITE_INSERT", "SQLITE_UPDATE", "SQLITE_DELETE", "SQLITE_ATTACH", "SQLITE_DETACH", "SQLITE_PRAGMA",
              "SQLITE_TRANSACTION", "SQLITE_CREATE_TEMP_TABLE", "SQLITE_CREATE_TEMP_VIEW", "SQLITE_ANALYZE",
              "SQLITE_SAVEPOINT", "SQLITE_ALTER_TABLE", "SQLITE_REINDEX", "SQLITE_CREATE_VTABLE")
}  # fmt: skip


def _authorizer(denied: list[str]) -> Any:
    def authorize(action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
        if action in _ALLOWED and not (action == sqlite3.SQLITE_FUNCTION and query_guard.is_denied_function(arg2 or "")):
            return sqlite3.SQLITE_OK
        what = " ".join(x for x in (_ACTION_NAMES.get(action, f"action {action}"), arg1 or "", arg2 or "") if x)
        denied.append(what)
        return sqlite3.SQLITE_DENY

    return authorize


Fetched = tuple[list[str], list[tuple[Any, ...]], bool]  # columns, rows, stopped by the byte limit
Source = Path | tuple[str, bool]  # a SQLite file, or a PostgreSQL conninfo and whether any role may run it


def _in_child(source: Source, sql: str, limits: Limits, params: dict[str, Any]) -> Fetched:
    """The query in a process of its own, under a memory limit (:func:`limit_memory`) and killed
    ``KILL_GRACE_S`` after the time limit: the progress handler stops a query between virtual-machine
    steps, but one function call can do all its work in a single step (``printf('%.*c', 2147483647,
    'x')`` took 31 s, ``instr`` and ``replace`` of two long texts grow with the square of their
    lengths) and only the process's end stops that; a PostgreSQL value has no size cap of its own
    (one ``repeat('x', 10^9)`` took the dashboard to 3.6 GB) and only the child's memory limit stops it."""
    run = _forked if threading.active_count() == 1 else _spawned
    answer: Fetched | QueryError = run(source, sql, limits, params)
    if isinstance(answer, QueryError):
        raise answer
    return answer


def _ended() -> QueryError:  # the process died without answering: out of memory, killed from outside
    return QueryError("the query's process ended without an answer (out of memory?)",
                      "Narrow the query: fewer rows, smaller values", "sql-error")  # fmt: skip


def _forked(source: Source, sql: str, limits: Limits, params: dict[str, Any]) -> Any:
    processes = multiprocessing.get_context("fork")
    receive, send = processes.Pipe(duplex=False)
    child = processes.Process(target=_sqlite_child, args=(send, source, sql, limits, params), daemon=True)
    child.start()
    send.close()
    try:
        if not receive.poll(limits.timeout_s + KILL_GRACE_S):
            raise _timeout(limits)
        return receive.recv()
    except EOFError:
        raise _ended() from None
    finally:
        receive.close()
        if child.is_alive():
            child.kill()
        child.join()


class _Worker:
    """A warm query process (``python -m db.query_runner``): it answers one query after another on
    its stdin/stdout, each on a connection of its own, until its stdin closes. Killed, not reused,
    when a query outlives its limit."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(_ROOT), os.environ.get("PYTHONPATH"))))}
        self.process = subprocess.Popen([sys.executable, "-m", __spec__.name if __spec__ else "db.query_runner"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)  # fmt: skip
        self._buffer = b""
        self._started = False  # its hello read: it has imported what it needs and waits for queries

    def warm(self) -> bool:
        """Whether the worker has started (without waiting for it)."""
        if not self._started and self.process.stdout is not None and select.select([self.process.stdout], [], [], 0)[0]:
            self._started = os.read(self.process.stdout.fileno(), 1) == _HELLO
        return self._started

    def ask(self, request: tuple[Source, str, Limits, dict[str, Any]], limit_s: float) -> Any:
        """The answer to one query. Raises the time-limit error when the worker has not answered
        ``limit_s`` after it began the query (``STARTUP_S`` for it to start and begin), or _ended()."""
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(_framed(pickle.dumps(request)))
            self.process.stdin.flush()
        except OSError:
            raise _ended() from None
        fd = self.process.stdout.fileno()
        if not self._started and self._read(fd, 1, time.monotonic() + STARTUP_S) != _HELLO:
            raise _ended()
        self._started = True
        if self._read(fd, 1, time.monotonic() + STARTUP_S) != _READY:  # the worker began the query
            raise _ended()
        deadline = time.monotonic() + limit_s
        size = int.from_bytes(self._read(fd, _SIZE, deadline), "big")
        return pickle.loads(self._read(fd, size, deadline))  # noqa: S301 - our own worker's answer

    def _read(self, fd: int, n: int, deadline: float) -> bytes:
        while len(self._buffer) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise _Late
            chunk = os.read(fd, max(n - len(self._buffer), 1 << 16))
            if not chunk:
                raise _ended()
            self._buffer += chunk
        data, self._buffer = self._buffer[:n], self._buffer[n:]
        return data

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self._close_pipes()
        self.process.wait()

    def close(self) -> None:
        """End an idle worker: its stdin closed, it exits (killed if it does not within a second)."""
        self._close_pipes()
        try:
            self.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            self.kill()

    def _close_pipes(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass


class _Late(Exception):
    """A worker did not answer in time."""


class _Pool:
    """Warm workers for a threaded process: ``POOL_SIZE`` idle at most, one taken per query (a new
    one started when none is idle), given back after an answer, killed after a time-out and
    replaced at once, so the next query finds a warm process and the limit still ends any query."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        atexit.register(self.close)

    def run(self, request: tuple[Source, str, Limits, dict[str, Any]], limit_s: float) -> Any:
        worker = self._take()
        answered = False
        try:
            answer = worker.ask(request, limit_s)
            answered = True
            return answer
        finally:
            if answered:
                self._give(worker)
            else:
                worker.kill()
            self.fill()

    def fill(self) -> None:
        """Start workers until ``POOL_SIZE`` are idle (they start in the background: ~0.3 s)."""
        with self._lock:
            while len(self._idle) < POOL_SIZE:
                self._idle.append(_Worker())

    def _take(self) -> _Worker:
        """An idle worker, a started one first (a replacement may still be starting), else a new one."""
        with self._lock:
            for worker in [w for w in self._idle if w.process.poll() is not None]:
                self._idle.remove(worker)  # ended while idle (killed from outside): not to be asked
                worker.kill()
            if self._idle:
                worker = next((w for w in reversed(self._idle) if w.warm()), self._idle[0])
                self._idle.remove(worker)
                return worker
        return _Worker()

    def _give(self, worker: _Worker) -> None:
        with self._lock:
            if len(self._idle) < POOL_SIZE:
                self._idle.append(worker)
                return
        worker.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.close()


_POOL = _Pool()


def warm(db_url: str) -> None:
    """Start the query workers now, for a SQLite ``db_url`` in a threaded process (the Query page
    calls it as it draws), so its first query finds one warm."""
    from db.engine import normalize_url

    if normalize_url(db_url).get_backend_name() == "sqlite" and threading.active_count() > 1:
        _POOL.fill()


def _spawned(source: Source, sql: str, limits: Limits, params: dict[str, Any]) -> Any:
    try:
        return _POOL.run((source, sql, limits, params), limits.timeout_s + KILL_GRACE_S)
    except _Late:
        raise _timeout(limits) from None


def _framed(data: bytes) -> bytes:
    return len(data).to_bytes(_SIZE, "big") + data


def _serve() -> None:
    """``python -m db.query_runner``: a hello byte on stdout once started, then queries read from
    stdin, each answered on stdout (a ready byte as it begins, then the answer), until stdin closes."""
    read, out = sys.stdin.buffer.read, sys.stdout.buffer
    out.write(_HELLO)
    out.flush()
    while len(head := read(_SIZE)) == _SIZE:
        source, sql, limits, params = pickle.loads(read(int.from_bytes(head, "big")))  # noqa: S301 - from the parent process
        out.write(_READY)
        out.flush()
        answer = _answer(source, sql, limits, params)
        out.write(_framed(pickle.dumps(answer)))
        out.flush()


def _sqlite_child(send: Any, source: Source, sql: str, limits: Limits, params: dict[str, Any]) -> None:
    send.send(_answer(source, sql, limits, params))
    send.close()


def _answer(source: Source, sql: str, limits: Limits, params: dict[str, Any]) -> Fetched | QueryError:
    """The answer a query's process sends back: the rows, or the one-line error (never a traceback)."""
    limit_memory()
    try:
        if isinstance(source, Path):
            return _sqlite_in_process(source, sql, limits, params)
        return _postgres(source[0], sql, limits, params, source[1])
    except QueryError as exc:
        return exc
    except MemoryError:
        return QueryError(f"the query needed more than the {MAX_QUERY_MEMORY_BYTES // 2**20} MiB of memory a query may use",
                          "Narrow the query: fewer rows, smaller values (a value of hundreds of MB cannot be shown)",
                          "memory-limit")  # fmt: skip


def _sqlite_in_process(path: Path, sql: str, limits: Limits, params: dict[str, Any]) -> Fetched:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None, timeout=5.0)
    denied: list[str] = []
    deadline = time.monotonic() + limits.timeout_s
    try:
        conn.execute("PRAGMA query_only=1")
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        query_functions.register(conn)
        conn.set_authorizer(_authorizer(denied))
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), PROGRESS_EVERY)
        cursor = conn.execute(sql, params)
        rows, by_bytes = fetch_bounded(cursor, limits)
        return [d[0] for d in cursor.description or ()], rows, by_bytes
    except sqlite3.Error as exc:
        raise _sqlite_error(exc, denied, limits) from None
    finally:
        conn.close()


# What SQLite's authorizer refused, said in the user's terms: the guard lets no write through, so a
# write to sqlite_master comes from SQLite itself declaring a virtual table for a table-valued function.
_DENIED_TEXT = {
    "UPDATE sqlite_master": "table-valued functions that declare a virtual table (json_each, json_tree, pragma_*) "
    "are not allowed on the read-only query connection",
    "INSERT": "the query would write rows ({0}), and queries only read",
    "UPDATE": "the query would change rows ({0}), and queries only read",
    "DELETE": "the query would delete rows ({0}), and queries only read",
    "ATTACH": "attaching another database file is not allowed",
    "PRAGMA": "PRAGMA {0} is not allowed (PRAGMAs read and change the database's own settings)",
}


def _denied_text(what: str) -> str:
    action, _, rest = what.partition(" ")
    for key in (f"{action} {rest.split(' ')[0]}", action):
        if key in _DENIED_TEXT:
            return _DENIED_TEXT[key].format(rest or "?")
    return f"{what} is not allowed (queries may only read tables and call functions)"


def _sqlite_error(exc: sqlite3.Error, denied: list[str], limits: Limits) -> QueryError:
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if denied:
        return QueryError(f"refused by rule read-only-authorizer: {_denied_text(denied[0])}", query_guard.HINT,
                          "read-only-authorizer")  # fmt: skip
    if detail == "interrupted":
        return _timeout(limits)
    return QueryError(f"the query failed: {detail}", "Check the SQL against docs/query.md's views", "sql-error")


def _timeout(limits: Limits) -> QueryError:
    return QueryError(
        f"refused by rule time-limit: stopped after {limits.timeout_s:g} s",
        f"Narrow the query (a shorter time range, fewer rows), or allow more time with --timeout (at most {limits.max_timeout_s:g} s)",
        "time-limit",
    )


# --- PostgreSQL ----------------------------------------------------------------------------------
_PARAM = re.compile(r"(?<!:):([A-Za-z_][A-Za-z0-9_]*)")


# What the role a query runs as may do beyond reading the views: each true value is a refusal.
ROLE_CHECK = f"""
SELECT r.rolname, r.rolsuper OR r.rolbypassrls AS superuser,
       pg_catalog.has_table_privilege('pg_catalog.pg_authid', 'SELECT') AS password_verifiers,
       pg_catalog.has_function_privilege('pg_catalog.pg_stat_reset()', 'EXECUTE') AS statistics_reset,
       EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
               WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
                 AND n.nspname NOT IN ('pg_catalog', 'information_schema', '{query_functions.SCHEMA}')
                 AND n.nspname NOT LIKE 'pg\\_toast%'
                 AND pg_catalog.has_table_privilege(c.oid, 'SELECT')) AS other_tables
FROM pg_catalog.pg_roles r WHERE r.rolname = current_user
"""


def _check_role(conn: Any) -> None:
    row = conn.execute(ROLE_CHECK).fetchone()
    if row is None:
        return
    name, *flags = row
    can = [what for what, flag in zip(("is a superuser", "reads pg_authid", "runs pg_stat_reset()",
                                       "reads tables beyond the query views"), flags, strict=True) if flag]
    if can:
        raise QueryError(f"refused by rule query-role: the role {name} {', '.join(can)}; ad-hoc queries run as a role "
                         "that reads the query views only",
                         "Set query.db_url (or SWEETSPOT_QUERY_DB_URL) to such a role: deploy/query-role.sql makes one "
                         "(docs/deploy.md)", "query-role")


def _postgres(conninfo: str, sql: str, limits: Limits, params: Mapping[str, Any] | None,
              any_role: bool = False) -> Fetched:
    import psycopg

    if params:  # our canned queries' :name → psycopg's %(name)s (they hold no other %)
        sql = _PARAM.sub(r"%(\1)s", sql)
    try:
        conn = psycopg.connect(conninfo, connect_timeout=10, options="-c default_transaction_read_only=on")
    except psycopg.Error as exc:
        raise QueryError(f"cannot reach the database: {masked(_first_line(exc))}", "Check db_url / --db", "database") from None
    try:
        with conn.transaction(force_rollback=True):
            conn.execute("SET TRANSACTION READ ONLY")
            settings = {
                "statement_timeout": f"{int(limits.timeout_s * 1000)}ms",
                "search_path": f"{query_functions.SCHEMA}, pg_catalog",
                "standard_conforming_strings": "on",
                "TimeZone": "UTC",
            }
            for name, value in settings.items():
                conn.execute("SELECT pg_catalog.set_config(%s, %s, true)", (name, value))
            if not any_role:
                _check_role(conn)
            # a server-side cursor: DECLARE takes one SELECT or VALUES, and only the rows fetched travel
            with conn.cursor(name="sweetspot_query") as cursor:
                cursor.execute(sql, params or None)
                rows, by_bytes = fetch_bounded(cursor, limits)
                return [d.name for d in cursor.description or ()], rows, by_bytes
    except psycopg.errors.QueryCanceled:
        raise _timeout(limits) from None
    except psycopg.errors.ReadOnlySqlTransaction as exc:
        raise QueryError(f"refused by rule read-only-transaction: {_first_line(exc)}", query_guard.HINT, "read-only-transaction") from None
    except psycopg.Error as exc:
        raise QueryError(f"the query failed: {_first_line(exc)}", "Check the SQL against docs/query.md's views", "sql-error") from None
    finally:
        conn.close()


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


if __name__ == "__main__":
    _serve()
