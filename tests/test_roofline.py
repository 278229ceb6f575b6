"""The roofline with a compute roof (core/roofline.py, core/gpu_specs.json, docs/ceiling.md): the
datasheet table matched by the names real drivers report, both roofs and their crossover on the
reference and on an H200, an unknown GPU said as such, and ``status --json``'s ``roofline``."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest

from app.cli import main
from app.commands.status import figures_json
from app.operating_point import roofline_text, target_roofline
from app.ui import charts
from collectors.dcgm import parse_dcgm
from collectors.records import ScrapeRound, SourceResult
from collectors.vllm import parse_vllm
from core import roofline as roofs
from core.mbu import StepModel
from core.settings import CeilingSettings, GpuSettings, TargetSettings
from db.engine import open_engine
from db.queries import Reader
from db.results import GpuFigures
from db.writer import Writer
from tests.builders import window
from tests.test_mbu_engines import page

# GPU names as NVML (nvmlDeviceGetName) and dcgm-exporter (modelName) report them → the table's row
NAMES = {
    "Tesla V100-SXM2-32GB": "V100 SXM2", "Tesla V100-SXM2-16GB": "V100 SXM2", "Tesla V100-PCIE-16GB": "V100 PCIe",
    "Tesla T4": "T4", "NVIDIA A10": "A10", "NVIDIA L4": "L4", "NVIDIA L40S": "L40S",
    "NVIDIA A100-SXM4-40GB": "A100 40GB", "NVIDIA A100-PCIE-40GB": "A100 40GB", "NVIDIA A100-SXM4-80GB": "A100 80GB SXM",
    "NVIDIA A100 80GB PCIe": "A100 80GB PCIe", "NVIDIA H100 80GB HBM3": "H100 SXM", "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA H200": "H200", "NVIDIA B200": "B200", "AMD Instinct MI300X": "MI300X",
}  # fmt: skip
# Other GPUs whose figures differ from any row: no match, never a neighbour's figures
UNKNOWN = ("Tesla V100S-PCIE-32GB", "NVIDIA A10G", "NVIDIA L40", "NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA GeForce RTX 4090", "")

REFERENCE = StepModel(40.0, 8, 900.0, 327_680)  # docs/ceiling.md (a): 8× V100, 70B AWQ, TP 8
CONTEXT = 1270.0


@pytest.mark.parametrize(("name", "row"), list(NAMES.items()))
def test_the_datasheet_row_of_each_name_a_driver_reports(name, row):
    spec = roofs.match_gpu(name)
    assert spec is not None and spec.name == row


@pytest.mark.parametrize("name", UNKNOWN)
def test_an_unknown_gpu_has_no_compute_roof_never_a_guess(name):
    assert roofs.match_gpu(name) is None
    assert roofs.peak_compute(None, (name,)) is None
    roof = roofs.roofline(REFERENCE, CONTEXT, roofs.peak_compute(None, (name,)), 70e9)
    assert roof.compute_tok_s is None and roof.crossover_batch is None
    assert roof.note == "compute roof unknown: set targets[].gpu.peak_tflops"
    assert roof.attainable_tok_s(32) == roof.bandwidth_tok_s(32)  # the bandwidth roof alone, said as such


def test_the_tables_figures_are_the_datasheets_dense_ones():
    by = {s.name: s for s in roofs.gpu_specs()}
    assert by["V100 SXM2"].tflops == {"bf16_tensor": None, "fp16_tensor": 125, "fp8_tensor": None, "fp16_cuda_core": 31.4}
    assert by["H100 SXM"].tflops["bf16_tensor"] == by["H200"].tflops["bf16_tensor"] == 989.4  # the same compute
    assert by["H200"].memory_gbps == 4800 and by["A100 80GB SXM"].tflops["bf16_tensor"] == 312
    assert all(s.tflops["fp8_tensor"] is None for s in roofs.gpu_specs() if s.name.startswith(("V100", "T4", "A10")))


def test_the_reference_on_cuda_cores_crosses_near_11_and_caps_32_near_1790():
    """The issue's figures: fp16 CUDA-core compute caps 70B AWQ over 8 V100s near 1,780 tok/s, where the
    bandwidth roof alone reads 4,321 at 32; the roofs cross near 11 requests."""
    peak = roofs.peak_compute(None, ("Tesla V100-SXM2-32GB",) * 8, "fp16_cuda_core")
    assert peak == roofs.PeakCompute(31.4, "datasheet: V100 SXM2, fp16_cuda_core")
    roof = roofs.roofline(REFERENCE, CONTEXT, peak, 70e9)
    assert roof.compute_tok_s == pytest.approx(31.4e12 * 8 / 140e9)  # 1,794 tok/s
    assert roof.bandwidth_tok_s(32) == pytest.approx(4321, abs=1)
    assert roof.attainable_tok_s(32) == pytest.approx(1794.3, abs=0.1)
    assert roof.crossover_batch == pytest.approx(11.1, abs=0.1)
    assert roof.bandwidth_tok_s(roof.crossover_batch) == pytest.approx(roof.compute_tok_s)  # where they meet
    assert roof.attainable_tok_s(8) == roof.bandwidth_tok_s(8) < roof.compute_tok_s  # memory-bound below it
    tensor = roofs.roofline(REFERENCE, CONTEXT, roofs.peak_compute(None, ("Tesla V100-SXM2-32GB",)), 70e9)
    assert tensor.compute is not None and tensor.compute.source == "datasheet: V100 SXM2, fp16_tensor"  # no bf16


def test_an_h200_8b_model_is_memory_bound_to_a_large_batch():
    model = StepModel(16.0, 1, 4800.0, 131_072)
    roof = roofs.roofline(model, 1000.0, roofs.peak_compute(None, ("NVIDIA H200",)), 8e9)
    assert roof.compute_tok_s == pytest.approx(989.4e12 / 16e9)  # 61,838 tok/s
    # c × 4,800 GB/s ÷ (16 GB + c × 131 MB) never reaches it: the KV cache's bytes bend the bandwidth roof first
    assert roof.crossover_batch is None and roof.attainable_tok_s(64) == roof.bandwidth_tok_s(64)
    no_kv = roofs.roofline(StepModel(16.0, 1, 4800.0), None, roof.compute, 8e9)
    assert no_kv.crossover_batch == pytest.approx(roof.compute_tok_s * 16e9 / 4800e9)  # 206 requests


def test_a_configured_peak_wins_and_the_slowest_gpu_bounds():
    assert roofs.peak_compute(500.0, ("NVIDIA H200",)) == roofs.PeakCompute(500.0, "config")
    mixed = roofs.peak_compute(None, ("NVIDIA H100 PCIe", "NVIDIA H100 80GB HBM3"))
    assert mixed == roofs.PeakCompute(756, "datasheet: H100 PCIe, bf16_tensor")
    assert roofs.peak_compute(None, ("NVIDIA H200", "NVIDIA A10G")) is None  # one unknown GPU: no guess
    assert roofs.peak_compute(None, ("Tesla T4",), "fp8_tensor") is None  # no fp8 on a T4
    assert roofs.roofline(REFERENCE, CONTEXT, mixed, None).note == "compute roof unknown: set targets[].ceiling.active_params_b"


def _gpu(name: str) -> GpuFigures:
    return GpuFigures(uuid=f"GPU-{name}", index=0, name=name, host=None, memory_used_bytes=None, memory_total_bytes=None,
                      memory_busy_pct_avg=None, dram_bw_util_pct_avg=None, dram_bw_gbps_avg=None, dram_bw_source=None,
                      peak_bw_gbps=900.0, peak_bw_source="nvml-formula", power_w_avg=None, temperature_c_max=None)  # fmt: skip


def test_status_json_carries_both_roofs_at_the_windows_concurrency():
    """The reference at 32 running with its mix (3.6 prompt tokens an output token): fp16 on the CUDA cores
    for decode and prefill alike, the compute roof is ~390 tok/s, not 1,794, and 145 tok/s is ~37 % of it."""
    ceiling = dataclasses.replace(window().ceiling, kv_bytes_per_token=327_680.0, active_params_b=70.0,
                                  compute_precision="fp16_cuda_core")  # fmt: skip
    f = window(ceiling=ceiling, gpus=(_gpu("Tesla V100-SXM2-32GB"),) * 8, running_avg=32.0, tokens_per_s=145.0,
               prompt_tokens_per_s=3.6 * 145.0, mean_context_tokens=CONTEXT)  # fmt: skip
    got = json.loads(json.dumps(figures_json(f)))["roofline"]
    assert got["compute_tflops"] == 31.4 and got["bandwidth_gbps"] == 900.0 and got["prompt_per_output"] == pytest.approx(3.6)
    assert got["decode_compute_tok_s"] == pytest.approx(1794.3, abs=0.1)
    assert got["compute_tok_s"] == pytest.approx(1794.3 / 4.6, abs=0.1)  # 390 tok/s: prefill counted
    assert got["attainable_tok_s"] == pytest.approx(390.1, abs=0.1) and got["bandwidth_tok_s"] == pytest.approx(4321, abs=1)
    assert got["measured_share_of_attainable"] == pytest.approx(145 / 390.07, rel=1e-3) and got["note"] is None
    roof = target_roofline(f)
    assert roof is not None and got["crossover_batch"] == pytest.approx(roof.crossover_batch)
    assert roof.bandwidth_tok_s(roof.crossover_batch) == pytest.approx(390.07, abs=0.1)  # where they meet
    text = roofline_text(roof, f)
    assert text.startswith("compute roof 390 tok/s (datasheet: V100 SXM2, fp16_cuda_core, 31.4 TFLOP/s; prefill at 3.6 "
                           "prompt tokens an output token, decode alone 1,794)")  # fmt: skip
    assert "measured 145 tok/s: 37 % of attainable" in text
    unknown = window(ceiling=ceiling, gpus=(_gpu("NVIDIA A10G"),), running_avg=32.0)
    got = figures_json(unknown)["roofline"]
    assert got["compute_tflops"] is None and got["note"] == "compute roof unknown: set targets[].gpu.peak_tflops"
    assert figures_json(window(ceiling=None))["roofline"] is None


def test_the_chart_draws_both_roofs():
    spec = charts.operating_point_chart([], "tokens_per_s", "output tok/s", charts.REFERENCE_TOKENS,
                                        roofline=[(1.0, 178.0), (32.0, 4321.0)], compute_roof=1794.3).to_dict()  # fmt: skip
    texts = json.dumps(spec)
    # the bandwidth roof past the crossover is not attainable: the curve is drawn as the lower of the
    # two roofs (docs/ceiling.md), never above the compute roof, and named so (issue 30)
    assert "compute roof: 1,794 tok/s" in texts and "attainable: 1,794 at 32" in texts and charts.ATTAINABLE_NAME in texts
    assert "4,321" not in texts
    curve = [r for rows in spec["datasets"].values() for r in rows if r.get("label") == charts.ATTAINABLE_NAME and "text" not in r]
    assert [r["value"] for r in curve] == [178.0, 1794.3]
    below = charts.operating_point_chart([], "tokens_per_s", "output tok/s", charts.REFERENCE_TOKENS,
                                         roofline=[(1.0, 178.0), (8.0, 1200.0)], compute_roof=1794.3).to_dict()  # fmt: skip
    assert "bandwidth roofline (modelled bound): 1,200 at 8" in json.dumps(below)  # under the compute roof: as it is


def test_configured_inputs_reach_status_through_the_database(tmp_path, capsys):
    """targets[].ceiling.active_params_b and targets[].gpu.peak_tflops are stored with the target
    (0026_compute_roof) and read back by ``status`` with the GPUs' names from dcgm-exporter."""
    url = f"sqlite:///{tmp_path}/roof.db"
    writer = Writer(open_engine(url))
    target = TargetSettings(name="h200", vllm_url="http://127.0.0.1:1/metrics",
                            ceiling=CeilingSettings(weight_gb=16.0, tensor_parallel=1, bandwidth_gbps=4800.0, active_params_b=8.0),
                            gpu=GpuSettings(precision="fp8_tensor"))  # fmt: skip
    writer.register_target(target)
    dcgm = Path(__file__).parent / "data" / "dcgm-exporter-h200x2.txt"  # modelName="NVIDIA H200"
    start = float(int(time.time()) // 10 * 10 - 20)
    for scrape in (0, 1):
        writer.write_round(ScrapeRound("h200", start + scrape * 10, parse_vllm(page(1, scrape)), SourceResult(True),
                                       gpus=parse_dcgm(dcgm.read_text(), peak_bw_gbps=4800.0), gpu_status=SourceResult(True)))  # fmt: skip
    f = Reader(url).window("h200", start + 10, 60)
    assert f.ceiling is not None and (f.ceiling.active_params_b, f.ceiling.compute_precision) == (8.0, "fp8_tensor")
    assert main(["status", "--db", url, "--target", "h200", "--window", "1m", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ceiling"] is not None and doc["ceiling_missing"] is None  # once set beside a ceiling
    assert f.ceiling_missing == ""
    got = doc["roofline"]
    assert (got["compute_tflops"], got["compute_source"]) == (1979, "datasheet: H200, fp8_tensor")
    # the page counts no prompt tokens: no mix, so the roof is decode's alone, and says so
    assert got["prompt_per_output"] is None and got["compute_tok_s"] == pytest.approx(1979e12 / 16e9)
    assert main(["status", "--db", url, "--target", "h200", "--window", "1m"]) == 0
    assert ("  roofline                 compute roof 123,688 tok/s (datasheet: H200, fp8_tensor, 1,979 TFLOP/s; decode "
            "only: no prompt count)") in capsys.readouterr().out
