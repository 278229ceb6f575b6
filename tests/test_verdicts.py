"""The one judge: the evaluator stores each target's verdict of each minute (db/verdicts.py) with
its effective rules, once per minute; the facade and retention follow that table (the query views:
tests/test_query_views.py)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from sqlalchemy import func, select

from app.alerts.evaluator import Evaluator
from core.settings import AlertsSettings, RuleSettings, Settings, TargetSettings
from db import schema
from db.engine import open_engine
from db.queries import Reader
from db.rollup import apply_retention
from db.verdicts import CANNOT_TELL, IN_SWEET_SPOT, NO_DATA, OUTSIDE, StoredVerdict, shares
from db.writer import Writer
from tests.store_helpers import vllm_round

T0 = 1_800_000_000  # a whole minute
# Target "u" alone has its concurrency rule tightened to 2 running requests; both run 4.
OVERRIDE = RuleSettings(name="concurrency", targets=("u",), threshold="2", for_s=0.0)


@pytest.fixture
def engine(db_url):
    engine = open_engine(db_url)
    writer = Writer(engine)
    for name in ("t", "u"):
        writer.register_target(TargetSettings(name=name, vllm_url=f"http://127.0.0.1:1/{name}"))
        for ts in range(T0, T0 + 300, 5):
            writer.write_round(vllm_round(ts, gen=float(ts - T0) * 100, target=name, running=4.0))
    writer.close()
    yield engine
    engine.dispose()


def settings(db_url: str) -> Settings:
    targets = tuple(TargetSettings(name=n, vllm_url=f"http://127.0.0.1:1/{n}") for n in ("t", "u", "never"))
    return Settings(db_url=db_url, targets=targets, alerts=AlertsSettings(rules=(OVERRIDE,)))


def stored(engine) -> list[dict]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(select(schema.verdicts).order_by("ts", "target")).mappings()]


def test_one_verdict_per_target_and_minute_with_the_overrides_honoured(engine, db_url):
    evaluator = Evaluator(engine, settings(db_url))
    for at in (T0 + 120, T0 + 135, T0 + 150):  # three evaluations of one minute: one row each target
        evaluator.evaluate_once(at)
    rows = stored(engine)
    # "t" breaks nothing, but has no sweet spot or curve of its own yet: it cannot tell, and the row says why;
    # each row is the minute's last evaluation's (judged with the minute's own scrapes)
    assert [(r["target"], r["ts"], r["state"], r["evaluated_at"]) for r in rows] == [
        ("never", T0 + 120, NO_DATA, T0 + 150), ("t", T0 + 120, CANNOT_TELL, T0 + 150), ("u", T0 + 120, OUTSIDE, T0 + 150),
    ]  # fmt: skip
    # (its rounds carry tok/s and running alone: TTFT, preemptions and KV usage are not judged either)
    assert set(json.loads(rows[1]["not_judged"])) >= {"concurrency", "under_delivering", "preemptions", "kv_cache"}
    assert json.loads(rows[1]["not_judged"])["concurrency"].startswith("no sweet spot yet (run a load sweep")
    u = rows[2]
    assert u["rules_held"] == "concurrency" and json.loads(u["held_values"]) == {"concurrency": 4.0}
    assert "target_down" in rows[0]["rules_held"].split(",")
    # A restarted collector in the same minute writes that minute again, never twice; the next minute adds rows.
    Evaluator(engine, settings(db_url)).evaluate_once(T0 + 170)
    evaluator.evaluate_once(T0 + 185)
    rows = stored(engine)
    assert len(rows) == 6 and {r["evaluated_at"] for r in rows} == {T0 + 170, T0 + 185}
    got = Reader(engine=engine).verdicts("u", T0, T0 + 240)
    assert [(v.ts, v.state, v.held) for v in got] == [(T0 + 120, OUTSIDE, {"concurrency": 4.0}), (T0 + 180, OUTSIDE, {"concurrency": 4.0})]


def test_shares_count_the_minutes_without_a_verdict_apart():
    rows = [StoredVerdict("t", T0 + 60 * i, s, T0) for i, s in enumerate((IN_SWEET_SPOT, IN_SWEET_SPOT, OUTSIDE, NO_DATA))]
    got = shares(rows, T0, T0 + 600)  # ten minutes, four judged
    assert (got.minutes, got.in_sweet_spot, got.outside, got.no_data, got.not_stored) == (10, 0.2, 0.1, 0.1, 0.6)
    assert shares([], T0, T0).not_stored == 1.0


def test_verdicts_are_kept_as_long_as_the_minute_rollups(engine, db_url):
    evaluator = Evaluator(engine, settings(db_url))
    evaluator.evaluate_once(T0 + 120)
    evaluator.evaluate_once(T0 + 240)
    s = settings(db_url)
    deleted = apply_retention(engine, T0 + 240 + 90, dataclasses.replace(s, raw_retention_s=60.0, rollup_retention_s=150.0))
    assert deleted["verdicts"] == 3
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(schema.verdicts)).scalar() == 3


def test_the_overview_says_how_the_ranges_minutes_were_judged():
    from app.ui.widgets import history_text

    rows = [StoredVerdict("t", T0 + 60 * i, s, T0) for i, s in enumerate((IN_SWEET_SPOT, IN_SWEET_SPOT, OUTSIDE, NO_DATA, CANNOT_TELL))]
    assert history_text(rows, T0, T0 + 600) == ("Minutes of this range, as the alert evaluator judged them: 20 % in the "
                                                 "sweet spot, 10 % outside, 10 % cannot tell, 10 % no data, 50 % not judged "
                                                 "(no collector ran then, or backfilled).")  # fmt: skip
    assert history_text([], T0, T0 + 600).startswith("Minutes of this range: none judged yet")
