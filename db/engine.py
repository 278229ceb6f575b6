"""Opening the database: one writer engine (runs migrations) and read-only reader engines.

Users write URLs as ``sqlite:///rel/path``, ``sqlite:////abs/path`` or ``postgresql://user@host/db``;
:func:`normalize_url` maps PostgreSQL to the installed psycopg 3 driver. SQLite runs in WAL mode with
``synchronous=NORMAL`` (a crash loses at most the last transactions, never corrupts). Readers open
SQLite through a ``mode=ro`` URI, so a page or a CLI command can never write; on PostgreSQL readers set
``default_transaction_read_only``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from core.errors import StorageError
from core.redact import masked
from db.errors import HINT


def normalize_url(db_url: str) -> URL:
    """Parse a user's URL and pick the installed driver (psycopg 3 for PostgreSQL)."""
    try:
        url = make_url(db_url)
    except ArgumentError:
        raise StorageError(f"not a database URL: {masked(db_url)!r}", HINT) from None
    backend = url.get_backend_name()
    if backend == "postgresql":
        return url.set(drivername="postgresql+psycopg")
    if backend == "sqlite":
        if not url.database or url.database == ":memory:":
            raise StorageError(f"SQLite URL needs a file path: {masked(db_url)!r} (e.g. sqlite:///data/sweetspot.db)", HINT)
        return url.set(drivername="sqlite+pysqlite")
    raise StorageError(f"unsupported database {backend!r} in {masked(db_url)!r} (use sqlite:/// or postgresql://)", HINT)


def _sqlite_transactional(engine: Engine, pragmas: tuple[str, ...]) -> None:
    # pysqlite's own transaction handling skips BEGIN before DDL; take control so migrations and
    # rounds are really atomic (SQLAlchemy's documented recipe for pysqlite).
    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        for pragma in pragmas:
            cursor.execute(pragma)
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_IMMEDIATE) else "BEGIN")


_IMMEDIATE = "sweetspot_write_lock_first"


@contextlib.contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction that reads before it writes (``engine.begin()`` otherwise). On SQLite it takes
    the write lock at its start (``BEGIN IMMEDIATE``), waiting up to ``busy_timeout`` while another
    process writes. A deferred one that read first fails at once with "database is locked" when it
    comes to write while another process writes, or wrote since its read: SQLite cannot wait there
    (the two could deadlock), so busy_timeout never applies. A second collector starting beside a
    running one registered its targets that way, and died at start one time in ten under load."""
    with engine.connect() as conn:
        conn.execution_options(**{_IMMEDIATE: True})
        with conn.begin():
            yield conn


def _query_functions(engine: Engine) -> None:
    # the query views' functions (histogram_quantile, ...): readers can select every view column
    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        from db.query_functions import register

        register(dbapi_conn)


def _create(url: URL, **kwargs: Any) -> Engine:
    try:
        return create_engine(url, **kwargs)
    except (SQLAlchemyError, ImportError) as exc:
        raise StorageError(f"cannot open database {masked(url.render_as_string(hide_password=False))}: {masked(str(exc))}", HINT) from None


def open_engine(db_url: str, migrate: bool = True) -> Engine:
    """The writer's engine: creates the SQLite folder, sets WAL, applies pending migrations."""
    url = normalize_url(db_url)
    if url.get_backend_name() == "sqlite":
        path = Path(str(url.database))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create the database folder {path.parent}: {exc.strerror}", HINT) from None
        # a kept connection: opening one (and re-reading the schema) costs more than a round's writes
        engine = _create(url, pool_size=2, max_overflow=2)
        _sqlite_transactional(
            engine,
            # journal_size_limit: the WAL shrinks back to 4 MB after a checkpoint instead of staying
            # as large as the largest backfill batch ever written.
            (
                "PRAGMA journal_mode=WAL",
                "PRAGMA synchronous=NORMAL",
                "PRAGMA busy_timeout=5000",
                "PRAGMA journal_size_limit=4194304",
            ),
        )
    else:
        engine = _create(url, pool_pre_ping=True)
    if migrate:
        from db.migrations import migrate as run_migrations

        run_migrations(engine)
    return engine


def open_reader(db_url: str) -> Engine:
    """A read-only engine. SQLite: the file must exist (a reader never creates one)."""
    url = normalize_url(db_url)
    if url.get_backend_name() == "sqlite":
        path = Path(str(url.database)).resolve()
        if not path.exists():
            raise StorageError(f"no database at {path} (nothing collected yet?)", HINT)
        ro = URL.create("sqlite+pysqlite", database=f"file:{path}?mode=ro", query={"uri": "true"})
        # pooled: a kept connection keeps SQLite's page cache warm between queries
        engine = _create(ro, pool_size=2, max_overflow=4)
        _sqlite_transactional(engine, ("PRAGMA busy_timeout=5000", "PRAGMA query_only=1", "PRAGMA cache_size=-32000"))
        _query_functions(engine)
        return engine
    engine = _create(url, pool_pre_ping=True, connect_args={"options": "-c default_transaction_read_only=on"})
    return engine
