"""The NVML collector against a recorded H200 (tests/support/nvml_double.py), and once against real NVML."""

from __future__ import annotations

import logging
import statistics
import time

import pynvml
import pytest

from collectors.bandwidth import bandwidth_figure
from collectors.nvml import NvmlCollector
from core.errors import ScrapeError
from tests.support.nvml_double import RecordedNvml, lost_gpu, no_gpm_device, no_library, old_driver

UUID = "GPU-93415061-3c1d-ce23-e6f1-8b6218831ce1"
GIB = 1024**3


def make(double: RecordedNvml, **kwargs: object) -> NvmlCollector:
    return NvmlCollector(double, clock=double.clock, host="probe-host", **kwargs)  # type: ignore[arg-type]


def test_static_snapshot_reads_memory_v2_split():
    double = RecordedNvml()
    (gpu,) = make(double).collect()
    assert gpu.uuid == UUID and gpu.index == 0 and gpu.name == "NVIDIA H200" and gpu.host == "probe-host"
    # The probe before CUDA started: v2 used 0, reserved 645 MB (v1 would call those 645 MB "used").
    assert gpu.memory_used_bytes == 0
    assert gpu.memory_reserved_bytes == 644939776
    assert gpu.memory_total_bytes == 150754820096
    assert gpu.power_w == pytest.approx(135.246)
    assert gpu.temperature_c == 44
    assert gpu.memory_busy_pct == 0


def test_memory_during_load_is_four_gib_above_idle():
    double = RecordedNvml()
    collector = make(double)
    double.seek("pre", -1)
    (idle,) = collector.collect()
    double.seek("load", 10)
    (load,) = collector.collect()
    assert idle.memory_used_bytes is not None and load.memory_used_bytes is not None
    assert (load.memory_used_bytes - idle.memory_used_bytes) / GIB == pytest.approx(4.0)
    assert load.memory_reserved_bytes == 644939776


def test_peak_bandwidth_from_formula_is_4814_gbps():
    (gpu,) = make(RecordedNvml()).collect()
    assert gpu.peak_bw_gbps == pytest.approx(4814.3, abs=1)
    assert gpu.peak_bw_source == "nvml-formula"


def test_configured_peak_bandwidth_wins():
    (gpu,) = make(RecordedNvml(), peak_bw_gbps=4800.0).collect()
    assert (gpu.peak_bw_gbps, gpu.peak_bw_source) == (4800.0, "config")


def test_gpm_bandwidth_is_none_on_first_round_then_88_5_pct_under_load():
    double = RecordedNvml()
    collector = make(double)
    double.seek("load", 3)
    (first,) = collector.collect()
    assert first.dram_bw_util_pct is None  # one sample is no rate, and the hot path never sleeps
    readings = []
    for _ in range(15):
        double.advance()
        (reading,) = collector.collect()
        readings.append(reading)
    pcts = [r.dram_bw_util_pct for r in readings]
    assert all(p is not None for p in pcts)
    assert statistics.median(pcts) == pytest.approx(88.5, abs=0.2)  # type: ignore[arg-type]
    assert readings[-1].dram_bw_source == "gpm"
    figure = bandwidth_figure(readings[-1])
    assert figure is not None and not figure.time_based
    assert figure.gbps == pytest.approx(4259, abs=10)
    assert double.calls["gpm_alloc"] == 2  # two samples per GPU, reused round after round


def test_gpm_rate_spans_the_whole_interval_between_rounds():
    double = RecordedNvml()
    collector = make(double)
    double.seek("pre", -1)
    collector.collect()
    double.seek("post", 1)  # the whole load phase lies between the two rounds
    (gpu,) = collector.collect()
    assert gpu.dram_bw_util_pct is not None and 70 < gpu.dram_bw_util_pct < 88


def test_gpm_keeps_the_older_sample_when_rounds_come_too_fast():
    double = RecordedNvml()
    now = [10.0]
    collector = NvmlCollector(double, clock=lambda: now[0], host="h")
    double.seek("load", 5)
    collector.collect()
    double.advance()
    now[0] = 10.05
    assert collector.collect()[0].dram_bw_util_pct is None  # 50 ms: too short for GPM
    double.advance()
    now[0] = 10.6
    assert collector.collect()[0].dram_bw_util_pct == pytest.approx(88.5, abs=0.2)


def test_memory_busy_100_pct_is_never_reported_as_bandwidth():
    double = RecordedNvml()
    collector = make(double)
    double.seek("load", 8)
    collector.collect()
    double.advance()
    (gpu,) = collector.collect()
    assert gpu.memory_busy_pct == 100
    assert gpu.dram_bw_util_pct == pytest.approx(88.5, abs=0.3)
    figure = bandwidth_figure(gpu)
    assert figure is not None and figure.source == "gpm" and figure.pct < 90


def test_without_gpm_memory_busy_is_shown_as_time_not_gb_per_s():
    double = no_gpm_device()
    collector = make(double)
    double.seek("load", 8)
    collector.collect()
    double.advance()
    (gpu,) = collector.collect()
    assert gpu.dram_bw_util_pct is None and gpu.dram_bw_source is None
    figure = bandwidth_figure(gpu)
    assert figure is not None
    assert (figure.pct, figure.gbps, figure.source, figure.time_based) == (100, None, "memory-busy", True)


def test_old_driver_falls_back_to_v1_and_logs_each_unsupported_field_once(caplog):
    caplog.set_level(logging.INFO, logger="collectors.nvml")
    double = old_driver()
    collector = make(double)
    for _ in range(5):
        double.advance()
        (gpu,) = collector.collect()
    # v1 "used" includes the reserved memory; there is no separate reserved figure.
    point = double.point
    assert point is not None
    assert gpu.memory_used_bytes == point["mem_used_B"] + point["mem_reserved_B"]
    assert gpu.memory_reserved_bytes is None
    assert gpu.temperature_c == point["temp_C"]
    assert gpu.dram_bw_util_pct is None
    messages = [r.getMessage() for r in caplog.records]
    for field in ("memory_v2", "temperature_v", "gpm_support"):
        assert sum(field in m for m in messages) == 1, messages
    assert double.calls["memory_v2"] == 1  # FunctionNotFound is not asked again


def test_no_nvml_raises_one_clear_error_then_the_same_state_cheaply(caplog):
    caplog.set_level(logging.INFO, logger="collectors.nvml")
    double = no_library()
    now = [0.0]
    collector = NvmlCollector(double, clock=lambda: now[0], host="h")
    errors = []
    for second in range(0, 120, 5):
        now[0] = float(second)
        with pytest.raises(ScrapeError) as info:
            collector.collect()
        errors.append(info.value.one_line())
    assert errors[0] == (
        "no GPU data: NVML not available (NVML Shared Library Not Found: NVMLError_LibraryNotFound). "
        "Set targets[].gpu.source = none or dcgm"
    )
    assert set(errors) == {errors[0]}
    assert double.calls["nvmlInit"] == 2  # at 0 s and once more after a minute, not every round
    assert len([r for r in caplog.records if "no GPU data" in r.getMessage()]) == 1


def test_nvml_module_absent_is_the_same_no_gpu_state():
    with pytest.raises(ScrapeError, match="nvidia-ml-py is not installed"):
        NvmlCollector(None, host="h").collect()


def test_library_mismatch_is_caught_although_not_an_nvml_error():
    class Mismatch(RecordedNvml):
        def nvmlInit(self) -> None:
            raise pynvml.NVMLLibraryMismatchError("libnvidia-ml.so too old")

    with pytest.raises(ScrapeError, match=r"NVML not available \(libnvidia-ml.so too old"):
        NvmlCollector(Mismatch(), host="h").collect()


def test_lost_gpu_costs_its_readings_not_the_round(caplog):
    caplog.set_level(logging.INFO, logger="collectors.nvml")
    double = lost_gpu(at_point=8)
    collector = make(double)
    double.seek("load", 0)  # point 6
    healthy = collector.collect()
    assert [g.memory_total_bytes is not None for g in healthy] == [True, True]
    for _ in range(4):
        double.advance()
        readings = collector.collect()
    first, second = readings
    assert first.memory_used_bytes == 4945936384 and first.dram_bw_util_pct is not None
    assert second.uuid.startswith("GPU-") and second.uuid != first.uuid
    assert second.memory_used_bytes is None and second.power_w is None and second.dram_bw_util_pct is None
    lost_logs = [r for r in caplog.records if "lost" in r.getMessage()]
    assert len(lost_logs) == 1 and lost_logs[0].levelno == logging.WARNING
    # After the first failing call of a round the lost GPU is not asked again that round.
    assert double.calls["power"] <= 2 * 5


def test_close_frees_gpm_samples():
    double = RecordedNvml()
    collector = make(double)
    double.advance()
    collector.collect()
    collector.close()
    assert double._samples == {}


@pytest.mark.gpu
def test_real_nvml_reads_every_gpu():
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, pynvml.NVMLLibraryMismatchError) as exc:
        pytest.skip(f"NVML cannot start here: {exc}")
    collector = NvmlCollector()
    first = collector.collect()
    assert first and all(g.uuid.startswith(("GPU-", "MIG-")) for g in first)
    for gpu in first:
        assert gpu.memory_total_bytes and gpu.memory_total_bytes > 0
        assert gpu.peak_bw_gbps and gpu.peak_bw_gbps > 100
        assert gpu.power_w is not None and gpu.temperature_c is not None
    time.sleep(0.3)
    second = collector.collect()
    collector.close()
    for gpu in second:
        if gpu.dram_bw_util_pct is not None:
            assert 0 <= gpu.dram_bw_util_pct <= 100
