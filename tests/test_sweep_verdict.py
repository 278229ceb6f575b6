from db.results import SweepLevel
from sweep.report import format_table, format_verdict
from sweep.verdict import recommend, steps


def level(concurrency, tok_s, ttft_p95, e2e_mean=None, qps=None, error_rate=0.0):
    return SweepLevel(
        concurrency=concurrency,
        duration_s=600.0,
        requests=100,
        errors=int(100 * error_rate),
        tokens_per_s=tok_s,
        qps=qps,
        ttft_p50_s=None,
        ttft_p95_s=ttft_p95,
        ttft_p99_s=None,
        itl_p95_s=None,
        e2e_mean_s=e2e_mean,
        e2e_p95_s=None,
        error_rate=error_rate,
    )


# The field report (DOMAIN.md §2); its level 16 TTFT P95 is "between" 1.5 and 4.8 s.
REPORT = [level(8, 85, 1.5, 32.8, 0.28), level(16, 126, 2.6), level(32, 145, 4.8, 67.4, 0.48)]


def test_report_numbers_give_sweet_spot_16():
    verdict = recommend(REPORT, ttft_slo_s=3.0)
    assert verdict["sweet_spot_concurrency"] == 16
    assert verdict["gateway_limit"] == 16
    assert verdict["knee_concurrency"] == 16
    assert verdict["slo_max_concurrency"] == 16
    assert ("Knee 16: doubling stops buying +25 % tok/s at 13.6 (8→16 +48 % tok/s (85 → 126), 16→32 +15 % tok/s "
            "(126 → 145)); the knee lies in the doubling from 13.6 to 27.2, and 16 is the highest level measured "
            "between 13.6 and its middle, 19.2.") in verdict["reason"]
    assert "At 32: TTFT P95 4.80 s > 3 s." in verdict["reason"]
    assert verdict["bound_by"] == "the knee"
    assert [d["gain_pct"] for d in verdict["doublings"]] == [48.2, 15.1]


def test_steps_on_report_numbers():
    gains = steps(REPORT)
    assert [(s["from"], s["to"]) for s in gains] == [(8, 16), (16, 32)]
    assert [s["tokens_per_s_gain_pct"] for s in gains] == [48.2, 15.1]
    assert gains[0]["tokens_per_s_per_added_client"] == 5.125
    assert gains[1]["elasticity"] == 0.151


def test_knee_caps_a_generous_slo():
    verdict = recommend(REPORT, ttft_slo_s=10.0)
    assert verdict["slo_max_concurrency"] == 32
    assert verdict["sweet_spot_concurrency"] == 16
    assert "bound by the knee" in verdict["reason"]


def test_slo_caps_below_the_knee():
    verdict = recommend(REPORT, ttft_slo_s=2.0)
    assert verdict["sweet_spot_concurrency"] == 8
    assert verdict["knee_concurrency"] == 16
    assert "bound by the TTFT SLO" in verdict["reason"]


def test_no_knee_inside_the_sweep_stops_at_the_first_level_whose_double_was_not_swept():
    # 16 → 32 still bought +87 %: the knee is past 16, at least at 32, whose double was not swept.
    linear = [level(8, 80, 1.0), level(16, 150, 1.5), level(32, 280, 2.5)]
    verdict = recommend(linear, ttft_slo_s=3.0)
    assert (verdict["knee_concurrency"], verdict["knee_at_least"]) == (None, 32)
    assert verdict["sweet_spot_concurrency"] == 32
    assert "no knee within the measured levels, at least 32; measure higher" in verdict["reason"]
    assert "bound by the highest level measured" in verdict["reason"]


def test_a_real_vllm_sweep_at_1_2_4_8_prints_stores_and_means_one_number():
    # Issue 37: "Sweet spot: concurrency 4 … no knee within the sweep" was printed while every other
    # surface said 8. Here the number printed is the one stored, and 8 (at least the knee) is it.
    levels = [level(1, 30, 0.1), level(2, 58, 0.12), level(4, 110, 0.15), level(8, 190, 0.3)]
    verdict = recommend(levels, ttft_slo_s=3.0)
    assert (verdict["sweet_spot_concurrency"], verdict["knee_at_least"]) == (8, 8)
    assert format_verdict(verdict).startswith("Sweet spot: concurrency 8, gateway limit 8")


def test_no_level_meets_the_slo():
    verdict = recommend([level(8, 85, 3.5), level(16, 126, 5.0)], ttft_slo_s=3.0)
    assert verdict["sweet_spot_concurrency"] is None
    assert verdict["gateway_limit"] is None
    assert "below 8" in verdict["reason"]


def test_errors_disqualify_a_level_and_throughput_drop_is_a_knee():
    storm = [level(8, 85, 1.5), level(16, 126, 2.0, error_rate=0.05), level(32, 100, 2.5)]
    verdict = recommend(storm, ttft_slo_s=3.0)
    # 32 under 16: the fit pools them (113 each); 8 → 16 buys +33 %, 16 → 32 nothing: the crossing is 9.9,
    # its middle 14; no level lies between, so the first past the crossing, 16, is the knee
    assert verdict["knee_concurrency"] == 16
    assert verdict["slo_max_concurrency"] == 32
    assert verdict["sweet_spot_concurrency"] == 8  # 32 meets the SLO but is past the knee; 16 fails
    errors = recommend([level(8, 85, 1.5), level(16, 126, 2.0, error_rate=0.05), level(32, 145, 2.5)], ttft_slo_s=3.0)
    assert (errors["knee_concurrency"], errors["sweet_spot_concurrency"]) == (16, 8)
    assert errors["bound_by"] == "errors" and "At 16: errors 5.0 % > 1 %" in errors["reason"]  # errors decide
    missing = recommend([level(8, None, None)], ttft_slo_s=3.0)
    assert missing["sweet_spot_concurrency"] is None
    assert "No knee measured" in missing["reason"]


def test_table_has_the_report_columns_and_units():
    text = format_table(REPORT)
    header = text.splitlines()[0]
    for column in ("concurrency", "output tok/s", "TTFT P95", "E2E mean", "QPS"):
        assert column in header
    row_32 = text.splitlines()[-1]
    assert "145.0" in row_32 and "4.80 s" in row_32 and "67.40 s" in row_32 and "0.48" in row_32
    assert "n/a" in text.splitlines()[3]  # level 16 has no E2E mean in the report


def test_a_verdict_on_few_requests_says_so():
    import dataclasses

    few = [dataclasses.replace(lv, requests=n) for lv, n in zip(REPORT, (5, 3, 40), strict=True)]
    verdict = recommend(few, ttft_slo_s=3.0)
    assert verdict["sweet_spot_concurrency"] is None  # 5 and 3 requests prove no P95
    assert verdict["bound_by"] is None and "At 8: 5 requests < 20." in verdict["reason"]
    assert verdict["caution"].startswith("Caution, few requests: levels 8 (5 requests), 16 (3 requests) rest on fewer than 20")
    assert verdict["reason"].endswith("Sweep again with a longer --duration.")
    assert recommend(REPORT, ttft_slo_s=3.0)["caution"] is None  # 100 requests a level: nothing to say
    one = recommend([dataclasses.replace(REPORT[0], requests=1)], ttft_slo_s=3.0)["caution"]
    assert "the level 8 (1 request) rests on fewer than 20" in one
