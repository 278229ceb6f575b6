"""One rule for the peak bandwidth (core/bandwidth.py ``peak_bandwidth``, issue 42 item 5): configured, else
the GPUs' own reading, else the datasheet; the ceiling and every MBU route call it. Before it, a target
with the engine's byte counters and a configured peak but no weights read "no MBU: no peak bandwidth"."""

from __future__ import annotations

import math
import time

import pytest

from core import mbu
from core.bandwidth import PeakBandwidth, peak_bandwidth
from core.settings import CeilingSettings
from db.ceiling import compute_ceiling
from db.queries import Reader
from tests.test_mbu_pipeline import PEAK, modelled, store


def test_the_precedence_is_configured_then_the_reading_then_the_datasheet():
    names = ("NVIDIA H200", "NVIDIA H200")
    assert peak_bandwidth(4700.0, [4814.3], names) == PeakBandwidth(4700.0, "config")
    assert peak_bandwidth(None, [4814.3, 4790.0], names) == PeakBandwidth(4790.0, "nvml-formula")  # the slowest GPU
    assert peak_bandwidth(None, [None], names) == PeakBandwidth(4800.0, "datasheet: H200")
    assert peak_bandwidth(None, [], ("Tesla V100-SXM2-32GB", "NVIDIA H200")) == PeakBandwidth(900.0, "datasheet: V100 SXM2")
    assert peak_bandwidth(math.nan, [math.inf], ("NVIDIA A10G",)) is None  # nothing usable, an unknown name: no guess
    assert peak_bandwidth(None) is None
    # the ceiling takes the same rule: configured over NVML's formula
    assert compute_ceiling(40, 8, 900, 898).bandwidth_source == "config"
    assert compute_ceiling(40, 8, None, 898).bandwidth_source == "nvml-formula"


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> tuple[str, float]:
    url = f"sqlite:///{tmp_path_factory.mktemp('peak')}/peak.db"
    start = float(int(time.time()) // 10 * 10 - 20)
    # the engine's byte counters and a configured peak, no weights (so no ceiling), no GPU source
    store(url, start, {"counters": (8, CeilingSettings(bandwidth_gbps=PEAK), True, False, 0.0)})
    return url, start + 10


def test_a_configured_peak_gives_the_engine_counters_an_mbu_without_a_ceiling(db):
    url, end = db
    f = Reader(url).window("counters", end, 60)
    assert f.ceiling is None  # no weights: no step model, no ceiling
    assert f.mbu_source == mbu.ENGINE and f.mbu is not None and f.mbu > 0
    # the series route reads the same peak
    cols = Reader(url).series_columns("counters", end - 120, end + 60, 10, fields=("mbu",))
    assert any(v is not None and v == pytest.approx(f.mbu, rel=0.2) for v in cols["mbu"])
    assert modelled(8) > 0  # the module's own figures stand
