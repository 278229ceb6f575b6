"""Migration 0011_fleet and what it stores: discovered targets, backfill progress (SQLite and PostgreSQL)."""

from __future__ import annotations

from sqlalchemy import inspect, text

from core.settings import TargetSettings
from db.discovery import backfill_done_until, mark_discovered, save_backfill_progress
from db.engine import open_engine
from db.migrations import migrate
from db.queries import Reader
from db.writer import Writer


def test_a_database_from_before_0011_gains_the_column_and_the_table(db_url):
    engine = open_engine(db_url)
    with engine.begin() as conn:  # as a database migrated up to 0005 is
        conn.execute(text("ALTER TABLE targets DROP COLUMN discovered_by"))
        conn.execute(text("DROP TABLE backfill_progress"))
        conn.execute(text("DELETE FROM sweetspot_migrations WHERE name = '0011_fleet'"))
    assert migrate(engine) == ["0011_fleet"]
    with engine.connect() as conn:
        assert "discovered_by" in {c["name"] for c in inspect(conn).get_columns("targets")}
        assert inspect(conn).has_table("backfill_progress")
    assert migrate(engine) == []
    engine.dispose()


def test_discovered_targets_and_backfill_progress(db_url):
    engine = open_engine(db_url)
    writer = Writer(engine)
    for name in ("a", "b"):
        writer.register_target(TargetSettings(name=name))
    writer.close()
    mark_discovered(engine, ["b"], "http://prom:9090")
    infos = {t.name: t for t in Reader(engine=engine).targets()}
    assert infos["a"].discovered_by is None and infos["b"].discovered_by == "http://prom:9090"
    assert backfill_done_until(engine, "k") is None
    save_backfill_progress(engine, "k", 100)
    save_backfill_progress(engine, "k", 200)
    assert backfill_done_until(engine, "k") == 200
    engine.dispose()
