from app.operating_point import REFERENCE_LEVELS, find_knee


def test_reference_knee_is_16_with_its_figures():
    knee = find_knee(REFERENCE_LEVELS, slo_s=3.0)
    assert knee is not None
    assert knee.concurrency == 16
    assert knee.reasons == (
        "8→16: +48 % tok/s (85 → 126)",
        "16→32: +15 % tok/s (126 → 145) only",
        "TTFT P95 4.8 s at 32 > 3 s SLO",
    )


def test_knee_steps_back_when_its_latency_breaks_the_slo():
    levels = [(8, 85.0, 1.5), (16, 126.0, 3.5), (32, 145.0, 4.8)]
    knee = find_knee(levels, slo_s=3.0)
    assert knee is not None and knee.concurrency == 8
    assert "TTFT P95 3.5 s at 16 > 3 s SLO" in knee.reasons


def test_still_scaling_means_the_last_level():
    knee = find_knee([(4, 40.0, 1.0), (8, 80.0, 1.2)], slo_s=3.0)
    assert knee is not None and knee.concurrency == 8


def test_too_few_levels():
    assert find_knee([(8, 85.0, 1.5), (16, None, None)], slo_s=3.0) is None
