"""``python -m app db migrate|rollup|prune|info``: database upkeep, each printing what it did."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError

from core.redact import masked
from core.settings import Settings
from db import schema
from db.engine import normalize_url, open_engine
from db.errors import storage_error
from db.migrations import MIGRATIONS, applied, upgrade
from db.rollup import apply_retention, rollup, written_text

HELP = "database upkeep: migrate the schema, fold rollups, prune old rows, or print table sizes"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("migrate", "rollup", "prune", "info"), help="what to do")
    parser.add_argument("--db", metavar="URL", help="database URL (overrides db_url / SWEETSPOT_DB_URL)")


def execute(args: argparse.Namespace, settings: Settings) -> int:
    now = time.time()
    if args.action == "migrate":
        done = upgrade(open_engine(settings.db_url, migrate=False))
        names = done.numbered
        print(f"applied {len(names)} migration(s): {', '.join(names)}" if names else "schema up to date")
        if done.standing:  # what the code now describes and the database lacked (docs/storage.md, Migrations)
            print(f"added {len(done.standing)}: {', '.join(done.standing)}")
    elif args.action == "rollup":
        written = rollup(open_engine(settings.db_url), now)
        print(f"rollups written: {written_text(written)}")
    elif args.action == "prune":
        deleted = apply_retention(open_engine(settings.db_url), now, settings)
        for table, n in deleted.items():
            print(f"deleted {n:8d} rows from {table}")
    else:
        _info(settings)
    return 0


def _info(settings: Settings) -> None:
    engine = open_engine(settings.db_url)
    url = normalize_url(settings.db_url)
    print(f"database: {masked(url.render_as_string(hide_password=False))}")
    if url.get_backend_name() == "sqlite":
        path = Path(str(url.database))
        size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
        print(f"size on disk: {size / 1e6:.1f} MB (with WAL)")
    counts = {}
    try:  # a damaged page shows when its table is counted: one line, not the driver's traceback
        with engine.connect() as conn:
            done = applied(conn)
            for table in schema.metadata.sorted_tables:
                counts[table.name] = conn.execute(select(func.count()).select_from(table)).scalar()
    except SQLAlchemyError as exc:
        raise storage_error(f"counting the rows of {table.name}", exc, engine.url) from None
    print(f"migrations: {len(done)} of {len(MIGRATIONS)} applied")
    for name, rows in counts.items():
        print(f"  {name:22} {rows:10d} rows")
