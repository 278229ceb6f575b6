"""dcgm-exporter scraping against a real HTTP server on 127.0.0.1.

tests/data/dcgm-exporter-h200x2.txt is written in dcgm-exporter's default-counter format (HELP/TYPE
lines, labels gpu, UUID, pci_bus_id, device, modelName, Hostname, DCGM_FI_DRIVER_VERSION) with the
H200 probe's values: GPU 0 under the copy load, GPU 1 idle.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import ScrapeError
from collectors.bandwidth import bandwidth_figure
from collectors.dcgm import parse_dcgm, scrape_dcgm
from tests.support.http_server import closed_port_url, serve

PAYLOAD = (Path(__file__).parent / "data" / "dcgm-exporter-h200x2.txt").read_text()
MIB = 1024 * 1024
PROM = "text/plain; version=0.0.4"


def test_scrape_reads_both_gpus_with_units_converted():
    with serve({"/metrics": (200, PROM, PAYLOAD)}) as base:
        busy, idle = scrape_dcgm(f"{base}/metrics", timeout_s=2.0)
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
            scrape_dcgm(f"{base}/metrics", timeout_s=2.0)
    assert base in str(info.value) and "targets[].gpu.url" in info.value.hint


def test_http_500_and_unreachable_raise_scrape_error():
    with serve({"/metrics": (500, "text/plain", "boom")}) as base:
        with pytest.raises(ScrapeError, match="answered HTTP 500"):
            scrape_dcgm(f"{base}/metrics", timeout_s=2.0)
    with pytest.raises(ScrapeError, match="cannot reach .*connection refused"):
        scrape_dcgm(closed_port_url(), timeout_s=2.0)
