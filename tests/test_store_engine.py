"""Engine: URL mapping, read-only readers, migrations bookkeeping, the db command."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from app.cli import main
from app.errors import StorageError
from db.engine import normalize_url, open_engine, open_reader
from db.migrations import MIGRATIONS, applied, migrate


def test_urls_map_to_installed_drivers() -> None:
    assert normalize_url("postgresql://me@db.example/sweetspot").drivername == "postgresql+psycopg"
    assert normalize_url("sqlite:///data/x.db").database == "data/x.db"
    assert normalize_url("sqlite:////abs/x.db").database == "/abs/x.db"
    for bad in ("mysql://x/y", "not a url", "sqlite://"):
        with pytest.raises(StorageError) as info:
            normalize_url(bad)
        assert info.value.one_line().endswith("check db_url / --db / SWEETSPOT_DB_URL")


def test_sqlite_writer_creates_folder_and_uses_wal(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path}/deep/er/x.db")
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
    assert (tmp_path / "deep/er/x.db").exists()


def test_reader_is_read_only(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    with pytest.raises(StorageError, match="no database"):
        open_reader(url)
    open_engine(url)
    with open_reader(url).connect() as conn, pytest.raises(OperationalError):
        conn.execute(text("DELETE FROM targets"))


def test_migrations_apply_once_with_bookkeeping(db_url: str) -> None:
    engine = open_engine(db_url)
    with engine.connect() as conn:
        assert applied(conn) == {name for name, _ in MIGRATIONS}
    assert migrate(engine) == []


def test_db_command_prints_what_it_did(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    assert main(["db", "migrate", "--db", url]) == 0
    assert "0001_initial_schema" in capsys.readouterr().out
    assert main(["db", "migrate", "--db", url]) == 0
    assert "up to date" in capsys.readouterr().out
    for action, expected in (("rollup", "rollups written"), ("prune", "deleted"), ("info", "samples")):
        assert main(["db", action, "--db", url]) == 0
        assert expected in capsys.readouterr().out
