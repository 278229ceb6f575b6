"""The simulator reproduces the field report (DOMAIN.md §2) in virtual time."""

import dataclasses

from db.results import SweepLevel
from simulator import EngineConfig, calibrate, run_closed_loop
from simulator.calibrate import misses


def test_calibration_matches_the_report_within_tolerance():
    result = calibrate()
    assert misses(result) == []
    levels = {level["concurrency"]: level for level in result["levels"]}
    assert set(levels) == {8, 16, 32}
    assert all(level["preemptions"] == 0 for level in levels.values())
    # The knee: 8 → 16 gains much more than 16 → 32.
    gain_low = levels[16]["tokens_per_s"] / levels[8]["tokens_per_s"]
    gain_high = levels[32]["tokens_per_s"] / levels[16]["tokens_per_s"]
    assert gain_low > gain_high > 1.0


def test_levels_use_the_sweep_key_names():
    level = calibrate(levels=(8,), duration_s=60)["levels"][0]
    for key in ("concurrency", "tokens_per_s", "qps", "ttft_p50_s", "ttft_p95_s", "ttft_p99_s", "itl_p95_s",
                "e2e_mean_s", "e2e_p95_s", "error_rate", "preemptions"):
        assert key in level
    SweepLevel(**{f.name: level[f.name] for f in dataclasses.fields(SweepLevel)})


def test_preemption_storm_beyond_kv_capacity():
    storm = run_closed_loop(64, 600, seed=64, config=EngineConfig(max_num_seqs=64), warmup_s=60)
    assert storm["preemptions"] >= 20
    assert storm["kv_usage_max"] == 1.0
    assert storm["ttft_p95_s"] > 3 * 4.8  # users see a hung service


def test_max_num_seqs_32_protects_the_cache_at_concurrency_64():
    capped = run_closed_loop(64, 300, seed=64, warmup_s=60)
    assert capped["preemptions"] == 0


def test_same_seed_same_run():
    assert run_closed_loop(8, 120, seed=3) == run_closed_loop(8, 120, seed=3)
