from __future__ import annotations

import pytest

from app.sweet_spot import SweetSpot
from app.verdict import (
    CANNOT_TELL,
    CRITICAL,
    IN_SWEET_SPOT,
    NO_DATA,
    OUTSIDE,
    WARNING,
    broken_since,
    evaluate,
    last_up,
    queue_growth,
)
from core.settings import SweetSpotSettings
from db.verdicts import StoredVerdict
from tests.builders import END, point, queue_ramp, window

RULES = SweetSpotSettings(concurrency=16)  # configured: no default sweet spot any more
# its own curve too (a sweep's): "in the sweet spot" needs every rule judged, under_delivering included
SPOT = SweetSpot(16, "configured", "configured", ((8.0, 85.0), (16.0, 126.0), (32.0, 145.0)), "sweep")


def names(verdict):
    return [c.name for c in verdict.clauses]


def test_reference_sweet_spot_is_in_the_sweet_spot():
    verdict = evaluate(window(), RULES, spot=SPOT)
    assert verdict.state == IN_SWEET_SPOT
    assert verdict.severity is None
    assert verdict.headline == "demo: in the sweet spot over 5m: every rule holds"


def test_ttft_over_slo_names_value_and_threshold():
    verdict = evaluate(window(ttft_p95_s=4.8), RULES, spot=SPOT)
    assert verdict.state == OUTSIDE
    (clause,) = verdict.clauses
    assert clause.text == "TTFT P95 over 5m 4.8 s > 3 s"
    assert clause.severity == CRITICAL


def test_ttft_in_inf_bucket_is_flagged_as_a_lower_bound():
    (clause,) = evaluate(window(ttft_p95_s=10.0, ttft_p95_in_inf_bucket=True), RULES, spot=SPOT).clauses
    assert "at least" in clause.text


def test_ttft_at_the_slo_is_still_fine():
    assert evaluate(window(ttft_p95_s=3.0), RULES, spot=SPOT).state == IN_SWEET_SPOT


def test_one_preemption_leaves_the_sweet_spot():
    (clause,) = evaluate(window(preemptions=1.0), RULES, spot=SPOT).clauses
    assert clause.text == "preemptions over 5m 1 > 0"
    assert clause.severity == CRITICAL


def test_running_above_sweet_spot_concurrency_uses_the_average():
    assert evaluate(window(running_avg=15.0, running_max=19.0), RULES, spot=SPOT).state == IN_SWEET_SPOT
    (clause,) = evaluate(window(running_avg=24.0, running_max=32.0), RULES, spot=SPOT).clauses
    assert clause.text == "running requests (avg over 5m) 24 requests > 16 requests (sweet-spot concurrency, configured)"
    assert clause.severity == WARNING


@pytest.mark.parametrize(
    ("usage", "severity", "text"),
    [
        (0.93, WARNING, "KV-cache usage (max over 5m) 93 % ≥ 90 %"),
        (0.99, CRITICAL, "KV-cache usage (max over 5m) 99 % ≥ 98 % (preemption imminent)"),
    ],
)
def test_kv_cache_warning_and_critical(usage, severity, text):
    (clause,) = evaluate(window(kv_cache_usage_max=usage), RULES, spot=SPOT).clauses
    assert (clause.severity, clause.text) == (severity, text)


def test_kv_under_warning_is_fine():
    assert evaluate(window(kv_cache_usage_max=0.89), RULES, spot=SPOT).state == IN_SWEET_SPOT


def test_low_mbu_while_requests_wait_breaks_no_default_rule():
    # the reference moves 3-12 % of its bandwidth at every operating point: a fixed MBU floor is no
    # sweet-spot judgement (docs/alerts.md); MBU stays a figure
    assert evaluate(window(mbu=0.12, waiting_max=5.0), RULES, spot=SPOT).state == IN_SWEET_SPOT
    assert evaluate(window(mbu=0.02, waiting_max=5.0, tokens_per_s=1800.0, ceiling_share=10.0), RULES, spot=SPOT).state == IN_SWEET_SPOT


def test_tok_s_under_its_own_curve_is_under_delivering():
    from app.sweet_spot import SweetSpot

    spot = SweetSpot(16, "sweep", "the knee of a sweep", ((8.0, 85.0), (16.0, 126.0), (32.0, 145.0)), "sweep")
    assert evaluate(window(), RULES, spot=spot).state == IN_SWEET_SPOT  # 126 tok/s at 15.5: on its curve
    (clause,) = evaluate(window(tokens_per_s=70.0), RULES, spot=spot).clauses
    assert clause.name == "under_delivering"
    assert clause.text == ("output tok/s against its own sweep curve at 15.5 running (over 5m) 56.4 % < 85 % "
                           "(70 tok/s where the curve gives 124)"), clause.text


def test_without_a_curve_under_delivering_is_not_evaluated_and_says_why():
    from app.alerts.model import NO_DATA as RULE_NO_DATA
    from app.alerts.names import window_names
    from app.alerts.rules import DEFAULT_RULES, Names, by_name, outcome

    slow = window(tokens_per_s=5.0)
    verdict = evaluate(slow, RULES)  # no judgement without a curve, no borrowed one: it cannot tell, and says why
    assert verdict.state == CANNOT_TELL and verdict.not_judged()["under_delivering"].startswith("no curve yet")
    rule = by_name(DEFAULT_RULES, "under_delivering")
    assert rule is not None
    o = outcome(rule, Names(window_names(slow, RULES)))
    assert o.status == RULE_NO_DATA and o.summary.startswith("not evaluated: no curve yet")


def test_low_throughput_when_idle_is_fine():
    figures = window(tokens_per_s=20.0, waiting_max=0.0, queue_depth_max=0.0, running_avg=2.0)
    assert evaluate(figures, RULES, spot=SPOT).state == IN_SWEET_SPOT


def test_up_but_not_serving_is_critical_and_not_double_reported():
    figures = window(waiting_max=7.0, running_avg=0.0, running_max=0.0, tokens_per_s=0.0, ttft_p95_s=None)
    verdict = evaluate(figures, RULES, spot=SPOT)
    assert names(verdict) == ["not_serving"]
    assert verdict.severity == CRITICAL
    assert "nothing running, 0 tok/s" in verdict.clauses[0].text


def test_several_clauses_critical_first():
    figures = window(ttft_p95_s=4.8, running_avg=32.0, kv_cache_usage_max=0.95, preemptions=12.0)
    verdict = evaluate(figures, RULES, spot=SPOT)
    assert names(verdict) == ["ttft_p95", "preemptions", "kv_cache", "concurrency"]
    assert verdict.severity == CRITICAL
    assert verdict.headline.startswith("demo: outside the sweet spot over 5m: TTFT P95 over 5m 4.8 s > 3 s; ")


def test_thresholds_come_from_settings():
    strict = SweetSpotSettings(ttft_p95_slo_s=2.0, concurrency=8)
    assert names(evaluate(window(), strict)) == ["ttft_p95", "concurrency"]


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"up": None, "last_scrape_at": None, "scrapes": 0}, "never been scraped"),
        ({"up": False, "last_error": "connection refused"}, "down: the last scrape failed (connection refused)"),
        ({"scrapes": 0}, "no scrape in the window"),
        ({"scrapes": 4, "failed_scrapes": 4, "last_error": "HTTP 500"}, "every scrape in the window failed (HTTP 500)"),
        ({"tokens_per_s": None, "running_max": None, "running_avg": None}, "expose no vLLM figures"),
    ],
)
def test_no_data_is_its_own_state_with_a_reason(changes, reason):
    verdict = evaluate(window(**changes), RULES, spot=SPOT)
    assert verdict.state == NO_DATA
    assert reason in verdict.reason
    assert verdict.severity == CRITICAL
    assert verdict.headline.startswith("demo: no data over 5m: ")


def test_no_data_wins_over_stale_figures():
    assert evaluate(window(up=False, ttft_p95_s=9.0), RULES, spot=SPOT).state == NO_DATA


def test_queue_growing_for_minutes_leaves_the_sweet_spot():
    recent = queue_ramp([4, 6, 5, 9, 14, 19])
    verdict = evaluate(window(queue_depth_max=19.0), RULES, recent, spot=SPOT)
    (clause,) = verdict.clauses
    assert clause.text == (
        "gateway queue growing for 3m 19 requests > 5 requests (3m ago; demand exceeds the sweet-spot capacity)"
    )


@pytest.mark.parametrize(
    "depths",
    [
        [4, 6, 9, 14, 19, 3],  # drained at the end
        [4, 6, 0, 9, 14, 19],  # drained in between: not one growth
        [19, 14, 9, 6, 5, 4],  # shrinking
        [9, 9, 9, 9, 9, 9],  # steady
        [4, 6, None, 9, 14, 19],  # a gap: cannot claim minutes of growth
        [9, 19],  # too short
    ],
)
def test_queue_not_growing(depths):
    assert queue_growth(queue_ramp(depths), END, 180.0) is None


def test_queue_growth_needs_the_whole_span():
    recent = queue_ramp([4, 8, 12], step_s=30.0)  # only 60 s of the 180 s
    assert queue_growth(recent, END, 180.0) is None


def minutes(*held: str | None) -> list[StoredVerdict]:
    """Stored verdicts of the minutes up to END: each the rules that held ("" none, None no data)."""
    start = int(END) - 60 * (len(held) - 1)
    return [StoredVerdict("t", start + 60 * i, NO_DATA if h is None else OUTSIDE if h else IN_SWEET_SPOT, start + 60 * i,
                          dict.fromkeys(h.split(",") if h else ())) for i, h in enumerate(held)]  # fmt: skip


def test_since_when_a_clause_broke():
    history = minutes("", "", "", "ttft_p95", "ttft_p95", "", "ttft_p95", "ttft_p95,preemptions", "ttft_p95", "ttft_p95")
    # one minute without it inside the spell: shorter than the 5-minute window, so it does not end it
    assert broken_since("ttft_p95", history, 300.0) == END - 540 + 180
    assert broken_since("preemptions", history, 300.0) == END - 540 + 420


def test_since_stops_at_a_healthy_window():
    history = minutes("ttft_p95", "ttft_p95", "", "", "", "", "", "", "ttft_p95", "ttft_p95")
    assert broken_since("ttft_p95", history, 300.0) == END - 540 + 480


def test_since_ignores_no_data_and_missing_minutes():
    history = minutes("preemptions", None, "preemptions")
    assert broken_since("preemptions", history, 300.0) == END - 120
    assert broken_since("preemptions", [history[0], history[2]], 300.0) == END - 120  # a minute not stored
    assert broken_since("queue_growing", history, 300.0) is None
    assert broken_since("preemptions", minutes(""), 300.0) is None
    assert broken_since("preemptions", [], 300.0) is None


def test_last_up_is_where_no_data_began():
    points = [point(END - 120), point(END - 60, up_ratio=0.0), point(END, up_ratio=None)]
    assert last_up(points) == END - 60
    assert last_up([point(END, up_ratio=0.0)]) is None


@pytest.mark.parametrize(("running", "shown"), [(16.02, "16.02"), (16.0004, "16.0004"), (16.4, "16.4"), (130.3, "130.3"), (24.0, "24")])
def test_a_value_never_reads_equal_to_the_threshold_it_breaks(running, shown):
    rules = SweetSpotSettings(concurrency=16 if running < 100 else 130)
    (clause,) = evaluate(window(running_avg=running, running_max=running), rules).clauses
    threshold = "16" if running < 100 else "130"
    assert clause.text == f"running requests (avg over 5m) {shown} requests > {threshold} requests (sweet-spot concurrency, configured)"
