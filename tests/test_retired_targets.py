"""Targets can retire (issue 39 point 4): a stored target the collector is no longer configured with
reads "not configured any more" (never "down"), leaves the Fleet, the digest and ``status --all`` after
``retired_shown_s``, and ``python -m app targets drop`` takes one out, its history kept or deleted as
asked."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest
from sqlalchemy import func, select

from app.cli import main
from app.collection import CollectionService
from app.fleet import RETIRED, STATE_LABELS, fleet
from app.notify import digest
from core.settings import Settings, TargetSettings
from db import schema
from db.engine import open_engine
from db.queries import Reader
from db.writer import Writer
from tests.store_helpers import vllm_round

# whole minutes a little before the wall's now: status reads the window ending now
T0 = int(time.time()) // 60 * 60 - 900


def _target(name: str) -> TargetSettings:
    return TargetSettings(name=name, vllm_url=f"http://127.0.0.1:1/{name}")


@pytest.fixture
def db(tmp_path):
    """``demo`` and ``old`` scraped for ten minutes, then a collector started for ``mine`` alone (the
    newcomer's switch from the demo to their own engine, on the default database)."""
    url = f"sqlite:///{tmp_path}/sweetspot.db"
    engine = open_engine(url)
    writer = Writer(engine)
    for name in ("demo", "old", "mine"):
        writer.register_target(_target(name))
        for ts in range(T0, T0 + 600, 5):
            writer.write_round(vllm_round(ts, gen=float(ts - T0) * 100, target=name, running=4.0))
    writer.close()
    engine.dispose()
    service = CollectionService(Settings(db_url=url, targets=(_target("mine"),)), clock=lambda: T0 + 610.0)
    service.engine.dispose()
    return url


def _settings(url: str, shown_s: float = 86400.0) -> Settings:
    return Settings(db_url=url, targets=(_target("mine"),), retired_shown_s=shown_s)


def test_the_collector_marks_what_it_no_longer_reads_and_never_calls_it_down(db):
    infos = {t.name: t for t in Reader(db).targets()}
    assert infos["demo"].retired_at == T0 + 610 and infos["old"].retired_at == T0 + 610 and infos["mine"].retired_at is None
    rows = {r.name: r for r in fleet(Reader(db), _settings(db).sweetspot, T0 + 700, 300.0, _settings(db))}
    assert rows["demo"].state.state == RETIRED and STATE_LABELS[RETIRED] == "not configured any more"
    (reason,) = rows["demo"].state.reasons
    assert reason.startswith("not configured any more: the collector started without it at ")
    assert "python -m app targets drop demo --keep-history" in reason
    assert list(rows)[-1] in ("demo", "old")  # listed after the targets it still reads


def test_they_leave_the_fleet_the_digest_and_status_all_after_retired_shown_s(db, capsys):
    soon = _settings(db, shown_s=60.0)  # T0 + 610 + 60 has passed by the wall's now
    assert [r.name for r in fleet(Reader(db), soon.sweetspot, time.time(), 300.0, soon)] == ["mine"]
    assert [t.target for t in digest.build(Reader(db), open_engine(db), soon, T0, time.time()).targets] == ["mine"]
    config = f'db_url = "{db}"\nretired_shown_s = "1m"\n[[targets]]\nname = "mine"\nvllm_url = "http://127.0.0.1:1/mine"\n'
    path = f"{db.removeprefix('sqlite:///')}.toml"
    with open(path, "w") as f:
        f.write(config)
    assert main(["--config", path, "status", "--all", "--json"]) == 0
    assert [row["target"] for row in json.loads(capsys.readouterr().out)] == ["mine"]
    # within it, status --all lists it with its state
    assert main(["status", "--all", "--json", "--db", db]) == 0
    states = {row["target"]: row["state"] for row in json.loads(capsys.readouterr().out)}
    assert states["demo"] == RETIRED and states["mine"] != RETIRED


def test_drop_asks_what_becomes_of_the_history(db, capsys):
    with pytest.raises(SystemExit):  # argparse: the two are exclusive
        main(["targets", "drop", "demo", "--keep-history", "--delete-history", "--db", db])
    assert main(["targets", "drop", "demo", "--db", db]) == 2
    assert "add --keep-history" in capsys.readouterr().err
    assert main(["targets", "drop", "mine", "--keep-history", "--db", db]) == 2  # still read by the collector
    assert "still read by the collector" in capsys.readouterr().err
    assert main(["targets", "--db", db]) == 0
    listed = capsys.readouterr().out
    assert "demo" in listed and "not configured any more (since " in listed and "configured" in listed


def test_drop_keeping_the_history_takes_it_out_of_every_list_and_keeps_its_rows(db, capsys):
    assert main(["targets", "drop", "demo", "--keep-history", "--db", db]) == 0
    assert "its history is kept" in capsys.readouterr().out
    assert "demo" not in {t.name for t in Reader(db).targets()}
    assert "demo" not in {r.name for r in fleet(Reader(db), _settings(db).sweetspot, time.time(), 300.0, _settings(db))}
    engine = open_engine(db)
    with engine.connect() as conn:
        t, s = schema.targets, schema.scrapes
        kept = conn.execute(select(func.count()).select_from(s).join(t, t.c.id == s.c.target_id).where(t.c.name == "demo")).scalar()
    engine.dispose()
    assert kept == 120


def test_drop_deleting_the_history_deletes_every_row_of_it(db, capsys):
    assert main(["targets", "drop", "old", "--delete-history", "--db", db]) == 0
    out = capsys.readouterr().out
    assert out.startswith("deleted old and its history: ") and "120 from scrapes" in out
    engine = open_engine(db)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(schema.targets).where(schema.targets.c.name == "old")).scalar() == 0
        per_table = {table.name: conn.execute(select(func.count()).select_from(table)).scalar() for table in (schema.scrapes, schema.samples)}
    engine.dispose()
    assert per_table["scrapes"] == 240  # demo's and mine's, untouched


def test_a_target_configured_again_is_listed_again(db):
    CollectionService(_settings(db), clock=lambda: T0 + 620.0).engine.dispose()
    again = Settings(db_url=db, targets=(_target("mine"), _target("demo")))
    CollectionService(again, clock=lambda: T0 + 630.0).engine.dispose()
    infos = {t.name: t for t in Reader(db).targets()}
    assert infos["demo"].retired_at is None and infos["old"].retired_at == T0 + 610
    assert dataclasses.replace(infos["old"], retired_at=None).listed(0.0, 0.0)
