"""The decode step model (core/mbu.py) against hand-computed values and a real H200's decodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import mbu

H200 = Path(__file__).parent / "data" / "h200"
REFERENCE = mbu.StepModel(weight_gb=40.0, tensor_parallel=8, peak_gbps=900.0)


def test_the_reference_ceiling_is_180_steps_per_second():
    assert REFERENCE.weight_bytes_per_gpu == 5e9
    assert REFERENCE.step_bound_per_s == pytest.approx(180.0)
    # 145 tok/s at 32 running is 4.53 steps/s: the weight stream uses 2.5 % of the bandwidth
    assert REFERENCE.mbu(145 / 32, 32, None) == pytest.approx(5e9 * (145 / 32) / 900e9)
    assert REFERENCE.mbu(145 / 32, 32, None) == pytest.approx(0.02517, abs=1e-4)


def test_kv_bytes_count_per_gpu_and_per_running_request():
    model = mbu.StepModel(weight_gb=16.0, tensor_parallel=2, peak_gbps=3350.0, kv_bytes_per_token=131072)
    # 8e9 weights + 10 × 1000 × 131072 ÷ 2 = 8e9 + 655,360,000
    assert model.bytes_per_step(10, 1000) == pytest.approx(8.65536e9)
    assert model.mbu(100, 10, 1000) == pytest.approx(8.65536e9 * 100 / 3350e9)
    # unknown context or KV size: the weights only (a lower bound)
    assert model.bytes_per_step(10, None) == 8e9
    assert mbu.StepModel(16.0, 2, 3350.0).bytes_per_step(10, 1000) == 8e9


def test_the_roofline_rises_with_concurrency_and_bends_with_the_kv_cache():
    model = mbu.StepModel(weight_gb=16.0, tensor_parallel=1, peak_gbps=4800.0, kv_bytes_per_token=131072)
    one = model.roofline_tokens_per_s(1, 1000)
    assert one == pytest.approx(4800e9 / (16e9 + 131072e3))
    assert model.single_request_tokens_per_s(1000) == one
    r64 = model.roofline_tokens_per_s(64, 1000)
    assert r64 == pytest.approx(64 * 4800e9 / (16e9 + 64 * 131072e3))
    assert one < r64 < 64 * one  # the KV cache takes its share as the batch grows


def test_the_step_bound_names_the_inputs_that_would_make_it_hold():
    assert mbu.check_step_bound(REFERENCE, 180.0) is None
    assert mbu.check_step_bound(REFERENCE, 189.0) is None  # within the tolerance
    breach = mbu.check_step_bound(REFERENCE, 300.0)
    assert breach is not None
    assert breach.max_weight_gb == pytest.approx(900 / 300 * 8)  # 24 GB
    assert breach.min_peak_gbps == pytest.approx(300 * 5.0)  # 1,500 GB/s
    text = breach.message()
    assert "300 decode steps/s" in text and "24.0 GB" in text and "1500 GB/s" in text
    assert "targets[].ceiling.weight_gb" in text and "targets[].ceiling.bandwidth_gbps" in text
    assert mbu.check_step_bound(None, 300.0) is None and mbu.check_step_bound(REFERENCE, None) is None


def test_sources_come_best_first_and_a_zero_engine_counter_is_absent():
    engine = mbu.engine_mbu(1.1e12, 4814.304)
    modelled = mbu.modelled_mbu(REFERENCE, 4.53, 32, None)
    assert mbu.MBU_SOURCES == (mbu.ENGINE, mbu.MODELLED)  # a DRAM reading is never MBU
    assert engine is not None and engine.value == pytest.approx(1.1e12 / 4814.304e9) and engine.source == mbu.ENGINE
    assert mbu.best_mbu(engine, modelled) == engine
    assert mbu.best_mbu(None, modelled) == modelled
    assert mbu.engine_mbu(0.0, 900.0) is None  # vLLM without --enable-mfu-metrics exposes zeros
    assert mbu.engine_mbu(1e9, None) is None  # no peak, no share
    assert mbu.modelled_mbu(None, 4.5, 32, None) is None


def test_dram_bandwidth_is_its_own_figure_and_the_gap_is_overhead_traffic():
    assert mbu.dram_bw_util(77.5) == mbu.DramBw(0.775, mbu.DRAM_GPM)
    assert mbu.dram_bw_util(60.0, mbu.DRAM_DCGM) == mbu.DramBw(0.6, mbu.DRAM_DCGM)
    assert mbu.dram_bw_util(float("nan")) is None and mbu.dram_bw_util(None) is None
    over = mbu.overhead_traffic(0.775, 0.139, 4814.304)
    assert over is not None and over.gbps == pytest.approx(0.636 * 4814.304) and over.ratio == pytest.approx(5.576, abs=1e-3)
    assert mbu.overhead_traffic(None, 0.1, 900.0) is None and mbu.overhead_traffic(0.5, 0.0, 900.0) is None
    assert mbu.overhead_traffic(0.5, 0.1, None) is None


def test_kv_bytes_per_token_from_cache_config_info():
    # one GPU's 2 GiB of KV over 1,000 blocks of 16 tokens, TP 4: 134,217.7 bytes a token per GPU, × 4
    assert mbu.kv_bytes_per_token(2**31, 1000, 16, 4) == pytest.approx(2**31 / 16000 * 4)
    assert mbu.kv_bytes_per_token(None, 1000, 16, 4) is None
    assert mbu.kv_bytes_per_token(2**31, 0, 16, 4) is None


def _rows(name: str) -> tuple[dict, list[dict]]:
    data = json.loads((H200 / name).read_text())
    return data, data["rows"]


@pytest.mark.parametrize("name", ["decode_truth.json", "decode_truth_static.json"])
def test_the_model_reproduces_a_real_h200_decodes_bytes_over_step_time(name):
    data, rows = _rows(name)
    model = mbu.StepModel(weight_gb=data["step_weight_bytes"] / 1e9, tensor_parallel=1,
                          peak_gbps=data["peak_gbps"], kv_bytes_per_token=data["kv_bytes_per_token"])  # fmt: skip
    for row in rows:
        steps_per_s = 1000.0 / row["step_ms"]
        context = row["ctx"] + row["new"] / 2  # the cache grows one token a step
        modelled = model.mbu(steps_per_s, row["batch"], context)
        assert modelled * data["peak_gbps"] == pytest.approx(row["implied_gbps"], rel=1e-3), row
        # the roofline's step time is the step's bytes at peak bandwidth
        step_s = row["batch"] / model.roofline_tokens_per_s(row["batch"], context)
        assert step_s * 1000 == pytest.approx(row["roofline_step_ms"], rel=1e-3)
        assert model.step_bound_per_s == pytest.approx(row["weight_only_ceiling_steps_s"], rel=1e-6)
        # aggregate tok/s passes the weight-read "ceiling" as soon as batching works; steps never do
        assert mbu.check_step_bound(model, steps_per_s) is None
        if row["batch"] >= 8:
            assert row["tok_s"] > model.step_bound_per_s


def test_a_long_decode_agrees_with_the_gpus_own_bandwidth_reading():
    data, rows = _rows("decode_truth.json")
    row = next(r for r in rows if r["batch"] == 1)  # the longest decode relative to its prefill
    model = mbu.StepModel(data["step_weight_bytes"] / 1e9, 1, data["peak_gbps"], data["kv_bytes_per_token"])
    modelled = mbu.modelled_mbu(model, 1000.0 / row["step_ms"], 1, row["ctx"] + row["new"] / 2)
    measured = mbu.dram_bw_util(row["gpm_dram_pct_median"])
    assert modelled is not None and measured is not None
    assert modelled.value == pytest.approx(0.2269, abs=5e-4)  # 1,092 GB/s of 4,814
    assert measured.value == pytest.approx(modelled.value, rel=0.02)  # GPM 23.0 %: 1.4 % apart
