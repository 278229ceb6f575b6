"""The evaluator over a real database (SQLite and PostgreSQL): stored states survive a new
process, a resolved alert resolves once, and the lease lets one evaluator run."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from app.alerts import lease, store
from app.alerts.evaluator import Evaluator
from app.alerts.model import FIRING, PENDING, RESOLVED
from collectors.records import GpuReading, SourceResult
from core.settings import AlertsSettings, Settings, TargetSettings
from db.engine import open_engine
from db.queries import Reader
from db.writer import Writer
from tests.store_helpers import vllm_round

T0 = 1_800_000_000


@pytest.fixture
def db(db_url):
    engine = open_engine(db_url)
    writer = Writer(engine)
    writer.register_target(TargetSettings(name="t", vllm_url="http://127.0.0.1:1/metrics"))
    yield engine, writer
    writer.close()
    engine.dispose()


def settings(db_url: str, **alerts) -> Settings:
    # the sweet spot is configured: the concurrency rule has no default one (app/sweet_spot.py)
    return Settings(db_url=db_url, targets=(TargetSettings(name="t", vllm_url="http://127.0.0.1:1/metrics", sweet_spot=16),),
                    alerts=AlertsSettings(**alerts))  # fmt: skip


def write(writer: Writer, start: int, end: int, *, preempt_from: int | None = None, running: float = 4.0) -> None:
    """Rounds every 5 s in [start, end); the preemption counter grows from ``preempt_from`` on."""
    for ts in range(start, end, 5):
        preemptions = 0.0 if preempt_from is None or ts < preempt_from else float((ts - preempt_from) // 5 + 1)
        writer.write_round(vllm_round(ts, gen=float(ts - T0) * 100, running=running, preemptions=preemptions))


def state(engine, rule: str):
    return store.load_states(engine)[(rule, "t", "")]


def test_preemptions_fire_at_once_and_a_new_process_does_not_announce_them_again(db, db_url):
    engine, writer = db
    write(writer, T0, T0 + 120, preempt_from=T0 + 90)
    first = Evaluator(engine, settings(db_url), clock=lambda: T0 + 120)
    fired = [t for t in first.evaluate_once() if t.rule == "preemptions"]
    assert [(t.to_state, t.at, t.value) for t in fired] == [(FIRING, T0 + 120, 6.0)]
    # A new Evaluator is what a restarted collector builds: it reads the stored states back.
    write(writer, T0 + 120, T0 + 180, preempt_from=T0 + 90)
    again = Evaluator(engine, settings(db_url), clock=lambda: T0 + 180).evaluate_once()
    assert not [t for t in again if t.rule == "preemptions"]
    s = state(engine, "preemptions")
    assert (s.state, s.firing_since, s.pending_since) == (FIRING, T0 + 120, T0 + 120)


def test_an_alert_that_cleared_while_the_collector_was_down_resolves_once_at_its_evaluation(db, db_url):
    engine, writer = db
    write(writer, T0, T0 + 120, preempt_from=T0 + 100)
    Evaluator(engine, settings(db_url)).evaluate_once(T0 + 120)
    # Down for ten minutes; the counter stopped growing meanwhile (no preemption since).
    writer.write_round(vllm_round(T0 + 720, gen=72000.0, preemptions=5.0))
    write(writer, T0 + 725, T0 + 800, preempt_from=None)
    evaluator = Evaluator(engine, settings(db_url))
    changes = [t for t in evaluator.evaluate_once(T0 + 800) + evaluator.evaluate_once(T0 + 815) if t.rule == "preemptions"]
    assert [(t.from_state, t.to_state, t.at) for t in changes] == [(FIRING, RESOLVED, T0 + 800)]
    assert state(engine, "preemptions").resolved_at == T0 + 800
    history = store.history(engine, T0, rule="preemptions")
    assert [t.to_state for t in history] == [FIRING, RESOLVED]


def test_a_pending_timer_keeps_its_start_across_a_restart(db, db_url):
    engine, writer = db
    write(writer, T0, T0 + 600, running=24.0)  # above the sweet spot (16); the rule waits 5 minutes
    Evaluator(engine, settings(db_url)).evaluate_once(T0 + 300)
    assert (state(engine, "concurrency").state, state(engine, "concurrency").pending_since) == (PENDING, T0 + 300)
    Evaluator(engine, settings(db_url)).evaluate_once(T0 + 420)  # restarted two minutes later
    assert state(engine, "concurrency").pending_since == T0 + 300
    Evaluator(engine, settings(db_url)).evaluate_once(T0 + 600)
    s = state(engine, "concurrency")
    assert (s.state, s.pending_since, s.firing_since) == (FIRING, T0 + 300, T0 + 600)


def test_one_evaluator_per_database_and_a_dead_holders_lease_expires(db, db_url, caplog):
    engine, writer = db
    write(writer, T0, T0 + 60)
    now = [T0 + 60]
    cfg = settings(db_url, lease_s=60.0)
    a = Evaluator(engine, cfg, clock=lambda: now[0], holder="a")
    b = Evaluator(engine, cfg, clock=lambda: now[0], holder="b")
    with caplog.at_level(logging.INFO, logger="app.alerts.evaluator"):
        assert "transition" in a.run()
        assert "another process holds the lease (a)" in b.run()
        eval_at = state(engine, "preemptions").last_eval_at
        now[0] += 30
        a.run()  # renews until T0 + 150
        b.run()
        assert state(engine, "preemptions").last_eval_at == now[0]  # a's evaluation, not b's
        now[0] += 61  # a died (kill -9) without releasing: its lease runs out
        assert "transition" in b.run()
    assert lease.current_holder(engine, lease.EVALUATOR).holder == "b"
    assert eval_at == T0 + 60
    assert any("another process holds the lease" in r.message for r in caplog.records)


def test_a_clean_stop_hands_the_lease_over_at_once(db, db_url):
    engine, _ = db
    cfg = settings(db_url)
    a, b = Evaluator(engine, cfg, clock=lambda: T0, holder="a"), Evaluator(engine, cfg, clock=lambda: T0, holder="b")
    a.run()
    a.release()
    assert "transition" in b.run()


def test_a_disabled_rule_resolves_its_firing_alert_once(db, db_url):
    from core.settings import RuleSettings

    engine, writer = db
    write(writer, T0, T0 + 120, preempt_from=T0 + 100)
    Evaluator(engine, settings(db_url)).evaluate_once(T0 + 120)
    off = settings(db_url, rules=(RuleSettings(name="preemptions", enabled=False),))
    changes = [t for t in Evaluator(engine, off).evaluate_once(T0 + 135) if t.rule == "preemptions"]
    assert [(t.from_state, t.to_state) for t in changes] == [(FIRING, RESOLVED)]
    assert not [t for t in Evaluator(engine, off).evaluate_once(T0 + 150) if t.rule == "preemptions"]


def test_per_target_thresholds_apply(db, db_url):
    from core.settings import SweetSpotOverrides

    engine, writer = db
    write(writer, T0, T0 + 600, running=24.0)
    loose = dataclasses.replace(settings(db_url).targets[0], sweet_spot=None, sweetspot=SweetSpotOverrides(concurrency=32))
    cfg = dataclasses.replace(settings(db_url), targets=(loose,))
    Evaluator(engine, cfg).evaluate_once(T0 + 300)
    assert state(engine, "concurrency").state == "inactive"
    assert state(engine, "concurrency").threshold == 32


def test_a_rule_that_fails_is_in_error_and_the_others_evaluate(db, db_url):
    from core.settings import RuleSettings

    engine, writer = db
    write(writer, T0, T0 + 120, preempt_from=T0 + 100)
    broken = RuleSettings(name="broken", expr="preemptions", op=">", threshold="1 / 0", severity="critical")
    Evaluator(engine, settings(db_url, rules=(broken,))).evaluate_once(T0 + 120)
    assert state(engine, "broken").state == "error" and "ZeroDivisionError" in state(engine, "broken").summary
    assert state(engine, "preemptions").state == FIRING


def test_a_per_model_rule_gets_one_alert_per_model(db, db_url):
    from core.settings import RuleSettings
    from tests.store_helpers import one_round

    engine, writer = db
    for ts in range(T0, T0 + 120, 5):
        calm = vllm_round(ts, gen=float(ts - T0), model="small", preemptions=0.0)
        busy = vllm_round(ts, gen=float(ts - T0), model="big", preemptions=float(max(0, ts - T0 - 60)))
        writer.write_round(one_round(calm, busy))
    cfg = settings(db_url, rules=(RuleSettings(name="preemptions", per_model=True),))
    Evaluator(engine, cfg).evaluate_once(T0 + 120)
    states = store.load_states(engine)
    assert states[("preemptions", "t", "big")].state == FIRING
    assert states[("preemptions", "t", "small")].state == "inactive"
    assert states[("preemptions", "t", "")].state == FIRING  # the whole target preempts too
    assert ("ttft_p95", "t", "big") not in states


def test_the_evaluator_reads_windows_without_gpu_figures(tmp_path):
    import time

    from db.queries import Reader
    from tests import ui_db

    # Its own file: ui_db.shared() is filled at its first call, and the UI tests count on that being
    # theirs (the edge target's "down for ten minutes" ages).
    reader = Reader(ui_db.fill(tmp_path / "g.db", time.time(), hours=0.05))
    assert reader.window("demo", time.time(), 300).gpus  # the simulator's history has 8 dcgm GPUs
    assert reader.window("demo", time.time(), 300, gpus=False).gpus == ()


def test_reading_every_target_at_once_gives_each_target_its_own_outcomes(tmp_path, caplog):
    """The batched read (Reader.fleet) decides every default rule exactly as one read per target does,
    on the simulator's history of several targets (one of them down); a failed batch falls back."""
    import time

    from tests import ui_db

    now = time.time()
    url = ui_db.fill(tmp_path / "b.db", now, hours=0.2)
    engine = open_engine(url, migrate=False)
    names = [t.name for t in Reader(url).targets()]
    cfg = Settings(db_url=url, targets=tuple(TargetSettings(name=n, vllm_url="http://127.0.0.1:1/metrics") for n in names))
    evaluator = Evaluator(engine, cfg)
    at = int(now)
    batch = evaluator._read_all(at)
    assert {target for _, target in batch.windows} >= set(names) and len(names) >= 2
    for name, rules in evaluator.rules.items():
        one_by_one = evaluator._outcomes(name, rules, at)
        together = evaluator._outcomes(name, rules, at, batch)
        assert together == one_by_one, name
    # the targets differ (the edge one is down): each got its own figures, not one target's for all
    decided = {name: evaluator._outcomes(name, rules, at, batch) for name, rules in evaluator.rules.items()}
    assert len({repr(sorted(d.items())) for d in decided.values()}) > 1

    def broken(*args, **kwargs):
        raise RuntimeError("no fleet read today")

    evaluator.reader.fleet = broken  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING):
        assert evaluator._read_all(at).windows == {}
        evaluator.evaluate_once(at)
    assert "reading them one by one" in caplog.text
    # each target was still evaluated, one read each: every rule of every target has a stored state
    stored = store.load_states(engine)
    assert {(r.name, name, "") for name, rules in evaluator.rules.items() for r in rules} <= set(stored)
    engine.dispose()


def test_a_target_found_through_prometheus_is_evaluated_too(db, db_url):
    from db.discovery import mark_discovered

    engine, writer = db
    writer.register_target(TargetSettings(name="p:9400"))
    mark_discovered(engine, ["p:9400"], "http://prometheus.test:9090")
    for ts in range(T0, T0 + 120, 5):
        preemptions = float(max(0, ts - T0 - 90))
        writer.write_round(vllm_round(ts, gen=float(ts - T0) * 100, target="p:9400", preemptions=preemptions))
    Evaluator(engine, settings(db_url)).evaluate_once(T0 + 120)  # the file names only "t"
    states = store.load_states(engine)
    assert states[("preemptions", "p:9400", "")].state == FIRING
    assert ("preemptions", "t", "") in states  # the configured target as before


GIB = 2**30


@pytest.mark.parametrize(("gpu", "reference"), [
    (GpuReading("GPU-0", 0, "Tesla V100-SXM2-32GB", memory_total_bytes=32 * GIB), True),
    (GpuReading("GPU-0", 0, "NVIDIA H100 80GB HBM3", memory_total_bytes=80 * GIB), False),
    (None, False),  # no GPU source: nothing known of the GPUs
])  # fmt: skip
def test_the_references_experience_is_advised_only_on_gpus_like_its_own(db, db_url, gpu, reference):
    engine, writer = db
    for ts in range(T0, T0 + 120, 5):
        round_ = vllm_round(ts, gen=float(ts - T0) * 100, preemptions=float(ts >= T0 + 90) * (ts - T0 - 85) / 5)
        writer.write_round(dataclasses.replace(round_, gpus=(gpu,), gpu_status=SourceResult(True)) if gpu else round_)
    Evaluator(engine, settings(db_url), clock=lambda: T0 + 120).evaluate_once()
    s = state(engine, "preemptions")
    assert s.state == FIRING and "lower --max-num-seqs and --max-model-len" in s.recommendation
    assert ("On the reference deployment (8× V100 32 GB" in s.recommendation) is reference
    assert ("--max-model-len 6144" in s.recommendation and "0.92 works" in s.recommendation) is reference
    assert "reference" not in state(engine, "ttft_p95").recommendation  # an inactive alert reads no GPUs


def test_a_holder_whose_process_died_on_this_host_hands_its_lease_over_at_once(db):
    # a collector killed (or stopped without its clean exit) held the database's turn for its whole lease
    import subprocess
    import sys

    engine, _ = db
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    ours = lease.holder_id()
    host, _pid, token, namespace = ours.split(":")
    corpse = f"{host}:{dead.pid}:{token}:{namespace}"
    assert lease.acquire(engine, "collector", corpse, 1000.0, 60.0)
    assert lease.gone(corpse) and not lease.gone(ours)
    assert lease.acquire(engine, "collector", ours, 1001.0, 60.0)  # not 60 s later
    assert lease.current_holder(engine, "collector").holder == ours
    # a live holder of this host, or one of another host, keeps its lease until it expires
    assert not lease.acquire(engine, "collector", f"{host}:1:x:{namespace}", 1002.0, 60.0)
    assert not lease.gone(f"elsewhere:{dead.pid}:{token}:{namespace}") and not lease.gone("a")
