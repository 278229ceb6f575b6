"""Every minute judged (issue 28): the demo's simulated history, written at once through the normal
ingestion path, gets a verdict for each of its minutes by the evaluator's rules, once (a second
replay writes nothing); the digest and the canned queries then read them, and no query counts time
that has not happened yet."""

from __future__ import annotations

import dataclasses
import io

import pytest

from app.alerts.backtest import backtest
from app.alerts.replay import judge_history
from app.alerts.rules import DEFAULT_RULES, by_name
from app.backfill import backfill
from app.commands.run import demo_target
from app.notify.digest import build
from core.settings import Settings
from db import canned, verdicts
from db.engine import open_engine
from db.queries import Reader
from db.query_runner import run_query
from db.rollup import rollup
from db.writer import Writer
from tests.test_query_views import LIMITS

DAY = 86400
START = 1_800_000_000 // DAY * DAY + 6 * 3600  # 06:00 UTC: the day's peak (and its incidents) inside
END = START + 18 * 3600  # up to midnight


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('h')}/h.db"
    engine = open_engine(url)
    base = "http://127.0.0.1:1"  # never read: the history is written, not scraped
    target = demo_target({"vllm_metrics": f"{base}/metrics", "gateway_metrics": f"{base}/gateway/metrics",
                          "dcgm_metrics": f"{base}/dcgm/metrics"})  # fmt: skip
    settings = Settings(db_url=url, targets=(target,))
    writer = Writer(engine)
    writer.register_target(target)
    backfill(writer, target, START, END, 30.0, seed=0, stream=io.StringIO())
    rollup(engine, END + 3600)  # as the demo does after its backfill: the views read the rollups
    written = judge_history(engine, settings, "demo", START, END)
    yield url, engine, settings, written
    engine.dispose()


def test_every_minute_of_the_history_is_judged_once(history):
    url, engine, settings, written = history
    minutes = (END - START) // 60
    assert written == minutes
    with engine.connect() as conn:
        stored = verdicts.read(conn, "demo", START, END)
    assert [v.ts for v in stored] == list(range(START, END, 60))
    states = {v.state for v in stored}
    assert verdicts.IN_SWEET_SPOT in states and verdicts.OUTSIDE in states
    assert all(v.thresholds["ttft_p95_slo_s"] == settings.sweetspot.ttft_p95_slo_s for v in stored)
    # idempotent: a second replay writes nothing and changes nothing
    assert judge_history(engine, settings, "demo", START, END) == 0
    with engine.connect() as conn:
        assert verdicts.read(conn, "demo", START, END) == stored
    # a minute not over yet is never judged
    assert judge_history(engine, settings, "demo", END, END + 59) == 0


def test_the_replayed_minutes_agree_with_the_backtest(history):
    url, engine, settings, _ = history
    rule = by_name(DEFAULT_RULES, "ttft_p95")
    assert rule is not None
    reader = Reader(url)
    replay = backtest(reader, settings, "demo", rule, START, END, 60.0)
    with engine.connect() as conn:
        held = {v.ts for v in verdicts.read(conn, "demo", START, END) if "ttft_p95" in v.held}
    assert replay.fired > 0 and held, "the day's peak breaks the TTFT SLO"
    # the backtest fires after for_s (2 minutes) of minutes whose rule held: each firing began in a held minute
    for t in replay.transitions:
        if t.to_state == "firing":
            assert t.at - 180 in held or t.at - 120 in held, t


def test_the_digest_and_the_canned_queries_read_the_judged_minutes(history):
    url, engine, settings, _ = history
    digest = build(Reader(url), engine, settings, START, END)
    (demo,) = digest.targets
    assert demo.in_sweet_spot is not None and 0 < demo.in_sweet_spot < 1
    assert demo.not_stored == 0
    result = run_query(url, canned.get("hours_outside_sweet_spot").sql, LIMITS, {"target": "", "start": START, "end": END})
    (row,) = [dict(zip(result.columns, r, strict=True)) for r in result.rows]
    assert row["hours_outside"] > 0 and row["hours_inside"] > 0 and row["hours_unjudged"] == 0
    assert row["hours_outside"] + row["hours_inside"] == pytest.approx(18.0)
    assert row["hours_without_data"] == pytest.approx(0.0)  # 06:00-24:00 asked: the night before is not counted
    # asked at 12:00 of that day: the afternoon, not lived yet, is not "without data"
    noon = START + 6 * 3600
    result = run_query(url, canned.get("hours_outside_sweet_spot").sql, LIMITS, {"target": "", "start": START - 6 * 3600, "end": noon})
    (row,) = [dict(zip(result.columns, r, strict=True)) for r in result.rows]
    assert row["hours_without_data"] == pytest.approx(6.0)  # 00:00-06:00 had no history; 12:00-24:00 has not happened
    assert dataclasses.asdict(demo)["no_data"] == pytest.approx(0.0)


def test_the_simulated_gauges_stay_physical_and_the_demo_never_trips_the_concurrency_rule(history):
    # issue 37: noise multiplied into the gauges read 17 running behind a gateway limit of 16, and the
    # `concurrency` rule fired 51 times over the demo's week
    url, engine, settings, _ = history
    reader = Reader(url)
    steps = reader.series("demo", START, END, 30.0)
    assert max(p.running_max for p in steps if p.running_max is not None) <= 16
    replay = backtest(reader, settings, "demo", by_name(DEFAULT_RULES, "concurrency"), START, END, 60.0)
    assert replay.evaluations > 0 and replay.fired == 0


def test_replay_judges_concurrency_and_under_delivering_with_the_resolved_sweet_spot_as_backtest_does(tmp_path):
    # A target without a configured sweet spot whose stored sweep puts it at 12: the stored minutes hold
    # `concurrency` exactly where running passed 12 (before, the replay never evaluated it), and each
    # firing of the backtest's replay of the rule began in such a minute.
    from app.sweet_spot import resolve
    from db.results import SweepLevel, SweepRun
    from db.sweeps import store_sweep
    from sweep.verdict import recommend

    url = f"sqlite:///{tmp_path / 'prod.db'}"
    engine = open_engine(url)
    base = "http://127.0.0.1:1"
    target = dataclasses.replace(demo_target({"vllm_metrics": f"{base}/metrics", "gateway_metrics": f"{base}/gateway/metrics",
                                              "dcgm_metrics": f"{base}/dcgm/metrics"}), name="prod", reference=False)  # fmt: skip
    settings = Settings(db_url=url, targets=(target,))
    writer = Writer(engine)
    writer.register_target(target)
    start, end = START + 2 * 3600, START + 5 * 3600  # the day's busy hours
    backfill(writer, target, start, end, 30.0, seed=0, stream=io.StringIO())
    rollup(engine, end + 3600)
    levels = tuple(SweepLevel(c, 600.0, 100, 0, tok, None, None, 1.0, None, None, None, None, 0.0)
                   for c, tok in ((6, 60.0), (8, 80.0), (12, 110.0), (24, 120.0)))  # fmt: skip
    sweep = SweepRun(start - 3600, f"{base}/v1", "sweetspot/sim-70b-awq", "mix", 3.0, levels, target="prod")
    store_sweep(engine, dataclasses.replace(sweep, recommendation=recommend(levels, 3.0)))
    assert resolve(Reader(url), settings, "prod", end).value == 12
    assert judge_history(engine, settings, "prod", start, end) == (end - start) // 60
    with engine.connect() as conn:
        stored = verdicts.read(conn, "prod", start, end)
    running = {int(p.ts): p.running_avg for p in Reader(url).series("prod", start, end, 60.0)}
    held = {v.ts for v in stored if "concurrency" in v.held}
    assert held and held == {ts for ts, r in running.items() if r is not None and r > 12}
    replay = backtest(Reader(url), settings, "prod", by_name(DEFAULT_RULES, "concurrency"), start, end, 60.0)
    assert replay.fired > 0
    for t in replay.transitions:
        if t.to_state == "firing":
            assert t.at - 60 in held, t
    under = backtest(Reader(url), settings, "prod", by_name(DEFAULT_RULES, "under_delivering"), start, end, 60.0)
    assert under.fired == sum(1 for v in stored if "under_delivering" in v.held) == 0  # evaluated, and clean
    engine.dispose()
