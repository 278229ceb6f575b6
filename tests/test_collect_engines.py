"""SGLang targets and vLLM's multiprocess mode end to end: simulator on loopback, SQLite, the facade."""

from __future__ import annotations

import time

from app.collection import CollectionService
from app.commands.status import render
from core.settings import Settings, TargetSettings
from db.queries import Reader
from simulator import SimOptions, start_simulator


def _collect(db: str, target: TargetSettings, rounds: int, sim=None, restart_at: int | None = None) -> list[str]:
    service = CollectionService(Settings(db_url=db, targets=(target,)))
    lines: list[str] = []
    try:
        for i in range(rounds):
            if i == restart_at and sim is not None:
                sim.restart()
            lines += service.collect_once()
            time.sleep(1.05)  # rounds are keyed by whole seconds
    finally:
        service.close()
    return lines


def test_an_sglang_target_through_collector_facade_and_status(tmp_path):
    db = f"sqlite:///{tmp_path}/s.db"
    with start_simulator(SimOptions(engine="sglang", load=4, speed=20.0, seed=2)) as sim:
        lines = _collect(db, TargetSettings(name="sg", vllm_url=sim.urls["vllm_metrics"], engine="sglang"), 3)
    assert all("up" in line for line in lines)
    fig = Reader(db).window("sg", time.time() + 1, 60)
    assert fig.engine == "sglang" and fig.tokens_per_s and fig.tokens_per_s > 0
    assert fig.kv_capacity_tokens and fig.kv_capacity_tokens > 0 and fig.sleep_state is None
    assert "retractions (preemptions)" in render(fig)
    assert Reader(db).targets()[0].metric_names_used["requests_running"] == "sglang:num_running_reqs"


def test_a_target_set_to_the_other_engine_is_a_failed_scrape_naming_the_setting(tmp_path):
    db = f"sqlite:///{tmp_path}/w.db"
    with start_simulator(SimOptions(engine="sglang")) as sim:
        lines = _collect(db, TargetSettings(name="w", vllm_url=sim.urls["vllm_metrics"], engine="vllm"), 1)
    assert "DOWN" in lines[0] and "serves sglang's metrics, not vllm's" in lines[0]
    info = Reader(db).targets()[0]
    assert info.up is False and "targets[].engine" in (info.last_error or "")


def test_a_restart_in_multiprocess_mode_gives_no_spike(tmp_path):
    db = f"sqlite:///{tmp_path}/m.db"
    with start_simulator(SimOptions(api_servers=2, load=4, speed=20.0, seed=5)) as sim:
        _collect(db, TargetSettings(name="m", vllm_url=sim.urls["vllm_metrics"]), 6, sim, restart_at=3)
    reader = Reader(db)
    points = [p for p in reader.series("m", time.time() - 30, time.time() + 1, 1) if p.tokens_per_s is not None]
    # the counters went down at the restart (nothing else marks it here): that round's increase is
    # the new process's count, so no step is negative, and none holds the old process's whole count
    assert len(points) >= 4 and all(0 <= p.tokens_per_s < 5000 for p in points)
    assert reader.window("m", time.time() + 1, 60).engine_bw_gbps is not None
