"""The pure parts behind "every view tells the truth at a glance" (issue 14): each test is a class
of defect a new user met, checked on the chart specs and helpers without a browser."""

from __future__ import annotations

import math
import time

import pytest

from app.formatting import ago, elapsed, gibibytes
from app.operating_point import sweeps_of
from app.ui import charts, time_range, url_params, widgets
from core import mbu
from core.settings import SweetSpotSettings
from db import mbu_figures
from db.results import GpuPoint, SweepRun, TargetInfo
from tests.builders import END, point, window

RULES = SweetSpotSettings(concurrency=16)  # configured: no default sweet spot any more


def values(spec, key="value"):
    return [r[key] for rows in spec["datasets"].values() for r in rows if key in r]


def y_scale(layer):
    return layer["encoding"]["y"]["scale"]


# -- a chart is never blank where the data exists ---------------------------------------------------
def rounds(start, end, every):
    return [point(float(ts)) for ts in range(int(start), int(end), every)]


def test_rounds_further_apart_than_the_step_are_bridged_not_broken():
    rows = charts.long_rows(rounds(END - 3600, END, 30), {"tokens_per_s": "tok/s"}, 10.0)
    assert not rows["value"].isna().any()  # every round joins the next: one unbroken line
    assert charts.bridges(rounds(END - 3600, END, 30), 10.0)
    assert not charts.bridges(rounds(END - 3600, END, 10), 10.0)


def test_a_collection_outage_still_breaks_the_line():
    points = rounds(END - 3600, END - 1800, 30) + rounds(END - 1200, END, 30)  # 10 min without a round
    rows = charts.long_rows(points, {"tokens_per_s": "tok/s"}, 10.0)
    assert rows["value"].isna().sum() == 1


def test_the_step_follows_the_rounds_spacing():
    assert time_range.data_step(rounds(END - 3600, END, 30), 10.0) == 30.0
    assert time_range.data_step(rounds(END - 3600, END, 5), 10.0) == 10.0
    # the facade returns every step; a step without data has None figures and does not count
    empty = [point(float(t), tokens_per_s=None) for t in range(int(END - 3600), int(END), 10) if t % 30]
    mixed = sorted(rounds(END - 3600, END, 30) + empty, key=lambda p: p.ts)
    assert time_range.data_step(mixed, 10.0, ("tokens_per_s",)) == 30.0


def test_the_caption_says_which_step_and_why():
    points = rounds(END - 3600, END, 30)
    text = widgets.step_text(points, charts.Frame(END - 3600, END, 30.0), 10.0)
    assert text.startswith("one point per 30s: the rounds are that far apart (a 10s step would leave gaps)")
    assert "bridge" in widgets.step_text(points, charts.Frame(END - 3600, END, 10.0), 10.0)


# -- axes follow the data --------------------------------------------------------------------------
def test_preemption_axis_follows_a_storm():
    frame = charts.Frame(END - 600, END, 60.0)
    storm = [point(END - 600 + 60 * i, preemptions_per_s=7.5 / 60) for i in range(10)]
    spec = charts.preemption_chart(storm, frame).to_dict()
    assert y_scale(spec["layer"][0])["domain"][1] >= max(values(spec)) == pytest.approx(7.5)
    quiet = charts.preemption_chart([point(END - 60, preemptions_per_s=0.1 / 60)], frame).to_dict()
    # from a little below 0: a step with none draws its red line above the x axis (issue 30)
    assert y_scale(quiet["layer"][0])["domain"] == [-charts.ZERO_PAD, 1.0]


def test_a_ttft_spike_keeps_the_slo_readable_on_a_log_axis():
    frame = charts.Frame(END - 86400, END, 300.0)
    points = [point(END - 86400 + 300 * i, ttft_p99_s=140.0 if i == 50 else 2.7) for i in range(288)]
    spec = charts.ttft_chart(points, frame, 3.0).to_dict()
    scale = y_scale(spec["layer"][0])
    assert scale["type"] == "log" and "log scale" in spec["title"]
    low, high = scale["domain"]
    data = [v for v in values(spec) if v is not None and not math.isnan(v)]
    assert low <= min(data) and high >= max(data) == 140.0  # nothing clipped
    assert low < 3.0 < high  # and the SLO inside, mid-plot on a log axis


def test_ttft_without_spikes_stays_linear_with_the_slo_in_view():
    frame = charts.Frame(END - 600, END, 60.0)
    spec = charts.ttft_chart([point(END - 60, ttft_p99_s=1.0, ttft_p95_s=0.8)], frame, 3.0).to_dict()
    scale = y_scale(spec["layer"][0])
    assert "type" not in scale and scale["domain"][0] == 0 and scale["domain"][1] >= 3.0


def test_operating_point_ttft_axis_covers_dots_reference_and_sweeps():
    points = [point(END - 60 * i, running_avg=40.0, ttft_p95_s=90.0 if i == 3 else 2.0) for i in range(10)]
    spec = charts.operating_point_chart(points, "ttft_p95_s", "TTFT P95 (s)", charts.REFERENCE_TTFT_P95,
                                        (), (), "t", slo_s=3.0).to_dict()  # fmt: skip
    scale = y_scale(spec["layer"][0])
    assert scale["type"] == "log" and scale["domain"][0] <= 1.5 and scale["domain"][1] >= 90.0
    assert any(layer.get("mark", {}).get("type") == "rule" and layer["encoding"]["y"]["field"] == "value"
               for layer in spec["layer"])  # fmt: skip


# -- GPUs ------------------------------------------------------------------------------------------
def gpus(n=8, ts=(END - 120, END - 60)):
    return [GpuPoint(t, f"GPU-{i}", 29.5 * 2**30, 32 * 2**30, 70.0, 60.0 + i, 540.0 + i, 240.0, 60.0)
            for t in ts for i in range(n)]  # fmt: skip


def test_gpu_chart_is_the_mean_with_a_min_max_band_and_the_peak():
    frame = charts.Frame(END - 300, END, 60.0)
    names = {f"GPU-{i}": f"#{i}" for i in range(8)}
    spec = charts.gpu_chart(gpus(), frame, "dram_bw_gbps", "DRAM bandwidth", "GB/s", names, peak=900.0).to_dict()
    (rows,) = [r for r in spec["datasets"].values() if "mean" in r[0]]
    assert rows[0]["low"] == 540.0 and rows[0]["high"] == 547.0 and rows[0]["mean"] == pytest.approx(543.5)
    assert "peak 900 GB/s" in str(spec) and "min–max" in spec["title"]["subtitle"]
    one = charts.gpu_chart(gpus(), frame, "dram_bw_gbps", "DRAM bandwidth", "GB/s", names, pick="GPU-3").to_dict()
    (rows,) = [r for r in one["datasets"].values() if "mean" in r[0]]
    assert {r["mean"] for r in rows} == {543.0}


def test_memory_is_in_gib_as_nvidia_counts_it():
    assert gibibytes(32 * 2**30) == "32 GiB"  # a "32 GB" V100, not "34.4 GB"
    assert gibibytes(None) == "—"


# -- sweeps belong to the server they measured -----------------------------------------------------
def target(name="demo", url="http://127.0.0.1:8000/metrics"):
    return TargetInfo(name, url, True, END, None, {}, (), (), (), "dcgm", "none", None)


def sweep(url, tgt=None):
    return SweepRun(END, url, "m", "mixed", 3.0, (), target=tgt)


def test_sweeps_of_a_target_by_name_or_by_server():
    named, older, other = sweep("http://x:1/v1", "demo"), sweep("http://127.0.0.1:8000/v1"), sweep("http://10.0.0.9:8000/v1")
    mine, others = sweeps_of(target(), [named, older, other])
    assert mine == [named, older] and others == [other]
    assert "10.0.0.9:8000" in charts._sweep_name(other)  # legend: what it measured
    assert charts.sweep_source(named) == "target demo (http://x:1/v1)"


# -- banners, ages, URL --------------------------------------------------------------------------
def test_in_the_sweet_spot_but_under_loaded_says_why():
    note = widgets.load_note(window(running_avg=10.0, queue_depth_max=0.0, waiting_max=0.0, mbu=0.49), RULES)
    assert note == "under-loaded: 10 running of 16, no queue: room for more traffic (MBU 49 % (modelled, steps/s × bytes per step))"
    assert widgets.load_note(window(), RULES) == ""  # at the sweet spot: nothing to explain
    assert widgets.load_note(window(running_avg=2.0), SweetSpotSettings()) == ""  # no sweet spot: no "of 16"
    assert "queue" in widgets.load_note(window(running_avg=10.0, queue_depth_max=5.0), RULES)


def test_event_ages_follow_one_rule():
    now = END
    assert (ago(now - 5399, now), ago(now - 5479, now)) == ("1 h 29 min ago", "1 h 31 min ago")  # 80 s apart
    assert [elapsed(s) for s in (45, 80, 3600, 90000)] == ["45 s", "1 min 20 s", "1 h", "1 d 1 h"]


def test_unknown_url_parameters_are_named_with_the_fallback():
    choices = {"target": ["demo", "edge"], "range": list(time_range.RANGES), "window": list(time_range.WINDOWS)}
    notices = url_params.url_notices({"target": "nope", "range": "bogus", "window": "5m", "colour": "red"}, choices)
    assert notices[0].startswith("URL parameter `target=nope` is not one of demo, edge: showing `demo`")
    assert notices[1].endswith("showing `1h`.")
    assert "`colour` is unknown" in notices[2] and len(notices) == 3
    # what the Query page reads itself is known, not a notice
    assert url_params.url_notices({"canned": "ttft_per_day", "p.target": "demo", "sql": "SELECT 1"}, choices) == []


def test_a_past_range_says_its_span_and_steps_by_its_rollups():
    start = time.mktime((2026, 11, 28, 16, 0, 0, 0, 0, -1))
    span = time_range.resolve("custom", start + 5 * 86400, (start, start + 3600), (48 * 3600, 90 * 86400))
    assert time_range.over_text(span, 300) == "over 2026-11-28 16:00–17:00"
    assert span.step_s == 60 and time_range.level_of(span.step_s) == 60  # raw rows are gone: minute rollups
    recent = time_range.resolve("custom", start + 3600, (start, start + 3600), (48 * 3600, 90 * 86400))
    assert recent.step_s == 10
    assert time_range.over_text(time_range.resolve("1h", END), 300) == "over the last 5m"


def test_a_window_past_the_raw_retention_is_read_from_the_rollups(tmp_path):
    from app.verdict import no_data_reason
    from core.settings import Settings
    from db.engine import open_engine
    from db.queries import Reader
    from db.rollup import apply_retention
    from tests import ui_db

    now = time.time()
    url = ui_db.fill(tmp_path / "old.db", now - 4 * 86400, hours=1.0, step_s=30.0)
    engine = open_engine(url)
    apply_retention(engine, now, Settings())  # the raw rows of four days ago are gone
    engine.dispose()
    # ten minutes before the history's end: rolled up, so its raw rows went with the retention
    reader, end = Reader(url), math.floor((now - 4 * 86400 - 600) / 60) * 60
    assert reader.window("demo", end, 1800).up is None  # raw rows: "never scraped", the defect
    figures = reader.window("demo", end, 1800, level=60)  # the level a 1 h past range's charts read
    assert figures.up is True and figures.tokens_per_s and no_data_reason(figures) == ""


# -- MBU, the ceiling's provenance, the per-step check --------------------------------------------
def test_mbu_tile_names_its_source_and_holds_every_source_and_the_models_inputs():
    f = window(mbu=0.04, mbu_source=mbu.MODELLED, mbu_engine=None, mbu_modelled=0.04, steps_per_s=4.5,
               mean_context_tokens=1234.0, kv_resident_tokens_avg=19_000.0, engines_max=1.0,
               mbu_kv_source=mbu_figures.KV_RESIDENT)  # fmt: skip
    tile = widgets.mbu_tile(f, RULES)
    assert (tile.label, tile.value, tile.context) == ("MBU · 5m", "4 %", "modelled, steps/s × bytes per step")  # a figure, no floor
    assert "Sources: engine estimate — · modelled 4 %." in tile.help and "measured" not in tile.help
    assert ("Model: 40 GB ÷ TP 8 at 900 GB/s (config); KV 327,680 B per token (config); 4.5 steps/s over 1 engine(s), "
            "15.5 running; KV tokens 19,000 resident, mean context 1,234 tokens; KV term: KV cache resident") in tile.help  # fmt: skip
    assert "--api-server-count > 1" in tile.help
    assert tile in widgets.kpi_tiles(f, RULES)


def test_dram_tile_is_the_gpus_reading_with_the_overhead_traffic_beside_mbu():
    f = window(mbu=0.139, dram_bw_util=0.775, dram_bw_source=mbu.DRAM_GPM, overhead_traffic_gbps=3061.9, overhead_ratio=5.58)
    tile = widgets.dram_tile(f)
    assert (tile.label, tile.value) == ("DRAM bandwidth · 5m", "78 %")
    assert tile.context == "NVML GPM · 3,062 GB/s per GPU beyond the model's bytes (5.6×)"
    assert "KV-cache copies" in tile.help and "unfused kernels" in tile.help
    assert tile in widgets.kpi_tiles(f, RULES)
    bare = widgets.dram_tile(window(dram_bw_util=None, dram_bw_source=None))
    assert (bare.value, bare.context) == ("—", "no NVML GPM (Hopper or newer) or DCGM DRAM_ACTIVE reading")


def test_mbu_tile_without_a_source_says_which_setting_adds_one():
    bare = widgets.mbu_tile(window(mbu=None, mbu_source=None, ceiling=None), RULES)
    assert (bare.value, bare.context) == ("—", "unknown: set targets[].ceiling.weight_gb and tensor_parallel")
    no_steps = widgets.mbu_tile(window(mbu=None, mbu_source=None, steps_per_s=None), RULES)
    assert no_steps.context.startswith("unknown: no step rate")
    assert widgets.mbu_tile(window(mbu=None, mbu_source=None, steps_per_s=4.5), RULES).context == "no bandwidth source"


def test_targets_show_the_ceilings_inputs_with_their_provenance_or_none():
    from tests.builders import CEILING

    info = TargetInfo("demo", "http://x/metrics", True, END, None, {}, (), (), (), "dcgm", "none", CEILING)
    text = widgets.ceiling_text(info)
    assert "**at most 180 decode steps/s**" in text
    assert "- weights: 40 GB (config) · tensor parallel: 8 (config)" in text
    assert "- bandwidth: 900 GB/s per GPU (config)" in text and "- KV cache: 327,680 B per token (config)" in text
    none = widgets.ceiling_text(TargetInfo("bare", "http://x/metrics", True, END, None, {}, (), (), (), "dcgm", "none", None))
    assert none == "Ceiling: none: no ceiling inputs (set targets[].ceiling.weight_gb and tensor_parallel)"


def test_the_running_tile_names_the_targets_own_sweet_spot_and_its_source():
    from app.sweet_spot import SweetSpot

    def running(spot, rules=None):
        tiles = widgets.kpi_tiles(window(), rules or SweetSpotSettings(), spot)
        return next(t for t in tiles if t.label.startswith("Running"))

    learned = running(SweetSpot(17, "learned", "learned: 90% of its plateau (150 tok/s) at 22, from 1,440 minutes"))
    assert learned.context == "max 16 · sweet spot 17 (learned)" and "from 1,440 minutes" in learned.help
    unknown = running(SweetSpot(None, None, "unknown"))
    assert unknown.context == "max 16 · sweet spot unknown" and "16" not in unknown.help
    assert "run a load sweep: `python -m app sweep --target NAME`; import benchmark results" in unknown.help
    assert running(None, RULES).context == "max 16 · sweet spot 16 (configured)"
