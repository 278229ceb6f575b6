"""Engine: URL mapping, read-only readers, migrations bookkeeping, the db command."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Column, Engine, Float, Integer, MetaData, Table, delete, inspect, select, text
from sqlalchemy.exc import OperationalError

from app.cli import main
from collectors.records import GpuReading, ScrapeRound, SourceResult
from core.errors import StorageError
from core.settings import TargetSettings
from db import query_views, schema
from db.engine import normalize_url, open_engine, open_reader
from db.migrations import MIGRATIONS, applied, migrate
from db.queries import Reader
from db.rollup import GRACE_S, rollup
from db.writer import Writer
from tests.store_helpers import failed_round, one_round, vllm_round

T = 1_800_000_000  # a whole minute


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


def _old_gpu_samples(metadata: MetaData) -> Table:
    # gpu_samples as migrations 0001-0002 created it: keyed (gpu_id, ts)
    return Table(
        "gpu_samples",
        metadata,
        Column("gpu_id", Integer, primary_key=True),
        Column("ts", Integer, primary_key=True),
        *[Column(f, Float) for f in schema.GPU_FIELDS],
        sqlite_with_rowid=False,
    )


def _key(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return list(inspect(conn).get_pk_constraint("gpu_samples")["constrained_columns"])


def test_gpu_samples_rekey_keeps_the_rows_of_an_old_database(db_url: str) -> None:
    engine = open_engine(db_url, migrate=False)
    old = _old_gpu_samples(MetaData())
    with engine.begin() as conn:  # a database as the previous release left it
        schema.metadata.create_all(conn, tables=[t for t in schema.metadata.sorted_tables if t.name != "gpu_samples"])
        old.create(conn)
        for name in ("0001_initial_schema", "0002_chart_covering_indexes"):
            conn.execute(schema.migrations_table.insert().values(name=name, applied_at=0))
        conn.execute(schema.targets.insert(), [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}])
        gpus = [(1, 1, "GPU-a0"), (2, 1, "GPU-a1"), (3, 2, "GPU-b0")]
        conn.execute(schema.gpus.insert(), [{"id": i, "target_id": t, "uuid": u, "last_seen": 110} for i, t, u in gpus])
        rows = [
            {"gpu_id": g, "ts": ts, **{f: float(g * 1000 + ts + k) for k, f in enumerate(schema.GPU_FIELDS)}}
            for ts in (100, 105, 110) for g in (1, 2, 3)
        ]
        conn.execute(old.insert(), rows)
    assert _key(engine) == ["gpu_id", "ts"]
    assert migrate(engine)[:2] == ["0003_gpu_samples_round_key", "0004_covered_time"]  # later ones follow
    assert _key(engine) == ["target_id", "ts", "gpu_id"] == [c.name for c in schema.gpu_samples.primary_key]
    s = schema.gpu_samples
    with engine.connect() as conn:
        stored = conn.execute(select(s).order_by(s.c.ts, s.c.gpu_id)).mappings().all()
        assert not inspect(conn).has_table("gpu_samples_0002")
        assert [c["name"] for c in inspect(conn).get_columns("gpu_samples")] == list(s.c.keys())
    owner = {i: t for i, t, _ in gpus}
    assert [dict(r) for r in stored] == [{**row, "target_id": owner[row["gpu_id"]]} for row in rows]
    points = Reader(db_url).gpu_series("a", 100, 115, 5)
    assert [(p.uuid, p.memory_used_bytes) for p in points if p.memory_used_bytes is not None] == [
        (u, float(i * 1000 + ts)) for ts in (100, 105, 110) for i, _, u in gpus[:2]
    ]
    # the writer appends to the rekeyed table
    Writer(engine).write_round(ScrapeRound("b", 115, None, SourceResult(False, "x"), gpus=(GpuReading(uuid="GPU-b0"),)))
    with engine.connect() as conn:
        assert conn.execute(select(s.c.target_id, s.c.gpu_id).where(s.c.ts == 115)).all() == [(2, 3)]


def test_covered_time_is_filled_in_for_the_rows_of_an_old_database(db_url: str) -> None:
    engine = open_engine(db_url)
    writer = Writer(engine)
    writer.register_target(TargetSettings(name="t"))
    # 5 s rounds of model "a" ("b" too for a while), one failed, a stop of a minute, then one of 11
    # minutes (over max_gap_s: a baseline); written by the writer, which stores covered_ms itself
    times = [T + 5 * i for i in range(30) if not 12 <= i < 24] + [T + 900 + 5 * i for i in range(3)]
    rounds = []
    for i, ts in enumerate(times):
        if ts == T + 25:
            rounds.append(failed_round(ts))
            continue
        round_ = vllm_round(ts, 100.0 * i, model="a")
        if T + 40 <= ts <= T + 130:
            round_ = one_round(round_, vllm_round(ts, 50.0 * i, model="b"))
        rounds.append(round_)
    writer.write_rounds(rounds)
    rollup(engine, T + 1000 + GRACE_S)
    s, r = schema.samples, schema.model_rollups
    raw_query = select(s.c.model_id, s.c.ts, s.c.covered_ms).order_by(s.c.ts, s.c.model_id)
    minutes_query = select(r.c.model_id, r.c.ts, r.c.covered_ms).where(r.c.step == 60).order_by(r.c.ts, r.c.model_id)
    with engine.connect() as conn:
        raw = conn.execute(raw_query).all()
        minutes = conn.execute(minutes_query).all()
    covered = [c for _, _, c in raw]
    # 10 s across the failed round, 2 × 2.5 s while "b" is there, 2 × 32.5 s after the stop
    assert 10_000 in covered and 2500 in covered and 32_500 in covered and covered[-3:] == [None, 5000, 5000]
    with engine.begin() as conn:  # the database as the release before migration 0004 left it
        query_views.drop_views(conn)  # (0008's views read the column)
        conn.execute(text("DROP INDEX ix_model_rollups_tokens"))
        conn.execute(text("ALTER TABLE samples DROP COLUMN covered_ms"))
        conn.execute(text("ALTER TABLE model_rollups DROP COLUMN covered_ms"))
        conn.execute(text(
            "CREATE INDEX ix_model_rollups_tokens ON model_rollups (model_id, step, ts, samples, generation_tokens)"
        ))
        conn.execute(delete(schema.migrations_table).where(schema.migrations_table.c.name == "0004_covered_time"))
    assert migrate(engine) == ["0004_covered_time"]
    with engine.connect() as conn:
        assert conn.execute(raw_query).all() == raw  # as the writer stored them
        # rollups made before it: the length of their minute (what rates were divided by until then),
        # split among the models of that minute
        models_in = {ts: sum(1 for _, t, _ in minutes if t == ts) for _, ts, _ in minutes}
        assert conn.execute(minutes_query).all() == [
            (m, ts, 60_000 if models_in[ts] == 1 else 30_000) for m, ts, _ in minutes
        ]
        (index,) = [i for i in inspect(conn).get_indexes("model_rollups") if i["name"] == "ix_model_rollups_tokens"]
    assert index["column_names"][-2:] == ["generation_tokens", "covered_ms"]


def _damaged(tmp_path: Path) -> str:
    # a real database whose table pages are overwritten: sqlite_master (page 1) still reads
    url = f"sqlite:///{tmp_path}/damaged.db"
    engine = open_engine(url)
    Writer(engine).write_rounds([vllm_round(T + 5 * i, 100.0 * i) for i in range(200)])
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()
    path = tmp_path / "damaged.db"
    data = bytearray(path.read_bytes())
    data[4096:] = b"\x07" * (len(data) - 4096)
    path.write_bytes(bytes(data))
    return url


def test_a_damaged_database_is_one_line(tmp_path: Path) -> None:
    from tests.test_cli import app

    url = _damaged(tmp_path)
    for args in (("db", "info"), ("db", "migrate"), ("collect", "--once", "--vllm-url", "http://127.0.0.1:1/metrics")):
        done = app(*args, "--db", url)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"ERROR: the SQLite file {tmp_path}/damaged.db is damaged"), lines
        assert "Restore it from a backup" in lines[0] and done.stdout == ""


def test_a_database_of_a_newer_sweetspot_is_refused_never_up_to_date(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/newer.db"
    engine = open_engine(url)
    with engine.begin() as conn:
        conn.execute(schema.migrations_table.insert().values(name="0099_from_the_future", applied_at=T))
    engine.dispose()
    for args in (["db", "migrate"], ["db", "info"], ["collect", "--once", "--vllm-url", "http://127.0.0.1:1/metrics"]):
        assert main([*args, "--db", url]) == 2
        out, err = capsys.readouterr()
        assert "up to date" not in out and err.count("\n") == 1
        assert "was written by a newer Sweetspot (its schema has migration 0099_from_the_future" in err
        assert err.rstrip().endswith("Upgrade Sweetspot to the version that wrote it (or point --db / db_url at another database)")
    with open_engine(url, migrate=False).connect() as conn:
        assert conn.execute(select(schema.scrapes.c.ts)).first() is None  # the collector wrote nothing


def test_rollup_counts_are_spelled_for_people():
    from db.rollup import written_text

    assert written_text({60: 100800, 3600: 1680}) == "100,800 one-minute rows, 1,680 hourly rows"
