"""The ceiling told truthfully, in Chromium: the MBU tile with its source, the renamed ceiling line,
the roofline on the Operating point page, and the banner for a ceiling below the measured step rate.

Three targets collected from the simulator's history by the real parsers and writer (tests/ui_db.py):
``demo`` with the reference inputs configured (40 GB, TP 8, 900 GB/s, a 70B Llama's KV bytes per
token); ``wrong``, the same engine with a ceiling of 400 GB on one GPU (2.25 steps/s at 900 GB/s, under
the steps the engine makes); ``bare``, no ceiling inputs and no GPU source.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from pathlib import Path

import pytest

from core.settings import CeilingSettings
from db.engine import open_engine
from db.rollup import rollup
from db.writer import Writer
from tests import ui_db
from tests.browser import CHROMIUM, SCREENSHOTS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"Debian's chromium is not installed at {CHROMIUM}"),
]

# the demo's inputs, and the 70B model's parameters for the compute roof (its AWQ kernels on the V100s'
# CUDA cores: fp16_cuda_core, 31.4 TFLOP/s from the datasheet table by the simulated GPUs' name)
REFERENCE = CeilingSettings(weight_gb=40.0, tensor_parallel=8, bandwidth_gbps=900.0, kv_bytes_per_token=327_680.0,
                            active_params_b=70.0)  # fmt: skip
WRONG = CeilingSettings(weight_gb=400.0, tensor_parallel=1, bandwidth_gbps=900.0)


def fill(path: Path, now: float) -> str:
    url = f"sqlite:///{path}"
    engine = open_engine(url)
    writer = Writer(engine)
    for name, ceiling in (("demo", REFERENCE), ("wrong", WRONG), ("bare", CeilingSettings())):
        settings = ui_db.target_settings(name)
        gpu = dataclasses.replace(settings.gpu, precision="fp16_cuda_core")
        writer.register_target(dataclasses.replace(settings, ceiling=ceiling, gpu=gpu))
        rounds = ui_db.simulated_rounds(name, now - 3600, now, 5.0, seed=1)
        if name == "bare":  # no GPU readings: no measured MBU either
            rounds = (dataclasses.replace(r, gpus=(), gpu_status=None) for r in rounds)
        writer.write_rounds(rounds)
    rollup(engine, now)
    engine.dispose()
    return url


@pytest.fixture(scope="module")
def base_url():
    from tests.browser import streamlit_server

    url = fill(Path(tempfile.mkdtemp(prefix="sweetspot-ceiling-")) / "sweetspot.db", time.time())
    with streamlit_server(url) as base:
        yield base


# (url path and query, charts expected, texts that must be visible, texts that must not)
PAGES = {
    "overview": ("/?target=demo", 1, ["MBU · 5m", "engine estimate, vLLM byte counters", "DRAM bandwidth · 5m",
                                      "DCGM DRAM active · ", "the model's bytes",
                                      "at most 180 steps/s: the report's ceiling"],
                 ["efficiency", "inputs are wrong", "measured (DCGM"]),
    "overview-wrong": ("/?target=wrong", 1, ["The ceiling's inputs are wrong", "targets[].ceiling.weight_gb"], []),
    "overview-bare": ("/?target=bare", 1, ["MBU · 5m", "unknown: set targets[].ceiling.weight_gb and tensor_parallel",
                                           "no NVML GPM (Hopper or newer) or DCGM DRAM_ACTIVE reading"],
                      ["steps/s: the report's ceiling"]),
    # both roofs, the compute roof with prefill at the 7 days' mix (app/traffic_mix.py): the served model's shape (70B AWQ) on the
    # V100s decodes on CUDA cores and prefills on tensor cores; the gap is against the attainable (issue 41)
    "operating-point": ("/operating_point?target=demo", 3, ["attainable: ", "of the attainable at", "compute roof: ",
                                                            "(datasheet: V100 SXM2, fp16_cuda_core (awq on sm70: decode on "
                                                            "CUDA cores), 31.4 TFLOP/s; prefill datasheet: V100 SXM2, "
                                                            "fp16_tensor (awq on sm70: prefill dequantised on tensor cores), "
                                                            "125 TFLOP/s; prefill at ",
                                                            "the roofs cross at", "one request: at most",
                                                            "% of attainable"],  # the sentence whole (it was cut at 200)
                        ["No roofline", "compute roof unknown", "compute roof 1,794"]),
    # no active parameters typed: the served model's shape gives them (typed settings win where set)
    "operating-point-wrong": ("/operating_point?target=wrong", 3, ["compute roof ", "prefill at "],
                              ["No roofline", "compute roof unknown"]),
    "operating-point-bare": ("/operating_point?target=bare", 3, ["No roofline: this target has no ceiling inputs"],
                             ["roofline (modelled bound)"]),
    "targets": ("/targets", 0, ["The ceiling's inputs are wrong", "none: no ceiling inputs", "327,680 B per token"], []),
}  # fmt: skip


@pytest.mark.parametrize("name", list(PAGES))
def test_the_ceiling_in_chromium(browser, base_url, name):
    from tests.browser import chart_layout, layout_defects, new_page, screenshot, wait_rendered

    path, charts, expected, absent = PAGES[name]
    page = new_page(browser)
    page.goto(base_url + path)
    wait_rendered(page, charts)
    for text in expected:  # waits for each (the script may still be streaming elements), fails after 20 s
        try:
            page.get_by_text(text).first.wait_for(timeout=20000)
        except Exception:  # the failure names the text and shows the page, not only the timeout
            raise AssertionError((text, page.inner_text("body")[:3000])) from None
    body = page.inner_text("body")
    for text in absent:
        assert text not in body, (text, body[:3000])
    page.wait_for_timeout(300)  # Vega lays out once more after the first draw
    defects = layout_defects(chart_layout(page))  # e.g. the roofline's label over the compute roof's
    screenshot(page, SCREENSHOTS / f"ceiling-{name}.png")
    assert page.locator('[data-testid="stException"]').count() == 0, body[:2000]
    assert defects == [], defects
    page.close()
