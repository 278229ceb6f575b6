"""The engine's own TTFT P95 over a sweep level's window (app/sweep_engine.py) and its column in the
sweep's table: from two readings of vLLM's histogram, with the bucket that holds it."""

from __future__ import annotations

import math

import pytest

from app.commands.sweep import engine_cells
from app.sweep_engine import EngineQuantile, window_quantile
from collectors.records import Histogram
from db.quantiles import histogram_quantile
from db.results import SweepLevel
from sweep.report import ENGINE_NOTE, format_table

BOUNDS = (0.25, 0.5, 1.0, 2.5, 5.0, math.inf)  # a slice of vLLM's TTFT buckets


def hist(*cumulative: float) -> Histogram:
    return Histogram(BOUNDS, cumulative, cumulative[-1], None)


def test_the_p95_over_the_window_is_the_increase_between_the_two_readings():
    # before the window: 100 fast requests; during it: 10 in (0.5, 1], 30 in (1, 2.5], 10 in (2.5, 5]
    before, after = hist(60, 100, 100, 100, 100, 100), hist(60, 100, 110, 140, 150, 150)
    found = window_quantile(0.95, before, after)
    assert found == EngineQuantile(histogram_quantile(0.95, BOUNDS, [0, 0, 10, 30, 10, 0]).value, (2.5, 5.0))
    assert found.value_s == pytest.approx(4.375)  # rank 47.5 of 50, 40 below: three quarters into (2.5, 5]


def test_a_rank_past_the_largest_finite_bound_lies_in_the_inf_bucket():
    found = window_quantile(0.95, hist(0, 0, 0, 0, 0, 0), hist(0, 0, 0, 0, 1, 20))
    assert found == EngineQuantile(5.0, (5.0, math.inf))


@pytest.mark.parametrize(("before", "after"), [
    (hist(5, 5, 5, 5, 5, 5), hist(5, 5, 5, 5, 5, 5)),  # nothing observed in the window
    (hist(50, 60, 70, 80, 90, 100), hist(1, 2, 3, 4, 5, 6)),  # the engine restarted: counts went down
    (hist(0, 0, 0, 0, 0, 0), Histogram((1.0, math.inf), (3, 4), 4, None)),  # other buckets
    (None, hist(1, 1, 1, 1, 1, 1)),  # a page that could not be read
])  # fmt: skip
def test_no_engine_figure_where_the_window_cannot_be_known(before, after):
    assert window_quantile(0.95, before, after) is None


def level(concurrency: int, ttft_p95_s: float) -> SweepLevel:
    return SweepLevel(concurrency, 600.0, 100, 0, 126.0, 0.4, 1.0, ttft_p95_s, 2.0, 0.1, 30.0, 40.0, 0.0)


def test_the_table_shows_the_engines_p95_and_bucket_beside_the_clients_and_says_why_they_differ():
    figures = {"engine_ttft_p95": {"8": {"value_s": 1.9, "bucket": [1.0, 2.5]}, "16": None,
                                   "32": {"value_s": 160.0, "bucket": [160.0, None]}}}  # fmt: skip
    table = format_table([level(8, 1.167), level(16, 2.0), level(32, 200.0)], engine_cells(figures))
    head, _, eight, sixteen, thirty_two = ([c.strip() for c in line.split("|")[3:5]] for line in table.split("\n")[:5])
    assert head == ["TTFT P95", "engine TTFT P95"]
    assert eight == ["1.17 s", "1.90 s (1, 2.5]"]
    assert sixteen == ["2.00 s", "n/a"]
    assert thirty_two == ["200.00 s", "160.00 s (160, +Inf]"]
    assert table.endswith(ENGINE_NOTE)


def test_a_run_without_any_engine_figure_has_no_column():
    assert engine_cells({"engine_ttft_p95": {"8": None}}) is None and engine_cells({}) is None
    assert "engine TTFT P95" not in format_table([level(8, 1.0)], None)
