"""dcgm-exporter scraping against a real HTTP server on 127.0.0.1.

tests/data/dcgm-exporter-h200x2.txt is written in dcgm-exporter's default-counter format (HELP/TYPE
lines, labels gpu, UUID, pci_bus_id, device, modelName, Hostname, DCGM_FI_DRIVER_VERSION) with the
H200 probe's values: GPU 0 under the copy load, GPU 1 idle.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.bandwidth import bandwidth_figure
from collectors.dcgm import parse_dcgm, scrape_dcgm
from core.errors import ScrapeError
from tests.support.http_server import closed_port_url, serve
from tests.support.waiting import LOCAL_ANSWER_S

PAYLOAD = (Path(__file__).parent / "data" / "dcgm-exporter-h200x2.txt").read_text()
MIB = 1024 * 1024
PROM = "text/plain; version=0.0.4"


def test_scrape_reads_both_gpus_with_units_converted():
    with serve({"/metrics": (200, PROM, PAYLOAD)}) as base:
        busy, idle = scrape_dcgm(f"{base}/metrics", timeout_s=LOCAL_ANSWER_S)
    assert busy.uuid == "GPU-93415061-3c1d-ce23-e6f1-8b6218831ce1"
    assert (busy.index, busy.name, busy.host) == (0, "NVIDIA H200", "gpu-node-1")
    assert busy.memory_used_bytes == 4716 * MIB
    assert busy.memory_reserved_bytes == 615 * MIB
    assert busy.memory_total_bytes == (4716 + 138439 + 615) * MIB  # used + free + reserved
    assert busy.memory_busy_pct == 100
    assert busy.dram_bw_util_pct == pytest.approx(88.4885)
    assert busy.dram_bw_source == "dcgm"
    assert busy.power_w == pytest.approx(509.285) and busy.temperature_c == 54
    assert busy.peak_bw_gbps is None and busy.peak_bw_source is None
    assert idle.index == 1 and idle.memory_used_bytes == 0 and idle.dram_bw_util_pct == pytest.approx(0.0004)


def test_memory_copy_util_is_time_and_dram_active_is_bandwidth():
    busy, _ = parse_dcgm(PAYLOAD, peak_bw_gbps=4800.0)
    assert (busy.peak_bw_gbps, busy.peak_bw_source) == (4800.0, "config")
    figure = bandwidth_figure(busy)
    assert figure is not None and figure.source == "dcgm" and not figure.time_based
    assert figure.gbps == pytest.approx(4247, abs=1)  # not the 100 % "memory copy utilisation"


def test_older_exporter_without_reserved_or_profiling_fields():
    lines = [line for line in PAYLOAD.splitlines() if "FB_RESERVED" not in line and "DCGM_FI_PROF" not in line]
    busy, _ = parse_dcgm("\n".join(lines) + "\n")
    assert busy.memory_total_bytes == (4716 + 138439) * MIB  # used + free
    assert busy.memory_reserved_bytes is None
    assert busy.dram_bw_util_pct is None and busy.dram_bw_source is None
    figure = bandwidth_figure(busy)
    assert figure is not None and figure.time_based and figure.gbps is None


def test_samples_without_uuid_are_keyed_by_host_and_index():
    text = 'DCGM_FI_DEV_GPU_TEMP{gpu="3",Hostname="n2"} 40\nDCGM_FI_DEV_POWER_USAGE{gpu="3",Hostname="n2"} 70.5\n'
    (gpu,) = parse_dcgm(text)
    assert (gpu.uuid, gpu.index, gpu.host, gpu.temperature_c, gpu.power_w) == ("n2/gpu3", 3, "n2", 40, 70.5)
    assert gpu.memory_used_bytes is None


def test_nan_is_missing_not_zero():
    text = 'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-x"} NaN\nDCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-x"} 70\n'
    (gpu,) = parse_dcgm(text)
    assert gpu.temperature_c is None and gpu.power_w == 70


@pytest.mark.parametrize(
    "body, message",
    [
        ("<html><body>Grafana</body></html>", "not Prometheus text"),
        ('{"gpus": []}', "not Prometheus text"),
        ("node_load1 0.5\n", "no DCGM_FI_"),
        ("", "no DCGM_FI_"),
    ],
)
def test_garbage_raises_scrape_error(body, message):
    with serve({"/metrics": (200, PROM, body)}) as base:
        with pytest.raises(ScrapeError, match=message) as info:
            scrape_dcgm(f"{base}/metrics", timeout_s=LOCAL_ANSWER_S)
    assert base in str(info.value) and "targets[].gpu.url" in info.value.hint


def test_http_500_and_unreachable_raise_scrape_error():
    with serve({"/metrics": (500, "text/plain", "boom")}) as base:
        with pytest.raises(ScrapeError, match="answered HTTP 500"):
            scrape_dcgm(f"{base}/metrics", timeout_s=LOCAL_ANSWER_S)
    with pytest.raises(ScrapeError, match="cannot reach .*connection refused"):
        scrape_dcgm(closed_port_url(), timeout_s=2.0)


# -- the plan cache: a page whose series match an earlier one reuses its plan, and only then ------

GPUS = (("0", "GPU-a", "H200", "n1"), ("1", "GPU-b", "H200", "n1"))


def _page(gpus=GPUS, n: int = 5, fields=("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP")) -> str:
    """A small dcgm-exporter page; every argument but ``n`` changes its series set."""
    lines = []
    for field in fields:
        lines.append(f"# TYPE {field} gauge")
        for index, uuid, model, host in gpus:
            block = f'gpu="{index}",UUID="{uuid}",modelName="{model}",Hostname="{host}"'
            lines.append(f"{field}{{{block}}} {n + int(index)}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("second", "check"),
    [
        (_page(n=7), lambda r: r[1].temperature_c == 8),
        (_page(gpus=(*GPUS, ("2", "GPU-c", "H200", "n1"))), lambda r: len(r) == 3),
        (_page(gpus=(GPUS[0], ("1", "GPU-z", "H200", "n1"))), lambda r: r[1].uuid == "GPU-z"),
        (_page(gpus=(GPUS[0], ("1", "GPU-b", "H100", "n1"))), lambda r: r[1].name == "H100"),
        (_page(gpus=(GPUS[0], ("1", "GPU-b", "H200", "n0"))), lambda r: r[0].host == "n0"),
        (_page(gpus=(GPUS[1], GPUS[0])), lambda r: [g.uuid for g in r] == ["GPU-a", "GPU-b"]),
        (_page(fields=("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_FB_FREE")),
         lambda r: r[0].memory_total_bytes == 10 * 1024 * 1024),
    ],
    ids=["values only", "new GPU", "GPU replaced", "new model name", "other host", "reordered", "fields reordered"],
)
def test_a_page_after_another_is_read_for_its_own_series(second, check):
    parse_dcgm(_page())
    assert check(parse_dcgm(second))


def test_a_nan_sample_is_skipped_and_a_repeated_one_wins():
    # The first sample of a field wins, but a NaN sample is skipped (absent, not zero), so a repeated
    # sample (MIG exporters) wins instead.
    line = 'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a"} %s\n'
    first, second = line % "40" + line % "41", line % "NaN" + line % "41"
    assert parse_dcgm(first)[0].temperature_c == 40
    assert parse_dcgm(second)[0].temperature_c == 41
    with pytest.raises(ScrapeError, match="no DCGM_FI_"):
        parse_dcgm(line % "NaN")  # a GPU whose every sample is NaN is not there at all


def test_the_same_page_with_another_configured_peak_is_read_with_that_peak():
    assert parse_dcgm(PAYLOAD, 900.0)[0].peak_bw_gbps == 900.0
    assert parse_dcgm(PAYLOAD, 4800.0)[0].peak_bw_gbps == 4800.0
    assert parse_dcgm(PAYLOAD)[0].peak_bw_gbps is None
