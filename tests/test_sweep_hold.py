"""The load rules held while a stored sweep loads its target (app/alerts/sweep_hold.py), and the
sweep stored at its start, completed or dropped (db/sweeps.py)."""

from __future__ import annotations

import dataclasses

from app.alerts.rules import CANNOT_TELL, CLEAR, DEFAULT_RULES, HOLDS, Outcome, by_name
from app.alerts.sweep_hold import held, holds, sweep_of
from db.engine import open_engine
from db.results import SweepLevel, SweepRun, SweepSpan
from db.sweeps import drop_sweep, finish_sweep, load_sweeps, loading, store_sweep

START = 1_800_000_000.0
SPAN = SweepSpan(3, START, "http://vllm:8000/v1", "demo", START + 1200.0)


def test_only_the_load_rules_are_held_and_until_their_window_has_passed_after_the_end():
    concurrency, down = by_name(DEFAULT_RULES, "concurrency"), by_name(DEFAULT_RULES, "target_down")
    assert concurrency is not None and down is not None
    assert holds(concurrency, SPAN, START) and holds(concurrency, SPAN, START + 1200 + concurrency.window_s)
    assert not holds(concurrency, SPAN, START - 1) and not holds(concurrency, SPAN, START + 1201 + concurrency.window_s)
    assert not holds(down, SPAN, START + 60)  # a sweep that breaks the engine is still a fault
    loads = {r.name for r in DEFAULT_RULES if r.load}
    assert {"concurrency", "ttft_p95", "queue_growing", "kv_cache", "preemptions"} <= loads
    assert not loads & {"target_down", "not_serving", "requests_failing", "under_delivering", "sleeping"}


def test_a_held_outcome_is_clear_and_says_which_sweep():
    out = held(Outcome(HOLDS, 30.0, 16.0, "running requests 30 > 16"), SPAN)
    assert out.status == CLEAR and (out.value, out.threshold) == (30.0, 16.0)
    assert out.summary.startswith("held: load sweep 3 on this target from ") and out.summary.endswith("30 > 16")
    assert held(Outcome(CANNOT_TELL, 3.2, 3.0, "P95 in (2.5, 5]"), SPAN).status == CLEAR
    assert held(Outcome("no_data", summary="no data"), SPAN).status == "no_data"  # a hold proves nothing


def test_a_sweep_is_the_targets_by_name_or_by_its_servers_url():
    other = dataclasses.replace(SPAN, id=4, target="other")
    old = dataclasses.replace(SPAN, id=5, target=None, url="http://vllm:8000/v1/completions")
    assert sweep_of([SPAN, other], "demo", None) == SPAN
    assert sweep_of([other], "demo", "http://vllm:8000/metrics") is None
    assert sweep_of([other, old], "demo", "http://vllm:8000/metrics") == old


def test_a_sweep_stored_at_its_start_holds_until_it_is_completed_or_dropped(tmp_path):
    engine = open_engine(f"sqlite:///{tmp_path / 's.db'}")
    planned = SweepRun(START, "http://vllm:8000/v1", "m", "mix", 3.0, (), {}, target="demo", ends_at=START + 3600)
    run_id = store_sweep(engine, planned)
    with engine.connect() as conn:
        assert [s.id for s in loading(conn, START + 60, 300)] == [run_id]
        assert load_sweeps(conn) == []  # in progress: nothing to show yet
    level = SweepLevel(8, 60.0, 100, 0, 85.0, 1.6, 1.0, 2.0, 2.5, 0.05, 30.0, 40.0, 0.0)
    finish_sweep(engine, run_id, dataclasses.replace(planned, levels=(level,), recommendation={"k": 1}, ends_at=START + 600))
    with engine.connect() as conn:
        assert loading(conn, START + 600 + 300, 300)[0].ends_at == START + 600
        assert loading(conn, START + 600 + 301, 300) == []
        [done] = load_sweeps(conn)
        assert done.levels == (level,) and done.recommendation == {"k": 1}
    second = store_sweep(engine, dataclasses.replace(planned, started_at=START + 7200, ends_at=START + 9000))
    drop_sweep(engine, second)  # interrupted: nothing of it stays, and the hold ends now
    with engine.connect() as conn:
        assert loading(conn, START + 7300, 300) == []
    engine.dispose()
