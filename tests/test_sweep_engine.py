"""The engine's own figures of a sweep level, from two readings of vLLM's /metrics."""

import math

import pytest

from collectors.records import Histogram
from sweep.engine import EngineLevel, EngineReading, engine_level, metrics_url
from sweep.report import engine_json, format_engine

BOUNDS = (0.25, 0.5, 1.0, math.inf)


def reading(at, tokens, cumulative):
    return EngineReading(at, tokens, Histogram(BOUNDS, tuple(cumulative)))


def test_tokens_per_s_and_ttft_p95_with_the_bucket_that_holds_it():
    before = reading(10.0, 1000.0, (5, 5, 5, 5))
    after = reading(30.0, 9000.0, (5 + 10, 5 + 30, 5 + 40, 5 + 40))  # 10 ≤ 0.25 s, 20 in (0.25, 0.5], 10 in (0.5, 1]
    level = engine_level(4, before, after)
    assert level is not None and level.tokens_per_s == pytest.approx(400.0)
    assert level.ttft_p95_s == pytest.approx(0.5 + 0.5 * (38 - 30) / 10)  # rank 38 of 40
    assert level.ttft_p95_bucket == (0.5, 1.0)
    assert "400.0 tok/s, TTFT P95 0.90 s in (0.5, 1]" in format_engine(level)
    # the server's clock runs 10 × real time: its tok/s in its own time, as the client's
    assert engine_level(4, before, after, speed=10.0).tokens_per_s == pytest.approx(40.0)


def test_a_p95_past_the_largest_bound_is_written_with_an_open_bucket():
    level = engine_level(2, reading(0.0, 0.0, (0, 0, 0, 0)), reading(1.0, 10.0, (0, 0, 0, 4)))
    assert level is not None and level.ttft_p95_bucket == (1.0, math.inf)
    assert engine_json(level)["ttft_p95_bucket"] == [1.0, None]


def test_no_figures_without_both_readings_or_across_a_restart():
    one = reading(0.0, 500.0, (1, 2, 3, 3))
    assert engine_level(1, None, one) is None and engine_level(1, one, None) is None
    assert engine_level(1, one, reading(5.0, 20.0, (0, 0, 1, 1))) is None  # the counter went down
    # the histogram restarted while the token counter did not (yet): no P95, the tok/s stands
    level = engine_level(1, one, reading(5.0, 1000.0, (0, 0, 1, 1)))
    assert level == EngineLevel(1, 100.0, None, None)
    # an engine that exposes no TTFT histogram (no requests yet) gives tok/s alone
    quiet = engine_level(1, EngineReading(0.0, 0.0, None), EngineReading(2.0, 8.0, None))
    assert quiet == EngineLevel(1, 4.0, None, None)


def test_metrics_url_is_on_the_server_of_the_openai_base():
    assert metrics_url("http://10.0.0.5:8000/v1") == "http://10.0.0.5:8000/metrics"
    assert metrics_url("http://h:9/gateway/v1") == "http://h:9/gateway/metrics"
