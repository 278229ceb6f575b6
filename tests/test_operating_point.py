import pytest

from app.operating_point import (
    NO_ROOFLINE,
    REFERENCE_LEVELS,
    Level,
    RequestSpeed,
    concurrency_reach,
    gap_text,
    measured_levels,
    per_request_text,
    request_speeds,
    roofline,
    roofline_curve,
    roofline_gaps,
    roofline_inputs_text,
)
from app.sweet_spot import reference_spot
from core.mbu import StepModel
from tests.builders import END, point


def test_the_reference_sweet_spot_is_the_one_rules_16_with_its_figures():
    spot = reference_spot()
    assert (spot.value, spot.source, spot.found.knee) == (16, "reference", 16)
    assert "8→16 +48 % tok/s (85 → 126), 16→32 +15 % tok/s (126 → 145)" in spot.found.reason
    assert [(float(c), t) for c, t, _ in REFERENCE_LEVELS] == list(spot.curve)


# The reference inputs (DOMAIN.md §1): 40 GB over TP 8, 900 GB/s per GPU, a 70B Llama's KV cache
# (80 layers × 8 KV heads × 128 × 2 × 2 bytes = 327,680 B per token), 1,000 tokens of mean context.
# By hand: bytes per step = 5e9 + c × 1,000 × 327,680 ÷ 8 = 5e9 + c × 40.96e6.
REFERENCE_MODEL = StepModel(40.0, 8, 900.0, 327_680.0)


def test_roofline_curve_against_hand_computed_values():
    curve = roofline_curve(REFERENCE_MODEL, 1000.0, up_to=32.0, points=32)
    assert curve[0] == (1.0, pytest.approx(900e9 / 5.04096e9))  # 178.54 tok/s: one request's bound
    assert curve[-1] == (32.0, pytest.approx(32 * 900e9 / 6.31072e9))  # 4,563.7 tok/s
    assert [c for c, _ in curve] == [float(c) for c in range(1, 33)]
    # without a KV size the curve is the weights alone: c × 180 steps/s, a straight line
    straight = roofline_curve(StepModel(40.0, 8, 900.0), 1000.0, up_to=32.0, points=2)
    assert straight == [(1.0, pytest.approx(180.0)), (32.0, pytest.approx(32 * 180.0))]


def test_measured_steps_group_by_whole_requests_and_idle_steps_are_left_out():
    points = [point(END - 240, running_avg=31.6, tokens_per_s=140.0), point(END - 180, running_avg=32.3, tokens_per_s=150.0),
              point(END - 120, running_avg=8.2, tokens_per_s=85.0), point(END - 60, running_avg=0.2, tokens_per_s=3.0),
              point(END, running_avg=16.0, tokens_per_s=None)]  # fmt: skip
    assert measured_levels(points) == [Level(8, 85.0, 1), Level(32, 145.0, 2)]


def test_gaps_are_measured_over_roofline_at_each_concurrency():
    levels = [Level(8, 85.0, 3), Level(16, 126.0, 5), Level(32, 145.0, 40)]
    gaps = roofline_gaps(REFERENCE_MODEL, 1000.0, levels)
    assert [g.roofline_tokens_per_s for g in gaps] == pytest.approx([7200 / 5.32768, 14400 / 5.65536, 28800 / 6.31072])
    assert [g.share for g in gaps] == pytest.approx([85 / 1351.43, 126 / 2546.26, 145 / 4563.66], rel=1e-5)
    assert gap_text(gaps) == ("the engine delivers 3 % of the roofline at 32: the rest goes to compute, "
                              "communication and scheduling; 5 % at 16, 6 % at 8")  # fmt: skip
    assert gap_text([]) == ""
    tiny = roofline_gaps(REFERENCE_MODEL, 1000.0, [Level(32, 20.0, 1)])
    assert gap_text(tiny).startswith("the engine delivers 0.44 % of the roofline at 32")  # never "0 %"


def test_roofline_inputs_say_what_the_curve_leaves_out():
    assert roofline_inputs_text(REFERENCE_MODEL, 1234.0) == "c × 900 GB/s ÷ (40 GB ÷ TP 8 + c × 1,234 tokens × 327,680 B ÷ TP 8)"
    assert "KV bytes per token unknown" in roofline_inputs_text(StepModel(40.0, 8, 900.0), 1234.0)
    assert "the mean context unknown" in roofline_inputs_text(REFERENCE_MODEL, None)


def test_per_request_speed_is_tok_s_over_running_and_one_over_itl():
    speeds = request_speeds([point(END - 60, running_avg=32.0, tokens_per_s=145.0, itl_p95_s=0.25),
                             point(END, running_avg=0.0), point(END + 60, running_avg=8.0, tokens_per_s=None, itl_p95_s=None)])  # fmt: skip
    assert speeds == [RequestSpeed(END - 60, 32.0, 145.0 / 32, 4.0)]
    assert REFERENCE_MODEL.single_request_tokens_per_s(1000.0) == pytest.approx(178.537, rel=1e-5)


def test_the_pages_roofline_says_the_gap_and_its_inputs_or_which_setting_adds_it():
    points = [point(END - 60 * i, running_avg=32.0, tokens_per_s=145.0) for i in range(3)]
    roof = roofline(REFERENCE_MODEL, 1000.0, points, up_to=concurrency_reach(points, REFERENCE_LEVELS, [(16.0, "x")]))
    assert roof is not None and roof.curve[-1] == (32.0, pytest.approx(4563.66, rel=1e-5))
    assert roof.text() == ("The engine delivers 3 % of the roofline at 32: the rest goes to compute, communication "
                           "and scheduling.")  # fmt: skip
    assert "c × 900 GB/s ÷ (40 GB ÷ TP 8 + c × 1,000 tokens × 327,680 B ÷ TP 8)" in roof.caption()
    assert roof.single_request_tokens_per_s == pytest.approx(178.537, rel=1e-5)
    assert roofline(None, 1000.0, points, 32.0) is None
    assert "targets[].ceiling.weight_gb and tensor_parallel" in NO_ROOFLINE


def test_per_request_text_reads_the_busiest_concurrency_against_one_requests_bound():
    speeds = request_speeds([point(END - 60 * i, running_avg=32.0, tokens_per_s=144.0, itl_p95_s=0.25) for i in range(3)]
                            + [point(END + 60, running_avg=8.0, tokens_per_s=85.0, itl_p95_s=0.1)])  # fmt: skip
    assert per_request_text(speeds, 178.537) == ("One request decodes at most 179 tok/s (the roofline at 1); measured at 32 "
                                                 "running: 4.5 tok/s per request (tok/s ÷ running), 4 tok/s at the slow end "
                                                 "(1 ÷ ITL P95).")  # fmt: skip
    assert per_request_text([], None) == "No single-request bound (no ceiling inputs)."


def test_with_both_roofs_the_gap_is_against_the_attainable_not_mbu_restated():
    """The compute roof known (here the reference's CUDA-core fp16 for decode and prefill, 3.6 prompt tokens an
    output token), the page's gap is the measured share of the lower roof: 37 % at 32, not 3 % of bandwidth."""
    from core import roofline as roofs

    both = roofs.roofline(REFERENCE_MODEL, 1000.0, roofs.PeakCompute(31.4, "x"), 70e9, None, 3.6)
    points = [point(END - 60 * i, running_avg=32.0, tokens_per_s=145.0) for i in range(3)]
    roof = roofline(REFERENCE_MODEL, 1000.0, points, 32.0, both)
    assert roof is not None and roof.gaps[0].roofline_tokens_per_s == pytest.approx(31.4e12 * 8 / 140e9 / 4.6)
    assert roof.text().startswith("The engine delivers 37 % of the attainable at 32: the lower of the bandwidth roof and "
                                  "the compute roof with prefill at the mix")  # fmt: skip
