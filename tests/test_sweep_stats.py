import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.errors import UsageError
from sweep.client import RequestRecord
from sweep.stats import Window, level_stats, mean, percentile, rescale, tokens_in_window
from sweep.workload import CLASSES, make_request, mix_label, parse_mix, synthetic_text


def test_percentile_interpolates_like_numpy():
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert percentile(values, 0.5) == 3.0
    assert percentile(values, 0.95) == pytest.approx(4.8)
    assert percentile([5.0, 1.0], 0.25) == 2.0
    assert percentile([7.0], 0.99) == 7.0
    assert percentile([], 0.5) is None
    assert mean([]) is None


def ok(start, chunks, end, usage=None):
    return RequestRecord("short", start, list(chunks), usage, end, None)


def test_level_figures_from_hand_built_records():
    records = [
        ok(0.0, [1.0, 1.5, 2.0], 2.0, usage=3),
        ok(2.0, [2.5, 3.0], 3.0),  # no usage: tokens = chunks
        ok(0.0, [3.0, 4.0, 5.0], 6.0, usage=10),  # the server says 10 tokens in 3 chunks
        RequestRecord("long", 3.0, [], None, 3.1, "HTTP 429: busy"),
        ok(6.0, [7.0, 8.0, 11.0], None),  # given up by the drain (silent past the request timeout)
        ok(8.0, [10.5], 10.5),  # sent in the 10 s window, ended in the drain: counts whole
    ]
    level = level_stats(records, concurrency=2, window_s=10.0)
    # the span runs to the last measured request's end, as vllm bench serve's duration does
    assert level.duration_s == 10.5
    assert level.requests == 5 and level.errors == 1
    assert level.error_rate == 0.2
    assert level.qps == pytest.approx(4 / 10.5)
    # 3 + 2 + 10 + 1 ended, plus 2 chunks of the request given up inside the span (11.0 is past it)
    assert level.tokens_per_s == pytest.approx(18 / 10.5)
    # TTFTs 1.0, 0.5, 3.0, 1.0, 2.5 (the unfinished request's first token counts)
    assert level.ttft_p50_s == pytest.approx(1.0)
    assert level.ttft_p95_s == pytest.approx(2.9)
    assert level.e2e_mean_s == pytest.approx((2.0 + 1.0 + 6.0 + 2.5) / 4)
    # gaps 0.5 0.5 | 0.5 | 1 1 | 1 (7→8; 8→11 is past the span)
    assert level.itl_p95_s == pytest.approx(1.0)


def test_the_drain_counts_the_last_requests_whole_over_the_longer_span():
    # a 4 s window; the second client's last request, sent at 3.5 s, ends at 6 s
    records = [ok(0.0, [0.5, 1.0, 2.0], 2.0, usage=3), ok(2.0, [2.5, 3.0, 3.5], 3.5, usage=3),
               ok(0.0, [1.0, 2.0, 3.0], 3.5, usage=3), ok(3.5, [4.0, 5.0, 6.0], 6.0, usage=3)]  # fmt: skip
    level = level_stats(records, concurrency=2, window_s=4.0)
    assert level.duration_s == 6.0 and level.requests == 4
    assert level.tokens_per_s == pytest.approx(12 / 6.0) and level.qps == pytest.approx(4 / 6.0)
    assert level.e2e_mean_s == pytest.approx((2.0 + 1.5 + 3.5 + 2.5) / 4)


def test_tokens_in_window_cuts_in_flight_requests():
    window = Window(0.0, 2.5)
    assert tokens_in_window(ok(0.0, [1, 2, 3, 4], None), window) == 2
    assert tokens_in_window(ok(0.0, [1, 2], 2.0, usage=5), window) == 5
    # started during the warm-up: only the chunks inside the window, not the whole usage
    assert tokens_in_window(ok(0.0, [1, 2], 2.0, usage=5), Window(1.5, 2.5)) == 1


def test_warm_up_keeps_the_start_burst_out_of_latencies():
    records = [
        ok(0.0, [4.0, 5.0], 6.0, usage=2),  # start burst: slow first token, ends inside the window
        ok(0.0, [4.5, 5.5, 6.5], 7.0, usage=3),
        ok(6.0, [6.5, 7.0], 7.5, usage=2),  # started inside the window
        ok(7.0, [7.2, 7.4, 7.6], 8.0, usage=3),
    ]
    level = level_stats(records, concurrency=2, window_s=5.0, warmup_s=5.0)
    # the two requests sent in the window are measured; those of the warm-up only add their tokens
    assert level.duration_s == 5.0 and level.requests == 2 and level.qps == pytest.approx(0.4)
    assert level.ttft_p95_s == pytest.approx(0.5 - 0.3 * 0.05)  # only 0.5 and 0.2: the burst's 4 s are out
    assert level.e2e_mean_s == pytest.approx((1.5 + 1.0) / 2)
    assert level.tokens_per_s == pytest.approx((0 + 2 + 2 + 3) / 5.0)  # 5.5 and 6.5 of the second; 5.0 is not


def test_empty_level_has_no_figures():
    level = level_stats([RequestRecord("short", 0.0)], concurrency=1, window_s=5.0)
    assert level.requests == 0 and level.error_rate is None and level.ttft_p95_s is None
    assert level.tokens_per_s == 0.0 and level.qps == 0.0


def test_mix_parsing_and_label():
    mix = parse_mix("short:3,long:1")
    assert [(c.name, share) for c, share in mix] == [("short", 0.75), ("long", 0.25)]
    assert mix_label(parse_mix("short:0.6, long:0.4")) == "short:0.6,long:0.4"
    for bad in ("medium:1", "short:x", "short:-1", "short:0"):
        with pytest.raises(UsageError):
            parse_mix(bad)


def test_requests_are_deterministic_and_about_the_right_size():
    mix = parse_mix("short:0.6,long:0.4")
    first = [make_request(random.Random(7), mix) for _ in range(2)]
    assert first[0] == first[1]
    specs = [make_request(random.Random(i), mix) for i in range(200)]
    kinds = [s.kind for s in specs]
    assert 0.45 < kinds.count("short") / len(kinds) < 0.75
    for spec in specs:
        cls = CLASSES[spec.kind]
        assert cls.input_tokens[0] <= spec.prompt_tokens_est <= cls.input_tokens[1]
        assert cls.max_tokens[0] <= spec.max_tokens <= cls.max_tokens[1]
        # one token per word or period, within a few tokens of the target
        words = spec.prompt.split()
        assert abs(len(words) + spec.prompt.count(".") - spec.prompt_tokens_est) <= 3
    assert len(synthetic_text(random.Random(1), 50).split()) < 50


def test_rescale_reports_a_sped_up_server_in_its_own_time():
    level = level_stats([ok(0.0, [0.1, 0.2], 0.3, usage=2)], concurrency=1, window_s=1.0)
    slow = rescale(level, 10.0)
    assert slow.duration_s == 10.0 and slow.tokens_per_s == pytest.approx(0.2) and slow.qps == pytest.approx(0.1)
    assert slow.ttft_p95_s == pytest.approx(1.0) and slow.e2e_mean_s == pytest.approx(3.0)
    assert slow.itl_p95_s == pytest.approx(1.0) and slow.error_rate == level.error_rate == 0.0
    assert rescale(level, 1.0) is level


@given(st.lists(st.floats(0.001, 3.0), min_size=1, max_size=80), st.lists(st.floats(0.0, 2.0), min_size=80, max_size=80))
def test_a_clients_p95_lies_above_the_edge_the_engines_buckets_make_certain(engine_s, late_s):
    """Each client TTFT is the engine's plus the API server's and the network's time: whatever those
    add, the sweep's interpolated P95 lies above the edge :func:`client_quantile_floor` gives; the
    engine's value that bound rests on reaches the next edge up, so that one is not certain."""
    from tests.support.client_quantiles import client_quantile_floor

    edges = [0.1, 0.25, 0.5, 0.75, 1.0, 2.5, math.inf]
    after = {e: float(sum(v <= e for v in engine_s)) for e in edges}
    floor = client_quantile_floor(0.95, {}, after)
    client = [v + d for v, d in zip(engine_s, late_s, strict=False)]
    p95 = percentile(client, 0.95)
    assert p95 is not None and (p95 > floor or floor == 0.0)
    resting = sorted(engine_s)[math.floor(0.95 * (len(engine_s) - 1))]
    assert resting <= min(e for e in edges if e > floor)


def test_the_failure_seen_in_a_full_run_is_within_the_bound():
    """A run of 44 requests: 41 engine TTFTs under 0.5 s, 3 in (0.5, 0.75]. The engine's P95 bucket is
    (0.5, 0.75] (rank 41.8), while a client interpolating at 0.95·43 = 40.85 reads 0.455 s."""
    from tests.support.client_quantiles import client_quantile_floor

    after = {0.25: 30.0, 0.5: 41.0, 0.75: 44.0, math.inf: 44.0}
    assert client_quantile_floor(0.95, {}, after) == 0.25
    assert client_quantile_floor(0.95, {0.25: 10.0, 0.5: 10.0, 0.75: 10.0, math.inf: 10.0},
                                 {k: v + 10 for k, v in after.items()}) == 0.25  # increases, not totals  # fmt: skip
