"""A histogram quantile judged against an SLO from its bucket bounds alone (core/histogram_slo.py)."""

import math

from hypothesis import given
from hypothesis import strategies as st

from core.histogram_slo import CANNOT_TELL, OUTSIDE, WITHIN, judge_histogram_quantile

VLLM_TTFT = (0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, math.inf)


def buckets(times, bounds=VLLM_TTFT):
    return [(le, sum(1 for t in times if t <= le)) for le in bounds]


def test_the_slo_inside_vllms_25_to_5_bucket_cannot_tell_and_names_it():
    judged = judge_histogram_quantile([(2.5, 93), (5.0, 98), (math.inf, 100)], slo_s=3.0)
    assert judged is not None and judged.state == CANNOT_TELL
    assert judged.bucket == (2.5, 5.0)
    assert "P95 in (2.5, 5] s" in judged.text


def test_within_only_when_the_bound_under_the_slo_holds_95_percent():
    judged = judge_histogram_quantile([(2.5, 95), (5.0, 99), (math.inf, 100)], slo_s=3.0)
    assert judged is not None and judged.state == WITHIN
    assert "95.0 % of 100 requests at or under 2.5 s" in judged.text


def test_outside_only_when_the_bound_over_the_slo_holds_under_95_percent():
    judged = judge_histogram_quantile([(2.5, 80), (5.0, 94), (math.inf, 100)], slo_s=3.0)
    assert judged is not None and judged.state == OUTSIDE


def test_a_bound_at_the_slo_makes_it_exact():
    assert judge_histogram_quantile([(3.0, 95), (math.inf, 100)], slo_s=3.0).state == WITHIN
    assert judge_histogram_quantile([(3.0, 94), (math.inf, 100)], slo_s=3.0).state == OUTSIDE


def test_past_the_last_bound_outside_cannot_be_proven():
    judged = judge_histogram_quantile([(2.5, 10), (math.inf, 100)], slo_s=30.0)
    assert judged.state == CANNOT_TELL and judged.bucket_text == "(2.5, +Inf) s"


def test_no_requests_or_no_inf_bucket_is_none():
    assert judge_histogram_quantile([(2.5, 0), (math.inf, 0)], slo_s=3.0) is None
    assert judge_histogram_quantile([(2.5, 10), (5.0, 12)], slo_s=3.0) is None


@given(st.lists(st.floats(0.0, 40.0), min_size=1, max_size=200), st.floats(0.05, 30.0), st.sampled_from([0.5, 0.9, 0.95, 0.99]))
def test_the_judgement_never_contradicts_the_exact_quantile(times, slo, q):
    # The exact q-quantile (the smallest time with at least q of the requests at or under it).
    ordered = sorted(times)
    exact = ordered[max(math.ceil(q * len(ordered)) - 1, 0)]
    judged = judge_histogram_quantile(buckets(times), slo, q)
    assert judged is not None
    if judged.state == WITHIN:
        assert exact <= slo
    elif judged.state == OUTSIDE:
        assert exact > slo
    else:
        lower, upper = judged.bucket
        assert lower < slo < upper
