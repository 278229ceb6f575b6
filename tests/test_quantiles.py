"""histogram_quantile vectors worked out by hand from Prometheus' bucketQuantile rules."""

from __future__ import annotations

import random

import numpy as np
import pytest

from db import histo
from db.quantiles import attainment_matrix, histogram_quantile, holding_buckets, quantile_matrix

INF = float("inf")
B = (0.1, 0.5, 1.0, INF)


@pytest.mark.parametrize(
    ("q", "increases", "expected", "in_inf"),
    [
        (0.5, (10, 0, 0, 0), 0.05, False),  # rank 5 of 10 in [0, 0.1]: lower bound 0 for the first bucket
        (0.5, (2, 6, 2, 0), 0.3, False),  # rank 5: 0.1 + 0.4 × (5 − 2) / 6
        (0.95, (2, 6, 2, 0), 0.875, False),  # rank 9.5: 0.5 + 0.5 × (9.5 − 8) / 2
        (0.99, (2, 6, 2, 0), 0.975, False),  # rank 9.9: 0.5 + 0.5 × 1.9 / 2
        (0.5, (5, 5, 0, 0), 0.1, False),  # rank exactly on a bucket's cumulative count → its upper bound
        (1.0, (5, 5, 0, 0), 0.5, False),  # rank 10 is reached in the second bucket
        (0.1, (1, 1, 0, 8), 0.1, False),
        (0.15, (1, 1, 0, 8), 0.3, False),  # 0.1 + 0.4 × 0.5 / 1
        (0.5, (1, 1, 0, 8), 1.0, True),  # rank in +Inf → largest finite bound, flagged
    ],
)
def test_vectors(q: float, increases: tuple[int, ...], expected: float, in_inf: bool) -> None:
    result = histogram_quantile(q, B, increases)
    assert result is not None
    assert result.value == pytest.approx(expected)
    assert result.in_inf_bucket is in_inf


def test_no_requests_is_no_value() -> None:
    assert histogram_quantile(0.95, B, (0, 0, 0, 0)) is None


def test_malformed_layouts_have_no_value() -> None:
    assert histogram_quantile(0.5, (0.1, 0.5), (1, 1)) is None  # no +Inf bucket
    assert histogram_quantile(0.5, (INF,), (3,)) is None  # a single bucket
    with pytest.raises(ValueError):
        histogram_quantile(1.5, B, (1, 0, 0, 0))


def test_matrix_matches_scalar() -> None:
    rng = random.Random(7)
    rows = [[rng.choice((0, 0, 1, 3, 20)) for _ in B] for _ in range(300)]
    for q in (0.5, 0.95, 0.99):
        values, inf = quantile_matrix(q, B, np.asarray(rows))
        for row, v, flag in zip(rows, values.tolist(), inf.tolist(), strict=True):
            expected = histogram_quantile(q, B, row)
            if expected is None:
                assert v != v  # NaN
            else:
                assert v == pytest.approx(expected.value)
                assert flag is expected.in_inf_bucket


def test_mixed_layouts_merge_onto_newest() -> None:
    old, new = (0.5, 1.0, INF), (0.25, 0.5, 1.0, 2.0, INF)
    layouts = {1: old, 2: new}
    rows = [(0, 1, histo.encode([3, 0, 1])), (0, 2, histo.encode([1, 0, 0, 2, 0]))]
    acc = histo.accumulate(1, rows, layouts)
    assert acc is not None
    bounds, counts = acc
    assert bounds == new
    # old ≤0.5 → new ≤0.5 (index 1); old +Inf → new +Inf
    assert counts[0].tolist() == [1, 3, 0, 2, 1]


def test_pack_roundtrip() -> None:
    assert histo.encode([0, 0, 0]) is None
    assert histo.decode(histo.encode([0, 5, 0, 1234567]), 4) == [0, 5, 0, 1234567]


def test_huge_increase_is_split_into_entries() -> None:
    big = 3 * histo.MAX_INC + 5
    blob = histo.encode([0, big])
    assert blob is not None and len(blob) == 4 * 4
    assert histo.decode(blob, 2) == [0, big]
    acc = histo.accumulate(1, [(0, 1, blob)], {1: (1.0, INF)})
    assert acc is not None and acc[1][0].tolist() == [0, big]


@pytest.mark.parametrize(
    ("increases", "q", "bucket"),
    [
        ((2, 6, 2, 0), 0.95, (0.5, 1.0)),  # 0.875 interpolated inside (0.5, 1]
        ((5, 5, 0, 0), 0.5, (0.0, 0.1)),  # exactly on a bound: the bucket it closes
        ((10, 0, 0, 0), 0.5, (0.0, 0.1)),  # the first bucket starts at 0
        ((1, 1, 0, 8), 0.5, (1.0, INF)),  # clamped to the largest finite bound: it lies in +Inf
    ],
)
def test_the_bucket_holding_a_quantile(increases: tuple[int, ...], q: float, bucket: tuple[float, float]) -> None:
    values, inf = quantile_matrix(q, B, np.asarray([increases, (0, 0, 0, 0)]))
    lower, upper = holding_buckets(values, inf, B)
    assert (lower[0], upper[0]) == bucket
    assert lower[1] != lower[1] and upper[1] != upper[1]  # no requests: no value, no bucket


# TTFT-like bounds; per-bucket increases 10, 20, 30, 30, 10: cumulative 10, 30, 60, 90 of 100
SLO_BOUNDS = (0.5, 1.0, 2.5, 5.0, INF)
SLO_COUNTS = (10, 20, 30, 30, 10)


@pytest.mark.parametrize(
    ("slo", "share", "bounds"),
    [
        (2.5, 0.6, None),  # a bucket bound: 60 of 100, exact
        (1.0, 0.3, None),
        (3.0, 0.66, (2.5, 0.6, 5.0, 0.9)),  # 0.6 + (0.9 − 0.6) × (3 − 2.5) / (5 − 2.5)
        (0.25, 0.05, (0.0, 0.0, 0.5, 0.1)),  # below the first bound: from (0, 0), as histogram_quantile
        (10.0, 0.9, (5.0, 0.9, INF, 1.0)),  # above the last finite bound: the share at it, a floor
    ],
)
def test_slo_attainment_by_hand(slo: float, share: float, bounds: tuple[float, ...] | None) -> None:
    got = attainment_matrix(np.array([slo]), SLO_BOUNDS, np.array([SLO_COUNTS]))
    assert got.share[0] == pytest.approx(share)
    sides = (got.lower_le[0], got.lower_share[0], got.upper_le[0], got.upper_share[0])
    if bounds is None:
        assert all(v != v for v in sides)  # NaN: nothing to interpolate
    else:
        assert sides == pytest.approx(bounds)


def test_slo_attainment_of_an_empty_window_is_no_value() -> None:
    got = attainment_matrix(np.array([3.0, 2.5]), SLO_BOUNDS, np.zeros((2, 5)))
    assert all(np.isnan(a).all() for a in got)
    assert np.isnan(attainment_matrix(np.array([3.0]), (0.5, 1.0), np.array([[1, 1]])).share).all()  # no +Inf
    assert np.isnan(attainment_matrix(np.array([np.nan]), SLO_BOUNDS, np.array([SLO_COUNTS])).share).all()  # no SLO


def test_slo_attainment_per_row() -> None:
    # each row its own threshold (several targets' steps at once), one row without requests
    counts = np.array([SLO_COUNTS, (0, 0, 0, 4, 0), (0, 0, 0, 0, 0)])
    got = attainment_matrix(np.array([5.0, 3.0, 3.0]), SLO_BOUNDS, counts)
    assert got.share[:2].tolist() == pytest.approx([0.9, 0.2])  # 4 in (2.5, 5]: 0 + 1 × 0.5 / 2.5
    assert np.isnan(got.share[2])
