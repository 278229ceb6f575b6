"""Engine figures where a user looks: verdict for a sleeping engine, KV tile, traffic texts, Targets rows."""

from __future__ import annotations

from app.sweet_spot import SweetSpot
from app.ui import traffic, widgets
from app.verdict import IN_SWEET_SPOT, NO_DATA, OUTSIDE, WARNING, evaluate
from core.settings import SweetSpotSettings
from db.results import GpuFigures, SeriesPoint, TargetInfo
from tests.builders import window

RULES = SweetSpotSettings()
# A sweet spot with its curve: without one the verdict cannot tell (app/verdict.py judgement), and these
# tests are about what the engine's state and its finished-request rates make of a judged window.
SPOT = SweetSpot(16, "sweep", "the knee of a sweep", ((8.0, 85.0), (16.0, 126.0), (32.0, 145.0)), "sweep")


def _gpu(gbps: float | None, index: int = 0) -> GpuFigures:
    return GpuFigures(f"GPU-{index}", index, "Tesla V100-SXM2-32GB", "h", 30e9, 34e9, 40.0, None if gbps is None else 60.0,
                      gbps, None if gbps is None else "dcgm", 900.0, "config", 220.0, 60.0)


def test_a_sleeping_engine_is_neither_down_nor_in_the_sweet_spot():
    asleep = window(sleep_state="weights_offloaded", tokens_per_s=0.0, running_avg=0.0, running_max=0.0,
                    waiting_max=3.0, ttft_p95_s=None)
    verdict = evaluate(asleep, RULES, spot=SPOT)
    assert verdict.state == OUTSIDE and verdict.state != NO_DATA
    assert [c.name for c in verdict.clauses] == ["sleeping"]  # not "not serving", not under-delivering
    assert verdict.severity == WARNING and "engine asleep (weights_offloaded)" in verdict.clauses[0].text
    assert evaluate(window(sleep_state="awake"), RULES, spot=SPOT).state == IN_SWEET_SPOT
    assert [c.name for c in evaluate(window(sleep_state="discard_all"), RULES, spot=SPOT).clauses] == ["sleeping"]


def test_abort_and_error_rates_are_alert_rules_quiet_where_not_exposed():
    assert evaluate(window(), RULES, spot=SPOT).state == IN_SWEET_SPOT  # vLLM before 0.33: no error reason, no alert
    failing = evaluate(window(finished_error_per_s=0.05, finished_abort_per_s=0.0), RULES, spot=SPOT)
    assert [c.name for c in failing.clauses] == ["requests_failing"] and failing.severity == "critical"
    assert evaluate(window(finished_abort_per_s=0.01), RULES, spot=SPOT).state == IN_SWEET_SPOT  # 2.5 % of 0.4 req/s
    aborted = evaluate(window(finished_abort_per_s=0.1), RULES, spot=SPOT)
    assert [c.name for c in aborted.clauses] == ["requests_aborted"]
    assert "more than 5 % of finished requests" in aborted.clauses[0].text


def test_kv_tile_reads_usage_of_capacity_and_sglang_says_retractions():
    tiles = {t.label.split(" ·")[0]: t for t in widgets.kpi_tiles(window(kv_capacity_tokens=1_200_000,
                                                                         kv_cache_usage_max=0.23), RULES)}
    kv = tiles["KV usage"]
    assert (kv.value, kv.context.split(" · ")[0]) == ("23 %", "of 1.2 M tokens")
    assert "Retractions" in {t.label.split(" ·")[0] for t in widgets.kpi_tiles(window(engine="sglang"), RULES)}
    assert "of" not in widgets.kpi_tiles(window(), RULES)[-1].context  # capacity unknown: not invented


def test_traffic_text_sets_the_engine_estimate_beside_measured_and_peak():
    f = window(engine_bw_gbps=108.0)
    text = traffic.traffic_text(f, [_gpu(540.0, 0), _gpu(544.0, 1)])
    assert "engine-side 108 GB/s" in text and "measured 542 GB/s (dcgm, average of 2 GPUs)" in text
    assert "peak 900 GB/s" in text and "the engine's estimate is 19.9 % of the measured traffic" in text
    bare = traffic.traffic_text(window(), [_gpu(None)])
    assert "--enable-mfu-metrics" in bare and "NVML busy % is time" in bare


def test_the_ceiling_provenance_checks_its_assumption_with_the_engine_traffic():
    text = traffic.ceiling_check_text(window(engine_bw_gbps=108.0, tokens_per_s=108.0))
    assert "900 GB/s per GPU" in text and "÷ 5 GB of weights per GPU" in text
    assert text.startswith("The report's ceiling, at most 180 decode steps/s = ")
    assert "12 % of that bandwidth" in text and "1 GB per output token per GPU against the weights' 5 GB" in text
    assert "--enable-mfu-metrics" in traffic.ceiling_check_text(window())


def test_engine_points_become_one_more_line():
    base = window()
    pts = [SeriesPoint(ts=base.end, **{k: None for k in SeriesPoint.__dataclass_fields__ if k != "ts"})]
    assert traffic.engine_points(pts) == []
    pts = [SeriesPoint(**{**pts[0].__dict__, "engine_bw_gbps": 100.0})]
    assert [(p.uuid, p.dram_bw_gbps) for p in traffic.engine_points(pts)] == [(traffic.ENGINE_UUID, 100.0)]


def test_targets_rows_name_the_versions_and_the_engine():
    info = TargetInfo("t", "u", True, 1.0, None, {"kv_cache_usage": "vllm:gpu_cache_usage_perc"}, ("engine_read_bytes",),
                      ("m",), (), "none", "none", None, engine="vllm",
                      metric_versions={"kv_cache_usage": "vLLM ≤ 0.10.2 (hidden in 0.11, removed in 0.12)"},
                      cache_config={"num_gpu_blocks": "30210", "block_size": "16"},
                      lora={"running_lora_adapters": "sql-lora", "waiting_lora_adapters": "", "max_lora": "4"})
    rows = widgets.metric_rows(info)
    assert rows[0]["version hint"].startswith("vLLM ≤ 0.10.2")
    assert rows[1] == {"figure": "engine_read_bytes", "exposed as": "missing",
                       "version hint": "vLLM ≥ 0.32 with --enable-mfu-metrics"}
    text = widgets.engine_text(info)
    assert "engine: vLLM" in text and "483 k tokens" in text and "running sql-lora; waiting none (max 4)" in text


def test_the_ttft_tile_hover_names_the_engines_bucket():
    (ttft, *_) = widgets.kpi_tiles(window(quantile_buckets={"ttft_p95_s": (0.25, 0.5)}), RULES)
    assert "bucket (0.25, 0.5] s" in ttft.help
    assert "bucket" not in widgets.kpi_tiles(window(), RULES)[0].help  # no value, no bucket


def test_the_slo_tile_shows_the_share_and_the_bounds_either_side_and_the_p95_tile_says_when_its_bucket_holds_the_slo():
    between = window(ttft_p95_s=4.2, quantile_buckets={"ttft_p95_s": (2.5, 5.0)}, ttft_slo_s=3.0,
                     ttft_slo_attainment=0.79, ttft_slo_bounds=(2.5, 0.75, 5.0, 0.95))  # fmt: skip
    ttft, slo, *_ = widgets.kpi_tiles(between, RULES)
    assert (slo.label, slo.value, slo.context) == ("TTFT SLO attainment · 5m", "79.0 %", "≤ 3 s · between 75.0 % (within 2.5 s) and 95.0 % (within 5 s)")
    assert "interpolated between ≤ 2.5 s: 75.0 % and ≤ 5 s: 95.0 %" in slo.help
    assert ttft.context == "SLO 3 s · inside its bucket (2.5, 5] s"
    assert "--custom-histogram-buckets (vLLM ≥ 0.32" in ttft.help and "cannot tell" in slo.help
    exact = window(ttft_p95_s=1.2, quantile_buckets={"ttft_p95_s": (1.0, 2.5)}, ttft_slo_s=2.5, ttft_slo_attainment=0.9)
    ttft, slo, *_ = widgets.kpi_tiles(exact, RULES)
    assert (slo.value, slo.context, ttft.context) == ("90.0 %", "≤ 2.5 s · exact (a bucket bound)", "SLO 3 s")
    assert "cannot tell" not in ttft.help + slo.help
    _, idle, *_ = widgets.kpi_tiles(window(ttft_slo_s=3.0), RULES)
    assert (idle.value, idle.context) == ("—", "≤ 3 s · no request")


def test_the_reports_words_only_on_the_reference_plain_words_elsewhere():
    import dataclasses

    from tests.builders import CEILING

    own = dataclasses.replace(CEILING, steps_per_s=300.0, weight_gb=16.0, tensor_parallel=1, bandwidth_gbps=4800.0)
    ref = {t.label.split(" ·")[0]: t for t in widgets.kpi_tiles(window(ceiling_share=0.5), RULES)}
    mine = {t.label.split(" ·")[0]: t for t in widgets.kpi_tiles(window(ceiling=own, ceiling_steps_per_s=300.0,
                                                                         ceiling_share=0.5), RULES)}  # fmt: skip
    assert "the report's % of ceiling" in ref["Output tok/s"].context and "the report's ceiling" in ref["Output tok/s"].context
    assert "report" not in mine["Output tok/s"].context
    assert "% of the step bound" in mine["Output tok/s"].context and "the bandwidth bound" in mine["Output tok/s"].context
    assert "bandwidth ÷ (weights ÷ TP)" in mine["Output tok/s"].help  # the definition, on hover
    assert mine["Preemptions"].context == "should stay 0: each one redoes a request's work"
