from __future__ import annotations

import dataclasses
import json
import math

import pytest

from app.ui import chart_cache, charts, time_range
from core.settings import Settings, SweetSpotSettings
from db.results import CeilingInfo, GpuPoint
from tests.builders import END, point

FRAME = charts.Frame(END - 300, END, 60.0)


def test_missing_steps_become_gaps_not_zeros():
    points = [point(END - 300), point(END - 240), point(END - 60)]  # steps -180 and -120 missing
    rows = charts.long_rows(points, {"tokens_per_s": "tok/s"}, 60.0)
    assert list(rows["time"]) == [(END - 300) * 1000, (END - 240) * 1000, (END - 180) * 1000, (END - 60) * 1000]
    assert math.isnan(rows["value"][2])
    assert rows["value"][3] == 126.0


def test_none_figures_are_gaps_never_zeros():
    points = [point(END - 120), point(END - 60, ttft_p95_s=None), point(END)]
    rows = charts.long_rows(points, {"ttft_p95_s": "P95"}, 60.0)
    assert 0.0 not in list(rows["value"])
    assert list(rows["time"]) == [(END - 120) * 1000, (END - 60) * 1000, END * 1000]
    assert math.isnan(rows["value"][1])  # the step without a value breaks the line


def test_lines_break_at_gaps_and_share_one_domain():
    spec = charts.ttft_chart([point(END - 60)], FRAME, 3.0).to_dict()
    line = spec["layer"][0]
    assert line["mark"]["invalid"] == "break-paths-show-domains"
    assert line["encoding"]["x"]["scale"]["domain"] == FRAME.domain
    assert FRAME.domain == ["2027-01-15T07:55:00+00:00", "2027-01-15T08:00:00+00:00"]  # ISO: Streamlit reads it right
    assert "SLO 3 s" in spec["title"]


def test_ceiling_line_is_named_for_what_it_bounds_with_its_inputs():
    ceiling = CeilingInfo(180.0, 40.0, 8, 900.0, "config")
    assert charts.ceiling_label(ceiling) == "at most 180 steps/s: the report's ceiling (900 GB/s ÷ (40 GB ÷ TP 8))"
    spec = charts.throughput_chart([point(END - 60)], FRAME, ceiling).to_dict()
    labels = [row["label"] for data in spec["datasets"].values() for row in data if "label" in row]
    assert labels == [charts.ceiling_label(ceiling)], "the ceiling line carries its label"
    assert "bounds decode steps/s, not tok/s" in spec["title"]
    # no "% of the ceiling" band: a share of a steps bound in tok/s is no measure of what systems reach
    assert "%" not in spec["title"] and "efficiency" not in json.dumps(spec)
    bare = charts.throughput_chart([point(END - 60)], FRAME, None).to_dict()
    assert bare["title"].endswith("no ceiling line: no ceiling inputs")


def roofline_spec(roofline: list[tuple[float, float]], tokens: float = 145.0) -> dict:
    points = [point(END - 60, running_avg=32.0, tokens_per_s=tokens)]
    return charts.operating_point_chart(points, "tokens_per_s", "output tok/s", charts.REFERENCE_TOKENS,
                                        roofline=roofline).to_dict(validate=True)  # fmt: skip


def test_roofline_is_a_labelled_line_on_a_log_axis_when_far_above_the_measurements():
    spec = roofline_spec([(1.0, 178.5), (32.0, 4563.7)])
    texts = [row.get("text") for data in spec["datasets"].values() for row in data]
    assert "bandwidth roofline (modelled bound): 4,564 at 32" in texts
    scales = [layer["encoding"]["y"].get("scale") for layer in spec["layer"] if "y" in layer.get("encoding", {})]
    assert scales[0]["type"] == "log" and scales[0]["domain"] == pytest.approx([85 * 0.8, 4563.7 * 1.25])
    assert spec["layer"][0]["encoding"]["y"]["title"] == "output tok/s (log scale)"
    # within 4× the measurements the axis stays linear from 0
    near = roofline_spec([(1.0, 100.0), (32.0, 400.0)])
    assert near["layer"][0]["encoding"]["y"]["scale"] == {"domainMin": 0}


def test_per_request_chart_draws_both_speeds_and_one_requests_bound():
    from app.operating_point import request_speeds

    speeds = request_speeds([point(END - 60, running_avg=32.0, tokens_per_s=145.0, itl_p95_s=0.25)])
    spec = charts.per_request_chart(speeds, 178.54, "t").to_dict(validate=True)
    rows = [row for data in spec["datasets"].values() for row in data]
    assert {(r.get("series"), r.get("value")) for r in rows if "series" in r} == {("tok/s ÷ running", 145 / 32),
                                                                                   ("1 ÷ ITL P95", 4.0)}  # fmt: skip
    assert "one request: at most 179 tok/s (the roofline at 1)" in {r.get("label") for r in rows}
    assert charts.per_request_chart(speeds, None, "t").to_dict(validate=True)["layer"][0]["mark"]["type"] == "circle"


def test_kv_chart_is_in_percent_with_both_thresholds():
    spec = charts.kv_chart([point(END - 60)], FRAME, 0.9, 0.98).to_dict()
    rules = [layer["encoding"]["y"] for layer in spec["layer"][1:]]
    assert len(rules) == 2
    assert "warning 90 %" in spec["title"] and "critical 98 %" in spec["title"]


def test_preemptions_are_per_minute_whatever_the_step():
    frame = charts.Frame(END - 60, END, 5.0)
    spec = charts.preemption_chart([point(END - 10, preemptions=2.0, preemptions_per_s=0.4)], frame).to_dict()
    bars, runs = spec["datasets"].values()
    assert bars[0]["value"] == pytest.approx(24.0)  # 2 in 5 s
    assert runs == []  # no step without preemptions


def test_preemption_bars_only_where_there_were_preemptions():
    points = [point(END - 180, preemptions_per_s=0.0), point(END - 120, preemptions_per_s=None), point(END - 60, preemptions_per_s=0.1)]
    spec = charts.preemption_chart(points, FRAME).to_dict()
    bars, runs = spec["datasets"].values()
    assert [row["time"] for row in bars] == [(END - 60) * 1000]
    # the step with none is a red run at 0 (drawn above the x axis: the scale starts below 0), the
    # step without data none
    assert [(row["time"], row["end"], row["value"]) for row in runs] == [((END - 180) * 1000, (END - 180) * 1000, 0.0)]
    assert spec["layer"][0]["encoding"]["y"]["scale"]["domain"][0] < 0


def test_a_run_of_steps_without_preemptions_is_one_row_and_a_gap_ends_it():
    points = [point(END - 240 + 60 * i, preemptions_per_s=v) for i, v in enumerate([0.0, 0.0, None, 0.0, 0.2])]
    data = charts.long_rows(points, charts.PREEMPTION_LINES, 60.0, 60.0)
    runs = charts.zero_runs(data)
    assert list(zip(runs["time"], runs["end"], strict=True)) == [((END - 240) * 1000, (END - 180) * 1000),
                                                                  ((END - 60) * 1000, (END - 60) * 1000)]  # fmt: skip


def test_threshold_lines_leave_the_label_gutter_free():
    spec = charts.hline(16, FRAME).to_dict()
    assert spec["encoding"]["x"] == {"value": charts.GUTTER} and spec["encoding"]["x2"] == {"value": "width"}


def test_concurrency_axis_ends_past_its_points_with_few_ticks():
    x = charts.concurrency_x([2.4, 3.0, 3.2]).to_dict()
    assert x["scale"]["domain"] == [0, 5] and x["axis"]["tickCount"] == charts.CONCURRENCY_TICKS
    assert charts.concurrency_x([32]).to_dict()["scale"]["domain"] == [0, 50]
    assert charts.concurrency_x([9.0]).to_dict()["scale"]["domain"] == [0, 10]


def test_steps_keep_every_range_under_five_hundred_points():
    for length in time_range.RANGES.values():
        step = time_range.nice_step(length)
        assert 150 <= length / step <= 500
    assert time_range.nice_step(900) == 5
    assert time_range.nice_step(3600) == 10
    assert time_range.nice_step(86400) == 300
    assert time_range.nice_step(30 * 86400) == 7200  # a multiple of the hourly rollups


def test_relative_ranges_end_on_a_step_boundary():
    span = time_range.resolve("24h", now=END + 17)
    assert (span.step_s, span.end % span.step_s, span.end - span.start) == (300.0, 0.0, 86400.0)
    assert span.live and span.at == END + 17
    custom = time_range.resolve("custom", now=END, custom=(END - 7200, END - 3600))
    assert not custom.live and custom.at == END - 3600


def test_every_builder_makes_a_valid_vega_lite_spec():
    # The app serialises without validation (app/ui/chart_cache.py) for speed; this is where specs are checked.
    from db.results import SweepLevel, SweepRun

    ceiling = CeilingInfo(180.0, 40.0, 8, 900.0, "config")
    points = [point(END - 120), point(END - 60)]
    gpus = [GpuPoint(END - 60, "GPU-1", 29e9, 34e9, 60.0, 45.0, 400.0, 200.0, 55.0)]
    level = SweepLevel(16, 600, 90, 0, 126.0, 0.4, 0.9, 2.5, 2.8, 0.08, 40.0, 60.0, 0.0)
    sweep = SweepRun(END - 86400, "http://127.0.0.1:8000", "m", "mixed", 3.0, (level,))
    specs = [
        charts.ttft_chart(points, FRAME, 3.0),
        charts.throughput_chart(points, FRAME, ceiling),
        charts.throughput_chart(points, FRAME, None),
        charts.preemption_chart(points, FRAME),
        charts.concurrency_chart(points, FRAME, 16),
        charts.kv_chart(points, FRAME, 0.9, 0.98),
        charts.overview_chart(points, FRAME, points, FRAME, Settings().sweetspot, ceiling),
        charts.gpu_chart(gpus, FRAME, "dram_bw_gbps", "DRAM bandwidth", "GB/s", {"GPU-1": "#0"}),
        charts.operating_point_chart(
            points, "tokens_per_s", "tok/s", charts.REFERENCE_TOKENS, [sweep], [(16, "x")], "t"
        ),
    ]
    for chart in specs:
        assert chart.to_dict(validate=True)["$schema"].startswith("https://vega.github.io/schema/vega-lite/")


def test_layers_built_without_altairs_lifting_make_the_same_spec(monkeypatch):
    """charts._layer and charts._with skip Altair's constructor, which deep-copies every layer to lift
    parameters, data and sizes (most of the Overview's cold spec): the spec is the one Altair's own
    constructor makes, for the Overview with epochs marked and for a chart whose layer is sized."""
    import altair as alt

    from db.results import ConfigEpoch

    ceiling = CeilingInfo(180.0, 40.0, 8, 900.0, "config")
    points = [point(END - 120), point(END - 60)]
    restart = [ConfigEpoch("t", END - 90, "restart", {})]

    def built() -> list[str]:
        sized = charts._layer(alt.Chart().mark_rule().properties(height=40), alt.Chart().mark_point())
        return [json.dumps(c.to_dict(validate=True), sort_keys=True) for c in (
            charts.overview_chart(points, FRAME, points, FRAME, Settings().sweetspot, ceiling, epochs=restart),
            charts.operating_point_chart(points, "tokens_per_s", "tok/s", charts.REFERENCE_TOKENS, [], [(16, "x")], "t"),
            sized)]  # fmt: skip

    lean = built()
    monkeypatch.setattr(charts, "_layer", lambda *layers: alt.LayerChart(layer=list(layers)))

    def altair_with(chart, **properties):  # type: ignore[no-untyped-def]
        out = chart.copy(deep=False)
        for key, value in properties.items():
            setattr(out, key, value)
        return out

    monkeypatch.setattr(charts, "_with", altair_with)
    assert built() == lean
    assert '"height": 40' in lean[2]  # the sized layer went through Altair's lifting: its height on the parent


def overview(ttft_step: float = 60.0) -> dict:
    ceiling = CeilingInfo(180.0, 40.0, 8, 900.0, "config")
    points = [point(END - 120), point(END - 60)]
    ttft_frame = charts.Frame(FRAME.start, FRAME.end, ttft_step)
    chart = charts.overview_chart(points, FRAME, points, ttft_frame, Settings().sweetspot, ceiling)
    return chart.to_dict(validate=True)


def test_overview_is_one_chart_of_eight_panels_on_one_time_axis():
    # One Vega view, not eight: most of what the Overview costs the browser (docs/benchmarks.md, Dashboard).
    spec = overview()
    titles = [panel["title"] for panel in spec["vconcat"]]
    assert [t.split(",")[0].split(" per")[0] for t in titles] == [
        "Time to first token", "Output tokens", "Model bandwidth utilisation (MBU)", "Preemptions", "Running (avg)", "KV-cache usage", "Prefix-cache hit rate",
        "Requests finished",
    ]  # fmt: skip
    assert spec["resolve"]["scale"] == {"x": "shared", "color": "independent"}
    # Every panel can pan/zoom in time (its own scale-bound interval on x); the shared x scale moves all.
    zooms = {param["views"][0]: param for param in spec["params"]}
    assert len(zooms) == 8
    for panel in spec["vconcat"]:
        first = panel["layer"][0] if "layer" in panel else panel
        zoom = zooms[first["name"]]
        assert zoom["bind"] == "scales" and zoom["select"] == {"type": "interval", "encodings": ["x"]}
        assert first["encoding"]["x"]["type"] == "temporal", "a scale-bound zoom needs a time field in its layer"


def test_overview_ttft_may_have_its_own_step_on_the_same_axis():
    spec = overview(ttft_step=300.0)
    assert "per 5m" in spec["vconcat"][0]["title"] and "per 1m" in spec["vconcat"][1]["title"]


def test_time_charts_skip_per_point_aria_descriptions():
    # ~0.3 s of browser CPU on the Overview (docs/benchmarks.md, Dashboard); titles and axes stay.
    assert overview()["config"]["mark"]["aria"] is False
    gpus = [GpuPoint(END - 60, "GPU-1", 29e9, 34e9, 60.0, 45.0, 400.0, 200.0, 55.0)]
    gpu = charts.gpu_chart(gpus, FRAME, "power_w", "Power", "W", {"GPU-1": "#0"}).to_dict()
    assert gpu["config"]["mark"]["aria"] is False


def test_cached_specs_carry_arrow_bytes():
    spec = chart_cache.spec(charts.kv_chart, [point(END - 60)], FRAME, 0.9, 0.98)
    assert spec["datasets"] and all(isinstance(rows, bytes) for rows in spec["datasets"].values())


BUILT: list[tuple[object, ...]] = []


def counted_kv_chart(*args: object) -> object:
    """kv_chart, counting its calls: a builder at module level, as the app's are (a pickle names it)."""
    BUILT.append(args)
    return charts.kv_chart(*args)  # type: ignore[arg-type]


def other_kv_chart(*args: object) -> object:
    BUILT.append(("other", *args))
    return charts.kv_chart(*args)  # type: ignore[arg-type]


def test_the_chart_cache_is_keyed_by_the_values_of_its_inputs():
    import streamlit as st

    st.cache_data.clear()
    BUILT.clear()
    first = chart_cache.spec(counted_kv_chart, [point(END - 60, kv_cache_usage_max=0.5)], FRAME, 0.9, 0.98)
    # equal values built anew: the same chart, not built again
    again = chart_cache.spec(counted_kv_chart, [point(END - 60, kv_cache_usage_max=0.5)], FRAME, 0.9, 0.98)
    assert len(BUILT) == 1 and again == first
    # one field of one record differs: another chart (a key of hash() or repr() may miss such a change)
    other = chart_cache.spec(counted_kv_chart, [point(END - 60, kv_cache_usage_max=0.7)], FRAME, 0.9, 0.98)
    assert len(BUILT) == 2 and other["datasets"] != first["datasets"]
    # the same arguments to another builder: built by that builder, not taken from the first's
    chart_cache.spec(other_kv_chart, [point(END - 60, kv_cache_usage_max=0.5)], FRAME, 0.9, 0.98)
    assert len(BUILT) == 3 and BUILT[-1][0] == "other"


def test_outcomes_are_per_minute_by_reason_with_the_rejections():
    frame = charts.Frame(END - 60, END, 5.0)
    p = point(END - 10, finished_stop_per_s=0.5, finished_length_per_s=0.1, finished_abort_per_s=0.05,
              finished_error_per_s=None, admission_rejections_per_s=0.2)
    spec = charts.outcomes_chart([p], frame).to_dict()
    (values,) = spec["datasets"].values()
    got = {v["series"]: v["value"] for v in values}
    # per minute (×60); a reason the engine does not expose is no line at all, never a zero
    assert got == pytest.approx({"stop": 30.0, "length": 6.0, "abort": 3.0, "rejected (503)": 12.0})
    assert "HTTP 503" in spec["title"] and "req/min" in spec["title"]
    # the Overview draws it (its panels come from charts.PANELS, in charts.OVERVIEW's order)
    assert "outcomes" in charts.OVERVIEW and charts.PANELS["outcomes"].lines is charts.OUTCOMES
    overview = charts.overview_chart([p], frame, [p], frame, SweetSpotSettings(), None).to_dict()
    assert "HTTP 503" in str(overview["vconcat"][charts.OVERVIEW.index("outcomes")]["title"])


def test_the_engine_note_names_only_the_figures_the_engine_exposes():
    from app.ui import widgets
    from tests.builders import window

    assert widgets.engine_note(window()) == ""  # an engine without them: no line at all, never zeros
    note = widgets.engine_note(window(waiting_capacity_max=3.0, waiting_deferred_max=1.0, spec_decode_acceptance_rate=0.714,
                                      spec_decode_mean_acceptance_length=2.4, lora_running_adapters_max=2.0,
                                      lora_waiting_adapters_max=0.0, sleep_state="weights_offloaded"))  # fmt: skip
    assert note == ("Engine: most requests waiting for KV-cache space 3, held back by the scheduler 1 · speculative decoding: 71 % of draft tokens "
                    "accepted, 2.4 tokens per draft · LoRA adapters: 2 running, 0 waiting (max) · asleep (weights offloaded)")
    assert widgets.engine_note(window(sleep_state="awake")) == ""


def test_a_prefix_cache_panel_without_data_says_why():
    blank = charts.prefix_cache_chart([point(END - 60)], FRAME).to_dict()
    assert "no data, the engine exposes no prefix-cache counters" in blank["title"]
    drawn = charts.prefix_cache_chart([point(END - 60, prefix_cache_hit_rate=0.4)], FRAME).to_dict()
    assert "no data" not in drawn["title"]
    # vLLM exposes the counters with prefix caching off too (they stay 0): the reason is read from its config
    off = charts.prefix_cache_chart([point(END - 60)], FRAME, prefix_caching=False).to_dict()
    assert off["title"].endswith("no data, prefix caching is off in the engine's config (--enable-prefix-caching)")
    stacked = charts.overview_chart([point(END - 60)], FRAME, [point(END - 60)], FRAME, SweetSpotSettings(), None,
                                    prefix_caching=False).to_dict()  # fmt: skip
    assert "prefix caching is off" in json.dumps(stacked)


def test_the_engine_config_says_whether_prefix_caching_is_on():
    from db.results import TargetInfo

    fields = {f.name: None for f in dataclasses.fields(TargetInfo) if f.default is dataclasses.MISSING
              and f.default_factory is dataclasses.MISSING}  # fmt: skip
    info = TargetInfo(**fields)
    assert info.prefix_caching is None  # the engine does not say
    assert dataclasses.replace(info, cache_config={"enable_prefix_caching": "False"}).prefix_caching is False
    assert dataclasses.replace(info, cache_config={"enable_prefix_caching": "True"}).prefix_caching is True


def test_mbu_panel_names_its_source_and_the_threshold_and_says_why_it_is_empty():
    spec = charts.mbu_chart([point(END - 60, mbu=0.23)], FRAME, 0.3, "modelled (steps/s × bytes per step)").to_dict(validate=True)
    assert spec["title"].endswith("(%): modelled (steps/s × bytes per step) · red dashes: min_mbu 30 %")
    # the Overview's panel: a figure, no threshold (no default rule has an MBU floor)
    bare = charts.mbu_chart([point(END - 60, mbu=0.23)], FRAME, None, "modelled (steps/s × bytes per step)").to_dict(validate=True)
    assert bare["title"].endswith("(%): modelled (steps/s × bytes per step)") and "min_mbu" not in json.dumps(bare)
    rows = [row for data in spec["datasets"].values() for row in data]
    assert [r["value"] for r in rows if r.get("series") == "MBU"] == [pytest.approx(23.0)]
    both = charts.mbu_chart([point(END - 60, mbu=0.139, dram_bw_util=0.775)], FRAME, 0.3, "engine estimate").to_dict()
    rows = [row for data in both["datasets"].values() for row in data]
    assert [r["value"] for r in rows if r.get("series") == "DRAM (GPU reading)"] == [pytest.approx(77.5)]
    assert [r["value"] for r in rows if r.get("series") == "MBU"] == [pytest.approx(13.9)]
    assert both["title"].startswith("MBU and DRAM bandwidth")
    empty = charts.mbu_chart([point(END - 60)], FRAME, 0.3, "no bandwidth source").to_dict(validate=True)
    assert empty["title"].endswith("(%): no data, the MBU tile says why")


def test_a_users_mbu_rule_draws_mbu_against_min_mbu_in_its_email():
    # no default rule has an MBU floor since issue 28; a rule a user writes over mbu and min_mbu
    # declares the MBU panel: its e-mail's chart draws MBU against the threshold
    from app.alerts.model import AlertState
    from app.alerts.rules import declared
    from app.notify import images
    from core.settings import AlertsSettings, RuleSettings

    class Reader:
        def series(self, *args, fields=None, **kwargs):
            assert fields == ("mbu", "dram_bw_util")  # the panel draws the GPUs' DRAM reading beside MBU
            return [point(END - 120, mbu=0.12), point(END - 60, mbu=0.1)]

    assert declared(Settings(), "t", "efficiency") is None  # retired from the defaults
    mine = Settings(alerts=AlertsSettings(rules=(RuleSettings(name="efficiency", expr="mbu", op="<", threshold="min_mbu",
                                                              when="queued > 0", panel="mbu"),)))  # fmt: skip
    state = AlertState("efficiency", "t", "", "firing", "warning", int(END), int(END), threshold=0.3)
    rule = declared(mine, "t", "efficiency")
    assert rule is not None and rule.panel == "mbu"  # the rule declares its panel
    spec = images._spec(Reader(), Settings(), state, rule.panel, END)
    assert spec is not None and spec["title"].startswith("Model bandwidth utilisation (MBU)")
    assert spec["title"].endswith("red dashes: min_mbu 30 %")


def test_stack_is_what_altairs_own_methods_build():
    # stack() makes the chart in one constructor call and adds each zoom on a shallow copy, to spare
    # Altair's repeated deep copies (docs/benchmarks.md, the first paint): the spec must be the same.
    import altair as alt

    ceiling = CeilingInfo(180.0, 40.0, 8, 900.0, "config")
    points = [point(END - 180), point(END - 120, tokens_per_s=None), point(END - 60)]
    against = charts.Against(SweetSpotSettings(concurrency=16), ceiling)
    panels = [charts.PANELS[name].draw(points, FRAME, against) for name in charts.OVERVIEW]
    zoomable = [p.add_params(alt.selection_interval(bind="scales", encodings=["x"], name=f"zoom{i}"))
                for i, p in enumerate(panels)]  # fmt: skip
    reference = (
        alt.vconcat(*zoomable, spacing=24).properties(padding={"left": 0, "right": 0, "top": 5, "bottom": 5})
        .resolve_scale(x="shared", color="independent").configure_mark(aria=False)
    )  # fmt: skip
    assert charts.stack(*panels).to_dict() == reference.to_dict()
def test_the_alerts_timeline_says_its_span_in_words_with_few_time_labels():
    import pandas as pd

    from app.ui import alert_views

    rows = pd.DataFrame([{"alert": "edge · target_down", "state": "firing", "start": (END - 172.943) * 1000, "end": END * 1000}])
    spec = alert_views.timeline_chart(rows, END - 86400, END).to_dict()
    assert spec["title"].endswith("(12 min 52 s shown)"), spec["title"]  # it read "(772.943s shown)"
    axis = spec["encoding"]["x"]["axis"]
    assert axis["tickCount"] <= 12 and axis["labelOverlap"] and axis["labelSeparation"] >= 40
    assert axis["format"] == charts.TIME_FORMAT  # one clock: Vega's own wrote "08:58", "09 AM", "09:02"
    # with two rows of bars (40 px) the states' legend beside them was cut: it sits above, in a row
    legend = spec["encoding"]["color"]["legend"]
    assert (legend["orient"], legend["direction"]) == ("top", "horizontal")
