"""What a database error means, said once for every module that touches the database: the driver's
message translated, naming what we were doing, and the next step (migrate, restore, check the URL)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import URL, make_url

from core.errors import StorageError
from core.redact import masked

HINT = "check db_url / --db / SWEETSPOT_DB_URL"

# SQLite's and PostgreSQL's words for a table that is not there: a database never migrated.
_NO_TABLE = ("no such table", "does not exist")
# SQLite's words for a file whose pages are damaged, or that is no database at all.
_DAMAGED = ("database disk image is malformed", "file is not a database")
DAMAGED_HINT = ("Nothing was written to it. Restore it from a backup, or move it aside (a new one is made); "
                "`sqlite3 FILE .recover` salvages what rows it can")
MIGRATE_HINT = "Create the tables with `python -m app db migrate` (with the same --db or db_url); `run` and `collect` do it too"


def storage_error(action: str, exc: Exception, url: URL | str | None = None) -> StorageError:
    """Translate a driver error once, naming what we were doing; a missing table says how to migrate.

    ``url`` (the engine's): a zero-byte SQLite file is named as such, the usual way to get one.
    """
    detail = masked(str(getattr(exc, "orig", None) or exc).splitlines()[0])  # a driver may quote its DSN
    if any(words in detail for words in _NO_TABLE):
        what = what_database(url)
        return StorageError(f"database error while {action}: {detail}: {what} has no Sweetspot tables", MIGRATE_HINT)
    if any(words in detail for words in _DAMAGED):
        return StorageError(f"{what_database(url)} is damaged ({detail}; met while {action})", DAMAGED_HINT)
    return StorageError(f"database error while {action}: {detail}", HINT)


def what_database(url: URL | str | None) -> str:
    parsed = make_url(url) if isinstance(url, str) else url
    if parsed is None:
        return "the database"
    if parsed.get_backend_name() == "sqlite" and parsed.database:
        # readers open file:PATH?mode=ro URIs (open_reader)
        path = Path(parsed.database.removeprefix("file:").split("?")[0])
        if path.exists() and path.stat().st_size == 0:
            return f"{path} is an empty file (0 bytes, not yet a Sweetspot database): it"
        return f"the SQLite file {path}"
    return f"the database {parsed.render_as_string(hide_password=True)}"
