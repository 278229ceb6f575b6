"""The ``ttft_p95`` rule is three-valued at the rule (issue 37): broken, held, or "cannot tell" with the
bucket, judged from the histogram's bounds (core/histogram_slo.py), never from a P95 interpolated
inside the bucket that holds the SLO; "cannot tell" neither starts nor clears an alert."""

from __future__ import annotations

import dataclasses

from app.alerts.lifecycle import advance, new_state
from app.alerts.model import FIRING, INACTIVE, PENDING
from app.alerts.names import ttft_judgement, window_names
from app.alerts.rules import CANNOT_TELL, CLEAR, DEFAULT_RULES, HOLDS, Names, by_name, outcome
from core.settings import SweetSpotSettings
from tests.builders import window

RULE = by_name(DEFAULT_RULES, "ttft_p95")


def judged(**changes):
    return outcome(RULE, Names(window_names(window(**changes), SweetSpotSettings())))


def test_a_p95_interpolated_to_337_s_inside_25_to_5_cannot_tell_and_names_the_bucket():
    # 93 % of the requests under 2.5 s, 98 % under 5 s: the P95 lies in (2.5, 5], the 3 s SLO with it
    out = judged(ttft_p95_s=3.37, ttft_slo_s=3.0, ttft_slo_attainment=0.945, ttft_slo_bounds=(2.5, 0.93, 5.0, 0.98))
    assert out.status == CANNOT_TELL and out.value == 3.37
    assert "cannot tell against 3 s: P95 in (2.5, 5] s (93.0 % at or under 2.5 s, 98.0 % at or under 5 s)" in out.summary


def test_bounds_that_prove_it_decide_either_way():
    broken = judged(ttft_p95_s=5.6, ttft_slo_s=3.0, ttft_slo_attainment=0.85, ttft_slo_bounds=(2.5, 0.80, 5.0, 0.90))
    held = judged(ttft_p95_s=2.2, ttft_slo_s=3.0, ttft_slo_attainment=0.975, ttft_slo_bounds=(2.5, 0.96, 5.0, 0.99))
    exact = judged(ttft_p95_s=3.2, ttft_slo_s=3.0, ttft_slo_attainment=0.94, ttft_slo_bounds=None)  # a bound at 3 s
    assert (broken.status, held.status, exact.status) == (HOLDS, CLEAR, HOLDS)
    assert ttft_judgement(window(ttft_slo_s=2.5, ttft_slo_attainment=0.94)).state == "outside"


def test_cannot_tell_neither_starts_nor_clears_an_alert():
    out = judged(ttft_p95_s=3.37, ttft_slo_s=3.0, ttft_slo_attainment=0.945, ttft_slo_bounds=(2.5, 0.93, 5.0, 0.98))
    for state in (INACTIVE, PENDING, FIRING):
        before = dataclasses.replace(new_state(RULE, "demo", "", 0), state=state,
                                     pending_since=100 if state != INACTIVE else None,
                                     firing_since=200 if state == FIRING else None)  # fmt: skip
        after, change = advance(before, RULE, out, 1000)
        assert after.state == state and change is None


def test_status_says_the_judgement_with_the_bucket():
    from app.commands.status import figures_json, render

    fig = window(ttft_p95_s=3.37, ttft_slo_s=3.0, ttft_slo_attainment=0.945, ttft_slo_bounds=(2.5, 0.93, 5.0, 0.98))
    doc = figures_json(fig)
    assert doc["ttft_slo_judgement"]["state"] == "cannot tell" and doc["ttft_slo_judgement"]["bucket"] == [2.5, 5.0]
    assert "TTFT P95 vs SLO          cannot tell against 3 s: P95 in (2.5, 5] s" in render(fig)
