"""The Alerts page reads and writes through the facade (issue 31): ``Reader.alert_board`` reads the
board in one connection; ``Reader.add_silence`` / ``expire_silence`` write one row on a connection of
their own and never migrate: a schema older or newer than the code is refused with the next step, and
left exactly as it was. Real database files (and PostgreSQL where the suite has one)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import delete, select

from app.alerts import store
from app.alerts.model import AlertState, Silence, Transition
from app.ui.alert_views import held_back
from core.errors import StorageError
from core.settings import MuteWindowSettings
from db import schema
from db.alerts import list_silences, write_silence
from db.engine import open_engine
from db.migrations import MIGRATIONS, applied
from db.queries import Reader

NOW = 1_800_000_000


def migrated(db_url: str) -> None:
    open_engine(db_url).dispose()


def applied_names(db_url: str) -> set[str]:
    engine = open_engine(db_url, migrate=False)
    with engine.connect() as conn:
        names = applied(conn)
    engine.dispose()
    return names


def every_silence(db_url: str) -> list[Silence]:
    engine = open_engine(db_url, migrate=False)
    found = list_silences(engine, NOW, include_ended=True)
    engine.dispose()
    return found


def test_the_page_reads_the_board_and_writes_silences_through_the_reader(db_url):
    migrated(db_url)
    engine = open_engine(db_url, migrate=False)
    firing = AlertState("target_down", "edge", "", "firing", "critical", NOW - 600, NOW, firing_since=NOW - 600)
    pending = AlertState("kv_cache", "prod", "", "pending", "warning", NOW - 60, NOW, pending_since=NOW - 60)
    change = Transition("target_down", "edge", "", "inactive", "firing", NOW - 600, "critical")
    with engine.begin() as conn:
        store.save(conn, [pending, firing], [], [change])
    engine.dispose()
    reader = Reader(db_url)
    sid = reader.add_silence(Silence({"target": "edge"}, NOW - 10, NOW + 3600, "ann", "rebuilding", NOW - 10))
    later = reader.add_silence(Silence({"rule": "kv_cache"}, NOW + 600, NOW + 1200, "bob", "tonight", NOW - 10))
    board = reader.alert_board(NOW)
    assert [(s.rule, s.state) for s in board.alerts] == [("target_down", "firing"), ("kv_cache", "pending")]
    assert [s.id for s in board.active] == [sid] and [s.id for s in board.silences] == [later, sid]
    assert [(t.rule, t.to_state) for t in board.history] == [("target_down", "firing")]
    assert (board.start, board.end) == (NOW - 86400, NOW)
    nights = MuteWindowSettings(name="always", weekdays=(), start="00:00", end="00:00", matchers={"rule": "kv_cache"})
    assert [held for _, held in held_back(board, [nights])] == [f"silence {sid}", "mute window always"]
    assert reader.expire_silence(sid, NOW + 5) and not reader.expire_silence(sid, NOW + 6)  # already ended
    assert [s.id for s in reader.alert_board(NOW + 10).active] == []
    reader.engine.dispose()


@pytest.mark.parametrize("write", ["add", "expire"])
def test_an_older_schema_is_refused_and_not_migrated(db_url, write):
    migrated(db_url)
    reader = Reader(db_url)
    sid = reader.add_silence(Silence({"target": "edge"}, NOW, NOW + 3600, "ann", "kept", NOW))
    last = MIGRATIONS[-1][0]
    engine = open_engine(db_url, migrate=False)
    with engine.begin() as conn:  # as a database the previous version of the code left
        conn.execute(delete(schema.migrations_table).where(schema.migrations_table.c.name == last))
    engine.dispose()
    before, silences = applied_names(db_url), every_silence(db_url)
    with pytest.raises(StorageError) as caught:
        if write == "add":
            reader.add_silence(Silence({"target": "prod"}, NOW, NOW + 3600, "ann", "refused", NOW))
        else:
            reader.expire_silence(sid, NOW + 5)
    line = caught.value.one_line()
    assert f"older schema than this Sweetspot (migration {last} is not applied yet); nothing was written" in line
    assert "python -m app collect" in line and "python -m app db migrate" in line
    assert applied_names(db_url) == before and last not in before  # nothing migrated
    assert every_silence(db_url) == silences  # nothing written
    reader.engine.dispose()


def test_a_newer_schema_is_refused(db_url):
    migrated(db_url)
    engine = open_engine(db_url, migrate=False)
    with engine.begin() as conn:
        conn.execute(schema.migrations_table.insert().values(name="0999_from_the_future", applied_at=NOW))
    engine.dispose()
    reader = Reader(db_url)
    with pytest.raises(StorageError, match="written by a newer Sweetspot"):
        reader.add_silence(Silence({"target": "prod"}, NOW, NOW + 3600, "ann", "refused", NOW))
    assert every_silence(db_url) == []
    reader.engine.dispose()


def test_no_database_is_made_for_a_silence(tmp_path: Path):
    path = tmp_path / "nowhere" / "sweetspot.db"
    with pytest.raises(StorageError, match="no database at .*nothing collected yet"):
        write_silence(f"sqlite:///{path}", Silence({"target": "prod"}, NOW, NOW + 3600, "ann", "x", NOW))
    assert not path.parent.exists()


def test_a_reader_opened_on_an_engine_does_not_write(tmp_path: Path):
    url = f"sqlite:///{tmp_path}/s.db"
    migrated(url)
    engine = open_engine(url, migrate=False)
    with pytest.raises(StorageError, match="cannot write a silence"):
        Reader(engine=engine).add_silence(Silence({"target": "prod"}, NOW, NOW + 3600, "ann", "x", NOW))
    with engine.connect() as conn:
        assert conn.execute(select(schema.silences)).all() == []
    engine.dispose()
