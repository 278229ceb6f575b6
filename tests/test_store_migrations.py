"""Migrations that cannot lie: every database a release left migrates to the schema of a new one,
whatever order the numbered migrations ran in; a catalogue column needs no migration; a list out
of order refuses to load."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, inspect, text

from app.cli import main
from db import migrations, schema
from db.engine import open_engine
from db.migrations import MIGRATIONS, MigrationOrderError, check_order, migrate
from db.queries import Reader
from db.writer import Writer
from tests.store_helpers import vllm_round

# Each file: a database as `python -m app db migrate` of a past commit made it (its header says which).
HISTORY = Path(__file__).parent / "data" / "migrations"
T = 1_800_000_000  # a whole minute


def _build(path: Path, dump: Path) -> str:
    with sqlite3.connect(path) as conn:
        conn.executescript(dump.read_text(encoding="utf-8"))
    return f"sqlite:///{path}"


def _shape(url: str) -> dict[tuple[str, str], Any]:
    """Tables (columns, keys, unique constraints), indexes and views of a SQLite file; column order aside
    (a column added later comes last)."""
    out: dict[tuple[str, str], Any] = {}
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        objects = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchall()
        for kind, name, table, sql in objects:
            if kind == "table":
                columns = sorted((c[1], c[2].upper(), c[3], c[5]) for c in conn.execute(f'PRAGMA table_info("{name}")'))
                unique = sorted(
                    (i[3], [c[2] for c in conn.execute(f'PRAGMA index_info("{i[1]}")')])
                    for i in conn.execute(f'PRAGMA index_list("{name}")')
                    if i[3] != "c"
                )
                out[(kind, name)] = (columns, unique, "WITHOUT ROWID" in sql.upper())
            elif kind == "index":
                out[(kind, name)] = (table, [c[2] for c in conn.execute(f'PRAGMA index_info("{name}")')])
            else:
                out[(kind, name)] = sql
        out[("rows", "sweetspot_migrations")] = sorted(r[0] for r in conn.execute("SELECT name FROM sweetspot_migrations"))
        out[("rows", "sweetspot_thresholds")] = sorted(r[0] for r in conn.execute("SELECT target FROM sweetspot_thresholds"))
    return out


@pytest.fixture(scope="module")
def new_shape(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    url = f"sqlite:///{tmp_path_factory.mktemp('new')}/new.db"
    open_engine(url).dispose()
    return _shape(url)


def _differences(got: dict[tuple[str, str], Any], want: dict[tuple[str, str], Any]) -> list[str]:
    return [f"{k}: {got.get(k)} != {want.get(k)}" for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k)]


@pytest.mark.parametrize("dump", sorted(HISTORY.glob("*.sql")), ids=lambda p: p.stem)
def test_a_database_from_any_release_migrates_to_the_schema_of_a_new_one(tmp_path, dump, new_shape):
    url = _build(tmp_path / "old.db", dump)
    with sqlite3.connect(tmp_path / "old.db") as conn:
        applied_then = {r[0] for r in conn.execute("SELECT name FROM sweetspot_migrations")}
    assert "0001_initial_schema" in applied_then and applied_then <= {n for n, _ in MIGRATIONS}
    open_engine(url).dispose()
    assert not _differences(_shape(url), new_shape), (
        "a database left by an older release differs from a new one after migrating; a schema.py change"
        " needs a numbered migration, a changed view one that drops the views:\n" + "\n".join(_differences(_shape(url), new_shape))
    )


def _apply(engine: Engine, names: list[str]) -> None:
    """The numbered migrations ``names`` in the order given, as migrate() applies each, then the standing steps."""
    steps = dict(MIGRATIONS)
    for name in names:
        with engine.begin() as conn:
            steps[name](conn)
            conn.execute(schema.migrations_table.insert().values(name=name, applied_at=0))
    for _, standing in migrations.STANDING:
        with engine.begin() as conn:
            standing(conn)


def test_the_old_order_and_the_numbered_order_end_in_the_same_schema(tmp_path, new_shape):
    # before this list was ordered, 0010 ran before 0008 and 0012 before 0011: each step reads only what
    # lower numbers made, so a database at 0007 ends the same either way
    old_order = ["0010_sweep_target", "0008_query_views", "0009_state_json", "0012_engines", "0011_fleet", "0013_masked_urls"]
    later = [n for n, _ in MIGRATIONS if n[:4] > "0013"]
    shapes = []
    for order in (old_order + later, sorted(old_order) + later):
        url = _build(tmp_path / f"{order[0]}.db", HISTORY / "0007.sql")
        engine = open_engine(url, migrate=False)
        _apply(engine, order)
        assert migrate(engine) == []
        engine.dispose()
        shapes.append(_shape(url))
    assert not _differences(shapes[0], shapes[1]) and not _differences(shapes[1], new_shape)


def _catalogue_gauge_dropped(engine: Engine, gauge: str) -> None:
    from db.query_functions import SCHEMA
    from db.query_views import VIEWS

    prefix = f"{SCHEMA}." if engine.dialect.name == "postgresql" else ""
    with engine.begin() as conn:  # a database made before the catalogue had this gauge
        for view in VIEWS:  # nor its views, which read it now (they are derived from the figures)
            conn.execute(text(f"DROP VIEW IF EXISTS {prefix}{view.name}"))
        conn.execute(text(f"ALTER TABLE samples DROP COLUMN {gauge}"))
        for part in ("sum", "max"):
            conn.execute(text(f"ALTER TABLE model_rollups DROP COLUMN {gauge}_{part}"))


def test_a_new_catalogue_column_reaches_an_old_database_without_a_migration(db_url):
    gauge = "kv_capacity_tokens"  # (read by no index, so a database can lose it)
    assert gauge in schema.GAUGES and gauge in schema.CATALOGUE_COLUMNS["samples"]
    engine = open_engine(db_url)
    _catalogue_gauge_dropped(engine, gauge)
    with engine.connect() as conn:
        assert gauge not in {c["name"] for c in inspect(conn).get_columns("samples")}
    assert migrate(engine) == []  # every numbered migration is applied: the standing step adds it
    with engine.connect() as conn:
        schema_name = "sweetspot_query" if engine.dialect.name == "postgresql" else None
        assert "minutes" in inspect(conn).get_view_names(schema=schema_name)  # and its views again
        for table, name in (("samples", gauge), ("model_rollups", f"{gauge}_sum"), ("model_rollups", f"{gauge}_max")):
            (column,) = [c for c in inspect(conn).get_columns(table) if c["name"] == name]
            assert column["nullable"] and column["type"]._type_affinity is schema.samples.c[gauge].type._type_affinity
    rounds = [vllm_round(T + 5 * i, 10.0 * i) for i in range(3)]
    for r in rounds:
        assert r.vllm is not None
        r.vllm.models["m"].gauges[gauge] = 966_720.0
    writer = Writer(engine)
    writer.write_rounds(rounds)
    writer.close()
    assert Reader(db_url).window("t", T + 10, 10).kv_capacity_tokens == 966_720.0
    engine.dispose()


def test_a_missing_catalogue_column_is_added_typed_as_schema_types_it(tmp_path, new_shape, capsys):
    url = f"sqlite:///{tmp_path}/x.db"
    engine = open_engine(url)
    with engine.begin() as conn:  # a histogram's four columns: integer, float, float, blob
        for part in ("layout", "count", "sum", "buckets"):
            conn.execute(text(f"ALTER TABLE samples DROP COLUMN tpot_{part}"))
    engine.dispose()
    assert main(["db", "migrate", "--db", url]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "schema up to date",
        "added 4: column samples.tpot_layout, column samples.tpot_count, column samples.tpot_sum, column samples.tpot_buckets",
    ]
    assert not _differences(_shape(url), new_shape)


def test_a_list_out_of_order_refuses_to_load(db_url, monkeypatch):
    def step(conn):
        raise AssertionError("never run")

    ok = [("0001_a", step), ("0003_c", step)]
    check_order(ok)  # gaps are fine (0006 was never merged)
    for bad, says in (
        ([*ok, ("0002_b", step)], "'0002_b' is listed after '0003_c'"),
        ([*ok, ("0003_again", step)], "'0003_again' reuses the number of '0003_c'"),
        ([*ok, ("four_d", step)], "'four_d' has no four-digit number"),
    ):
        with pytest.raises(MigrationOrderError, match=says):
            check_order(bad)
    engine = open_engine(db_url)
    monkeypatch.setattr(migrations, "MIGRATIONS", [*MIGRATIONS, ("0099_last", step), ("0098_merged_late", step)])
    with pytest.raises(MigrationOrderError, match="'0098_merged_late' is listed after '0099_last'"):
        migrate(engine)  # before it ran either (each would fail the test)
    engine.dispose()


def test_views_dropped_by_a_migration_are_made_again_from_the_code(db_url):
    # a migration that changes a view drops them all; the standing step makes them again (PostgreSQL:
    # its functions and aggregate are still there and are not created twice)
    from db import query_views

    engine = open_engine(db_url)
    with engine.begin() as conn:
        every = query_views.views_present(conn)
        query_views.drop_views(conn)
        assert query_views.views_present(conn) == []
    assert migrations.upgrade(engine) == migrations.Upgrade([], [f"view {name}" for name in every])
    with engine.connect() as conn:
        assert query_views.views_present(conn) == every and "minutes" in every
    assert migrations.upgrade(engine) == migrations.Upgrade([], [])
    engine.dispose()


def test_the_stored_thresholds_judge_mbu_after_0018(tmp_path):
    # a database of 0013 held min_efficiency = 0.6 (tok/s ÷ a steps bound): the column becomes min_mbu at
    # its default until the collector writes the configured thresholds
    url = _build(tmp_path / "old.db", HISTORY / "0013.sql")
    with sqlite3.connect(tmp_path / "old.db") as conn:
        assert [r[0] for r in conn.execute("SELECT min_efficiency FROM sweetspot_thresholds")] == [0.6]
    open_engine(url).dispose()
    with sqlite3.connect(tmp_path / "old.db") as conn:
        assert [r[0] for r in conn.execute("SELECT min_mbu FROM sweetspot_thresholds")] == [0.3]
        assert "kv_bytes_per_token" in {r[1] for r in conn.execute("PRAGMA table_info(targets)")}
def test_an_old_database_keeps_its_thresholds_and_learns_that_the_sweet_spot_may_be_unknown_after_0021(tmp_path):
    # a database of 0013 stored concurrency NOT NULL, the global row at the old default 16: after 0021
    # the column takes NULL (no configured sweet spot), the global row says unknown, the rest is kept
    url = _build(tmp_path / "old.db", HISTORY / "0013.sql")
    with sqlite3.connect(tmp_path / "old.db") as conn:
        conn.execute("INSERT INTO sweetspot_thresholds VALUES ('prod', 5, 24, 0.9, 0.98, 0.6, 180, 1)")
        assert {r[1]: r[3] for r in conn.execute("PRAGMA table_info(sweetspot_thresholds)")}["concurrency"] == 1
    engine = open_engine(url)
    from core.settings import SweetSpotSettings
    from db.thresholds import write_thresholds

    with sqlite3.connect(tmp_path / "old.db") as conn:
        rows = dict(conn.execute("SELECT target, concurrency FROM sweetspot_thresholds").fetchall())
        assert rows == {"*": None, "prod": 24.0}
        assert {r[1]: r[3] for r in conn.execute("PRAGMA table_info(sweetspot_thresholds)")}["concurrency"] == 0
    write_thresholds(engine, [("*", SweetSpotSettings()), ("prod", SweetSpotSettings(concurrency=12))])
    with engine.connect() as conn:
        assert dict(conn.execute(text("SELECT target, concurrency FROM sweetspot_thresholds")).all()) == {"*": None, "prod": 12.0}
        from db import query_views

        assert "target_info" in query_views.views_present(conn)  # dropped by 0021, made again by the standing step
    engine.dispose()


def test_the_slo_attainment_migration_reaches_a_schema_made_before_it(db_url):
    # a database migrated before 0019: its views lack ttft_slo_attainment_pct and (PostgreSQL) its
    # schema lacks bucket_share, which the gated DDL of the standing step would not create
    from db import query_views
    from db.query_runner import Limits, run_query

    engine = open_engine(db_url)
    with engine.begin() as conn:
        query_views.drop_views(conn)
        if conn.dialect.name == "postgresql":
            conn.execute(text("DROP FUNCTION sweetspot_query.bucket_share(float8, text, bytea)"))
            conn.execute(text("DROP FUNCTION sweetspot_query.share_of(float8, float8[], float8[])"))
        conn.execute(text("DELETE FROM sweetspot_migrations WHERE name = '0019_ttft_slo_attainment'"))
    done = migrations.upgrade(engine)
    engine.dispose()
    assert done.numbered == ["0019_ttft_slo_attainment"] and "view minutes" in done.standing
    sql = "SELECT ttft_slo_attainment_pct, bucket_share(3.0, '[2.5, 5.0, \"+Inf\"]', NULL) AS s FROM minutes"
    assert run_query(db_url, sql, Limits(timeout_s=20, row_limit=10, max_timeout_s=30), {}, any_role=True).rows == []
