"""The headroom forecast (app/headroom.py) on simulated weeks with a known growth (issue 33 item 2).

The simulator's history with its growth knob (``growth_per_day``) is written into a real SQLite file
through the real parsers, writer and rollups; the forecast reads it back through the facade
(``Reader.daily_peaks``) and must put the true crossing day, computed from the knob's own demand
without incidents, inside its stated range. Flat demand says "no trend", five days "too short". The
digest carries the same line. The clock is the data's: ``TODAY`` is fixed.
"""

from __future__ import annotations

import dataclasses
import json
import re
import statistics
import time

import pytest

from app.backfill import rounds_from_history
from app.commands.run import demo_target
from app.headroom import ABOVE, CROSSING, MIN_DAYS, NO_TREND, TOO_SHORT, UNKNOWN, forecast, headroom
from app.notify import digest
from core.settings import Settings
from db.engine import open_engine
from db.peaks import DAY_S
from db.queries import Reader
from db.rollup import rollup
from db.writer import Writer
from simulator.history import generate_history
from simulator.pattern import DailyPattern

pytestmark = pytest.mark.slow

DAY = int(DAY_S)
TODAY = 1_800_000_000 // DAY * DAY  # a UTC midnight
NOW = TODAY + 10 * 3600  # the current day is under way: its hours must not count
STEP_S = 300.0
CAPACITY = 16  # the demo's reference sweet spot; the other targets configure the same
# (target, days of history, peak clients on its first day, growth per day, seed)
HISTORIES = {"demo": (21, 6.0, 0.03, 0), "flat": (14, 10.0, 0.0, 1), "short": (5, 10.0, 0.03, 2)}


def true_peak(pattern: DailyPattern, day: float) -> float:
    """The peak-hour demand db/peaks.py would read from the knob's demand without incidents or noise."""
    hours = sorted(statistics.median(pattern.baseline(day + h * 3600 + s) for s in range(0, 3600, int(STEP_S)))
                   for h in range(24))  # fmt: skip
    return hours[-2]


def true_crossing(name: str) -> int:
    """The first day (today = 1) whose true peak-hour demand reaches the sweet spot."""
    days, peak, growth, seed = HISTORIES[name]
    pattern = DailyPattern(seed, peak, growth, TODAY - days * DAY)
    return next(d + 1 for d in range(365) if true_peak(pattern, TODAY + d * DAY) >= CAPACITY)


def write_history(url: str, now: float, histories: dict[str, tuple[int, float, float, int]]) -> Settings:
    """Each target's days of history up to ``now`` (the current day's hours included), rolled up; the
    settings that name them (the demo with its reference sweet spot, the others configured at 16)."""
    base = "http://127.0.0.1:1"  # never read: the history is written, not scraped
    demo = demo_target({"vllm_metrics": f"{base}/metrics", "gateway_metrics": f"{base}/gateway/metrics",
                        "dcgm_metrics": f"{base}/dcgm/metrics"})  # fmt: skip
    targets = tuple(demo if name == "demo" else dataclasses.replace(demo, name=name, reference=False, sweet_spot=CAPACITY)
                    for name in histories)  # fmt: skip
    engine = open_engine(url)
    writer = Writer(engine)
    today = now // DAY * DAY
    for target in targets:
        days, peak, growth, seed = histories[target.name]
        writer.register_target(target)
        samples = generate_history(today - days * DAY, now, STEP_S, seed, peak_clients=peak, growth_per_day=growth)
        writer.write_rounds(rounds_from_history(target, samples))
    rollup(engine, now + 3600)
    engine.dispose()
    return Settings(db_url=url, targets=targets)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('headroom')}/h.db"
    return url, write_history(url, NOW, HISTORIES)


def test_the_daily_peaks_leave_out_the_current_day(stored):
    url, _ = stored
    peaks = Reader(url).daily_peaks("demo", TODAY - 30 * DAY, 31)  # the current day asked for too
    assert [p.day for p in peaks] == [TODAY - (30 - d) * DAY for d in range(31)]
    assert peaks[-1].demand is None, "10 hours of the current day: not a day"
    known = [p for p in peaks if p.demand is not None]
    assert len(known) == 21 and known[0].day == TODAY - 21 * DAY
    pattern = DailyPattern(0, 6.0, 0.03, TODAY - 21 * DAY)
    for p in known:  # what was stored is the knob's demand, within the simulator's rounding and noise
        assert p.demand == pytest.approx(true_peak(pattern, p.day), rel=0.25, abs=1.0), p


def test_a_known_growth_crosses_within_the_stated_range(stored):
    url, settings = stored
    started = time.perf_counter()
    room = headroom(Reader(url), settings, "demo", NOW)
    took = time.perf_counter() - started
    truth = true_crossing("demo")
    assert room.state == CROSSING, room.text()
    assert room.earliest is not None and room.in_days is not None
    assert room.earliest <= truth <= (room.latest or 10**9), (truth, room)
    assert room.growth == pytest.approx(0.03, abs=2 * (room.growth_se or 0)), room
    assert "leaves the sweet spot (16 running, reference)" in room.text()
    print(f"\ndemo: truth day {truth}, forecast ~{room.in_days} ({room.earliest}–{room.latest}), "
          f"growth {room.growth:.4f} ± {room.growth_se:.4f}, {took:.3f} s with the reads")  # fmt: skip


def test_flat_demand_has_no_trend(stored):
    url, settings = stored
    room = headroom(Reader(url), settings, "flat", NOW)
    assert room.state == NO_TREND, room.text()
    assert room.text().startswith("no trend (") and "within 2 standard errors of 0" in room.text()


def test_five_days_are_too_short(stored):
    url, settings = stored
    room = headroom(Reader(url), settings, "short", NOW)
    assert (room.state, room.days) == (TOO_SHORT, 5)
    assert room.text() == f"history too short: 5 of the {MIN_DAYS} whole days of peak-hour demand a forecast needs (2 more)"


def test_the_digest_says_the_forecast(stored):
    url, settings = stored
    engine = open_engine(url)
    try:
        text = digest.render_text(digest.build(Reader(url), engine, settings, NOW - DAY, NOW))
    finally:
        engine.dispose()
    demo = text.split("\ndemo:")[1].split("\nflat:")[0]
    # the growth said is the simulator's 3 %/day, within the rounding of whole requests (2.9 with the irregular)
    said = re.search(r"headroom: at this growth \(\+(\d+\.\d) %/day ± (\d+\.\d)", demo)
    assert said and abs(float(said.group(1)) - 3.0) <= 0.5, demo
    assert "the peak leaves the sweet spot (16 running, reference) in ~" in demo
    assert "headroom: no trend (" in text.split("\nflat:")[1].split("\nshort:")[0]
    assert "headroom: history too short: 5 of the 7" in text.split("\nshort:")[1]


# -- the forecast alone -----------------------------------------------------------------------------------
def test_no_sweet_spot_no_forecast():
    room = forecast([10.0] * 14, None)
    assert (room.state, room.cell()) == (UNKNOWN, "unknown")
    assert room.text() == "no forecast: the sweet spot is unknown"


def test_a_peak_past_the_sweet_spot_is_said_so():
    room = forecast([10.0] * 10 + [17.0, 12.0], 16.0, "configured")
    assert room.state == ABOVE
    assert room.text() == "the peak is already past the sweet spot (16 running, configured): 17 in the peak hour of the last 7 days"


def test_a_missing_day_is_skipped_not_zero():
    grown = [6.0 * 1.04**d for d in range(21)]
    with_gap = [*grown[:10], None, *grown[11:]]
    a, b = forecast(grown, 16.0), forecast(with_gap, 16.0)
    assert a.state == b.state == CROSSING and b.days == 20
    assert abs((a.in_days or 0) - (b.in_days or 0)) <= 1


def test_already_past_comes_first_whatever_the_history_length():
    # issue 37: the demo's first days are past its sweet spot (26 against 16), which "too short" hid
    room = forecast([17.0, 26.0], 16.0, "reference")
    assert (room.state, room.days) == (ABOVE, 2)
    assert room.text().startswith("the peak is already past the sweet spot (16 running, reference): 26")
    assert forecast([10.0, 11.0], 16.0).state == TOO_SHORT


def test_status_json_of_the_demo_says_headroom_already_past(tmp_path, monkeypatch, capsys):
    from app.cli import main
    from app.commands import status

    url = f"sqlite:///{tmp_path}/demo.db"
    write_history(url, NOW, {"demo": (2, 28.0, 0.0, 0)})  # the demo's own load: 28 clients at the peak
    (tmp_path / "demo.toml").write_text(f'db_url = "{url}"\n')  # no target: the demo's own status
    monkeypatch.setattr(status.time, "time", lambda: float(NOW))  # the data's clock, not the wall's
    assert main(["--config", str(tmp_path / "demo.toml"), "status", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["sweet_spot"] == 16 and doc["headroom"]["state"] == ABOVE
    assert doc["headroom"]["text"].startswith("the peak is already past the sweet spot (16 running, reference)")


def test_a_recent_turn_is_seen_and_flat_weekly_and_step_histories_keep_no_trend():
    # issue 37 item 4: a month flat at 8 that began growing 5 %/day ten days ago, 20 seeds (bench/bench_headroom.py)
    from bench.bench_headroom import turn_counts

    counts = turn_counts(20)
    assert counts["turn"] >= 15, counts
    assert min(counts["flat"], counts["weekly"], counts["step"]) >= 18, counts
