"""Each target's own sweet spot (issues 28, 37): the learner (core/learner.py, on the one knee rule of core/knee.py) on synthetic curves and on the
simulator of the reference (its truth: the knee at 16), the sources in order (configured, sweep,
learned, reference, unknown) through `status --json`, and the under_delivering rule against a
slowed simulator (fires within 15 minutes of the fault, on the simulator's timeline) and never over
the demo's simulated week nor at the report's operating points 8, 16 and 32."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from app.alerts.rules import DEFAULT_RULES, Names, by_name, outcome
from app.sweet_spot import REFERENCE, SweetSpot, resolve
from collectors.dcgm import parse_dcgm
from collectors.gateway import queue_from_prometheus
from collectors.records import GatewayReading, ScrapeRound, SourceResult
from collectors.vllm import parse_vllm
from core.knee import monotone_fit
from core.learner import MIN_MINUTES, Sample, expected_at, learn
from core.settings import Settings, SweetSpotSettings
from db.engine import open_engine
from db.queries import Reader
from db.rollup import rollup
from db.sweeps import store_sweep
from db.writer import Writer
from simulator import generate_history
from tests.builders import window
from tests.ui_db import DEMO_URLS, GATEWAY_METRIC, demo_sweep, target_settings

DAY = 86400.0
START = 1_780_000_000.0 - 1_780_000_000.0 % DAY  # midnight UTC: the daily pattern's day starts here
SLO = 3.0


def saturating(c: float) -> float:
    """A curve with its knee near 16: linear to 14, then barely rising (the report's shape)."""
    return 9.0 * c if c <= 14 else 126.0 + 1.0 * (c - 14)


def minutes(levels: dict[int, int], curve=saturating, ttft=lambda c: 1.0) -> list[Sample]:
    return [Sample(float(c), curve(c), ttft(c)) for c, n in levels.items() for _ in range(n)]


# -- the learner, pure ------------------------------------------------------------------------------
def test_monotone_fit_pools_what_falls_and_keeps_what_rises():
    assert monotone_fit([1.0, 3.0, 2.0, 4.0], [1.0, 1.0, 1.0, 1.0]) == [1.0, 2.5, 2.5, 4.0]
    assert monotone_fit([5.0, 1.0], [3.0, 1.0]) == [4.0, 4.0]  # weighted by minutes


def test_the_knee_of_a_saturating_curve():
    learned = learn(minutes({c: 30 for c in (2, 4, 8, 12, 16, 20, 24, 28, 32)}), SLO)
    # the one rule: 12 → 24 buys +26 % (108 → 136), 16 → 32 only +12 % (128 → 144): the gain crosses
    # +25 % at 12.3, the middle of that doubling is 17.4, and the highest level under it is 16
    assert learned.knee == 16 and learned.plateau == pytest.approx(144.0)
    assert learned.rests_on == "270 minutes at 9 concurrency levels"
    assert learned.reason == ("the knee of its own curve at 16 (doubling stops buying +25 % tok/s at 12.3 (12→24 +26 % "
                              "tok/s (108 → 136), 16→32 +12 % tok/s (128 → 144)), its doubling's middle 17.4)")


def test_the_knee_steps_back_below_the_first_level_that_breaks_the_slo():
    learned = learn(minutes({c: 30 for c in (2, 4, 8, 12, 16, 20, 24, 28, 32)}, ttft=lambda c: 4.0 if c >= 16 else 1.0), SLO)
    assert learned.knee == 12
    assert learned.reason.endswith("capped at 12: TTFT P95 4.00 s > 3 s at 16")


def test_a_low_level_breach_that_higher_levels_do_not_share_caps_nothing():
    # a night of long prompts at 2 running: TTFT P95 4 s there, 1 s from 4 to 12, past the SLO from 16 on
    ttft = lambda c: 4.0 if c == 2 or c >= 16 else 1.0  # noqa: E731
    learned = learn(minutes({c: 30 for c in (2, 4, 8, 12, 16, 20, 24, 28, 32)}, ttft=ttft), SLO)
    assert learned.knee == 12 and learned.reason.endswith("capped at 12: TTFT P95 4.00 s > 3 s at 16")


def test_the_minimums_and_the_grain_are_settings_and_samples_weigh_their_minutes():
    from core.learner import Limits

    # 5-s samples (a twelfth of a minute each): 20 s at each of five levels, 100 s in all
    fine = [Sample(float(c), saturating(c), 1.0, 5 / 60) for c in (2, 8, 16, 24, 32) for _ in range(4)]
    refused = learn(fine, SLO)  # production's minimums: 1.7 busy minutes of the 30 it starts from
    assert refused.knee is None and refused.reason.startswith("1.7 busy minutes, it needs 30 to start and 120 to be confident")
    lowered = learn(fine, SLO, limits=Limits(min_minutes=1.0, min_levels=4, min_level_minutes=10 / 60))
    assert lowered.knee is not None and lowered.rests_on == "1.7 minutes at 5 concurrency levels"
    assert lowered.levels[0].minutes == pytest.approx(20 / 60)


def test_the_learner_settings_are_read_and_bad_ones_refused(tmp_path):
    from app.loader import load_settings
    from core.settings import ConfigError

    path = tmp_path / "s.toml"
    path.write_text('[learner]\nstep_s = "5s"\nmin_busy_s = "60s"\nmin_level_s = "10s"\n')
    learner = load_settings(path).learner
    assert (learner.step_s, learner.min_busy_s, learner.min_level_s, learner.min_levels, learner.span_s) == (5.0, 60.0, 10.0, 4, 7 * DAY)
    for bad in ('step_s = "0s"', "min_levels = 1", 'min_busy_s = "-1s"'):
        path.write_text(f"[learner]\n{bad}\n")
        with pytest.raises(ConfigError, match="learner"):
            load_settings(path)


@pytest.mark.parametrize(("levels", "curve", "said"), [
    ({4: 5, 8: 5, 16: 5}, saturating, f"15 busy minutes, it needs 30 to start and {MIN_MINUTES} to be confident: 1.8 more hours"),
    ({4: 100, 8: 100}, saturating, "2 concurrency levels, it needs 4: 0.1 more hours at other loads"),
    ({c: 30 for c in (1, 2, 3, 4, 5, 6, 7, 8)}, lambda c: 12.0 * c,  # never past the knee: no plateau to see
     "the curve has not reached its knee up to concurrency 8 (doubling still buys at least +25 % tok/s up to 5)"),
])  # fmt: skip
def test_the_learner_refuses_to_guess_and_says_what_it_needs(levels, curve, said):
    learned = learn(minutes(levels, curve), SLO)
    assert learned.knee is None and said in learned.reason
    assert learned.more_hours is not None and learned.more_hours > 0


def test_idle_minutes_and_the_busiest_five_percent_are_left_out():
    samples = minutes({c: 30 for c in (2, 4, 8, 12, 16, 20, 24, 28, 32)}) + [Sample(0.2, 0.0)] * 500
    samples += [Sample(40.0, 400.0)] * 10  # a few minutes of gauge noise at the top: not a plateau
    learned = learn(samples, SLO)
    assert learned.minutes == 280 and learned.knee == 16


def test_the_curve_between_through_and_past_its_points():
    curve = ((8.0, 85.0), (16.0, 126.0), (32.0, 145.0))
    assert expected_at(curve, 4.0) == pytest.approx(42.5)  # through the origin under the first point
    # linear in log(concurrency) between two points: a serving curve is concave, and the straight chord
    # (105.5) lay so far under it that a GPU 25 % slower still read 81 % of its curve (docs/scenarios.md)
    assert expected_at(curve, 12.0) == pytest.approx(85.0 + 41.0 * math.log(1.5) / math.log(2.0))
    assert expected_at(curve, 16.0) == 126.0 and expected_at(curve, 8.0) == 85.0  # through its points
    assert expected_at(curve, 64.0) == 145.0  # its plateau past the last
    assert expected_at((), 8.0) is None


# -- the simulator of the reference: the truth is a knee at 16 --------------------------------------
def _rounds(target: str, start: float, end: float, **history):
    for sample in generate_history(start, end, 30.0, **history):
        ok = SourceResult(True)
        gateway = GatewayReading(queue_from_prometheus(sample.gateway, GATEWAY_METRIC), "sweetspot-sim")
        yield ScrapeRound(target, sample.ts, parse_vllm(sample.vllm), ok, gateway, ok,
                          parse_dcgm(sample.dcgm, peak_bw_gbps=900.0), ok)  # fmt: skip


@pytest.fixture(scope="module")
def varied_day(tmp_path_factory):
    """A day of the simulator's daily load behind a gateway limit of 32 (1 to 32 running), stored
    through the collector's parsers, writer and rollup."""
    url = f"sqlite:///{tmp_path_factory.mktemp('day') / 'day.db'}"
    engine = open_engine(url)
    writer = Writer(engine)
    writer.register_target(target_settings("sim"))
    writer.write_rounds(_rounds("sim", START, START + DAY, seed=0, gateway_limit=32, peak_clients=40.0))
    rollup(engine, START + DAY)
    engine.dispose()
    return url


def test_the_learner_finds_the_reference_knee_on_the_simulator_from_a_day_of_varied_load(varied_day):
    settings = Settings(db_url=varied_day, targets=(target_settings("sim"),))
    spot = resolve(Reader(varied_day), settings, "sim", START + DAY)
    assert spot.source == "learned" and spot.value is not None
    assert abs(spot.value - 16) <= 2, spot.detail  # issue 37: 15 (seed 0, 3 s SLO), docs/benchmarks.md
    # with an SLO of 10 s the doubling rule, not a bucket, sets it: 16
    from app.sweet_spot import learn_from_history

    loose = learn_from_history(Reader(varied_day), settings.learner, "sim", START + DAY, 10.0)
    assert loose is not None and loose.knee is not None and abs(loose.knee - 16) <= 2, loose.reason
    assert spot.learned is not None and spot.learned.minutes >= 1200 and len(spot.learned.levels) >= 20
    assert spot.curve_source == "learned" and spot.expected(16.0) == pytest.approx(129.0, rel=0.05)


@pytest.mark.slow  # 1.7 days of history and 250 evaluations: ~20 s of CPU
def test_a_slowed_period_does_not_teach_the_learner_a_lower_curve(tmp_path):
    """Issue 28: a degraded period must not feed the fit. A clean day of varied load, then the next
    day's busy hours with the GPUs 30 % slower (the simulator's fault knob) while the product's
    evaluator judges every minute against the learned curve: the minutes it stored as under-delivering
    are left out, so what is learned after the fault stays where it was before it; the same history
    with the faulty minutes kept in shows what leaving them out prevents."""
    from app.alerts.evaluator import Evaluator
    from app.sweet_spot import learn_from_history

    fault = _first_busy(START + DAY + 6 * 3600, 20.0)
    end = fault + 4 * 3600
    url = f"sqlite:///{tmp_path / 'slowed.db'}"
    engine = open_engine(url)
    writer = Writer(engine)
    writer.register_target(target_settings("sim"))
    writer.write_rounds(_rounds("sim", START, end, seed=0, gateway_limit=32, peak_clients=40.0, slowdown=0.3,
                                slowdown_from=fault))  # fmt: skip
    rollup(engine, end)
    settings = Settings(db_url=url, targets=(target_settings("sim"),))
    reader = Reader(url)
    before = learn_from_history(reader, settings.learner, "sim", fault, SLO)
    evaluator = Evaluator(engine, settings)
    for at in range(int(fault - 600), int(end), 60):  # every minute of the data's own clock
        evaluator.evaluate_once(at)
    held = [v for v in reader.verdicts("sim", fault, end) if "under_delivering" in v.held]
    after = learn_from_history(reader, settings.learner, "sim", end, SLO)
    kept_in = learn_from_history(reader, settings.learner, "sim", end, SLO, leave_out_faults=False)
    engine.dispose()
    assert before is not None and after is not None and kept_in is not None
    assert before.knee is not None and before.plateau is not None

    def drop(learned) -> float:  # the most the curve fell, as a share of before's, at any concurrency 4-32
        return max(1 - (expected_at(learned.curve, c) or 0.0) / (expected_at(before.curve, c) or 1.0) for c in range(4, 33))

    print(f"before the fault: knee {before.knee} ({before.reason}; {before.rests_on}); after 4 h slowed ({len(held)} "
          f"minutes held under_delivering): knee {after.knee} ({after.reason}), curve down {drop(after):.1%} at most; "
          f"faults kept in: knee {kept_in.knee} ({kept_in.reason}), curve down {drop(kept_in):.1%} at most")  # fmt: skip
    assert len(held) >= 180  # most of the 4 slowed hours were judged a fault
    # X: the slowed period moves the learned curve by under 2 % at any concurrency, and the knee by at most one
    assert after.knee is not None and abs(after.knee - before.knee) <= 1 and drop(after) < 0.02
    # kept in, the same slowed minutes pull the curve down (what leaving them out prevents)
    assert drop(kept_in) > 0.05


def test_the_evaluator_stores_what_it_learned_and_every_reader_shows_that_number(varied_day, tmp_path):
    """Issue 28: the learned sweet spot is learned by the evaluator (every 10 minutes) and stored
    with what it rests on and its configuration epoch; readers (status, pages, digest, e-mails: all
    through resolve) show the stored number while it is fresh, and the learned_history view shows
    how it moved."""
    import shutil

    from sqlalchemy import text

    from app.alerts.evaluator import Evaluator
    from app.sweet_spot import STORED_FRESH_S

    path = tmp_path / "day.db"
    shutil.copy(varied_day.removeprefix("sqlite:///"), path)
    url = f"sqlite:///{path}"
    engine = open_engine(url)
    settings = Settings(db_url=url, targets=(target_settings("sim"),))
    at = int(START + DAY)
    Evaluator(engine, settings).evaluate_once(at)
    with Reader(url).engine.connect() as conn:  # the reader's connection has the views' SQL functions
        (row,) = conn.execute(text("SELECT target, learned_at, knee, plateau_tokens_per_s, minutes, levels, reason, "
                                   "ttft_slo_s, config_epoch, models FROM learned_history")).all()  # fmt: skip
    learned = resolve(Reader(url), settings, "sim", at, learn_now=True).learned
    assert learned is not None and learned.knee is not None
    assert (row.target, row.learned_at, row.knee, row.levels, row.ttft_slo_s) == ("sim", at, learned.knee, len(learned.levels), SLO)
    assert row.plateau_tokens_per_s == pytest.approx(learned.plateau) and row.minutes == learned.minutes
    assert row.config_epoch is not None and row.config_epoch <= at and row.reason == learned.reason
    # a reader 5 minutes later shows the stored number, not one of its own: the stored knee, changed
    # here by hand to tell the two apart, is what it reads; once older than STORED_FRESH_S it learns again
    with engine.begin() as conn:
        conn.execute(text("UPDATE learned_sweet_spots SET knee = 9"))
    read = resolve(Reader(url), settings, "sim", at + 300)
    assert (read.value, read.source) == (9, "learned") and read.learned is not None and read.learned.plateau == row.plateau_tokens_per_s
    assert resolve(Reader(url), settings, "sim", at + STORED_FRESH_S + 600).value == learned.knee
    # kept as long as the minute rollups it was learned from
    from db.rollup import apply_retention

    deleted = apply_retention(engine, at + 200, dataclasses.replace(settings, raw_retention_s=60.0, rollup_retention_s=60.0))
    assert deleted["learned_sweet_spots"] == 1
    engine.dispose()


def test_sources_in_order_configured_then_sweep_then_learned(varied_day, tmp_path):
    reader, now = Reader(varied_day), START + DAY
    configured = Settings(db_url=varied_day, targets=(dataclasses.replace(target_settings("sim"), sweet_spot=12),))
    assert (resolve(reader, configured, "sim", now).value, resolve(reader, configured, "sim", now).source) == (12, "configured")
    # a stored sweep of this target beats what was learned: its knee, and its levels as the curve
    url = f"sqlite:///{tmp_path / 'swept.db'}"
    engine = open_engine(url)
    writer = Writer(engine)
    writer.register_target(target_settings("sim"))
    writer.write_rounds(_rounds("sim", START, START + 3600, seed=0))
    store_sweep(engine, demo_sweep(START, "http://127.0.0.1:8000/v1", "sim"))
    swept = resolve(Reader(url), Settings(db_url=url, targets=(target_settings("sim"),)), "sim", START + 3600)
    assert (swept.value, swept.source, swept.curve_source) == (16, "sweep", "sweep")
    assert swept.curve == ((8.0, 85.0), (16.0, 126.0), (32.0, 145.0))


def test_an_hour_of_low_load_gives_no_sweet_spot_and_the_concurrency_rule_says_how_to_get_one(tmp_path, capsys):
    from app.cli import main

    url = f"sqlite:///{tmp_path / 'young.db'}"
    engine = open_engine(url)
    writer = Writer(engine)
    writer.register_target(target_settings("young"))
    now = START + 3 * 3600  # the small hours: a few running
    writer.write_rounds(_rounds("young", now - 3600, now, seed=0))
    rollup(engine, now)
    spot = resolve(Reader(url), Settings(db_url=url, targets=(target_settings("young"),)), "young", now)
    assert (spot.value, spot.source) == (None, None)
    assert spot.learned is not None and spot.learned.reason.startswith("1 concurrency levels, it needs 4")
    # every way to get a number, and the learner's progress line with its age (learned on read: now)
    said = spot.missing()
    for way in ("`python -m app sweep --target NAME`", "`python -m app bench import FILE --target NAME`",
                "set targets[].sweet_spot", "more hours at higher load", "(the learner, 0 min ago: 1 concurrency levels"):
        assert way in said, said
    aged = dataclasses.replace(spot, as_of=now + 420)
    assert "(the learner, 7 min ago: " in aged.missing()
    # status --json (window ending now: the figures are old, the sweet spot too): null and null
    config = tmp_path / "s.toml"
    config.write_text(f'db_url = "{url}"\n[[targets]]\nname = "young"\nvllm_url = "http://127.0.0.1:1/metrics"\n')
    assert main(["--config", str(config), "status", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["sweet_spot"] is None and doc["sweet_spot_source"] is None


def test_status_json_of_the_demo_names_the_reports_sweet_spot(tmp_path, capsys):
    from app.cli import main

    url = f"sqlite:///{tmp_path / 'demo.db'}"
    engine = open_engine(url)
    writer = Writer(engine)
    writer.register_target(target_settings("demo"))
    writer.write_rounds(_rounds("demo", START, START + 600, seed=0))
    (tmp_path / "empty.toml").write_text(f'db_url = "{url}"\n')  # no target: the demo's own dashboard and status
    assert main(["--config", str(tmp_path / "empty.toml"), "status", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["sweet_spot"], doc["sweet_spot_source"]) == (16, REFERENCE)
    assert "reference report" in doc["sweet_spot_detail"]


# -- under_delivering: a slowed simulator, the demo's week, the report's operating points ------------
def _first_busy(after: float, clients: float) -> float:
    from simulator.pattern import DailyPattern

    pattern, ts = DailyPattern(0), after
    while not (pattern.state(ts).clients >= clients and not any(pattern.state(ts + m * 60).storm for m in range(-40, 40))):
        ts += 300
    return ts


@pytest.mark.parametrize("slowdown", [0.3])
def test_under_delivering_fires_within_15_minutes_of_a_slowed_gpu_on_the_simulator_timeline(tmp_path, slowdown):
    from app.alerts.evaluator import Evaluator
    from app.alerts.model import FIRING
    from app.alerts.store import load_states
    from app.commands.run import demo_target

    fault = _first_busy(START + 6 * 3600, 10.0)
    url = f"sqlite:///{tmp_path / 'fault.db'}"
    engine = open_engine(url)
    writer = Writer(engine)
    target = demo_target(DEMO_URLS)  # the demo's: judged against the report's curve
    writer.register_target(target)
    writer.write_rounds(_rounds("demo", fault - 1800, fault + 1200, seed=0, slowdown=slowdown, slowdown_from=fault))
    evaluator = Evaluator(engine, Settings(db_url=url, targets=(target,)))
    fired = None
    for at in range(int(fault - 1800 + 300), int(fault + 1200), 60):  # every minute of the data's own clock
        evaluator.evaluate_once(at)
        state = load_states(engine).get(("under_delivering", "demo", ""))
        if at < fault:
            assert state is None or state.state != FIRING, state
        elif state is not None and state.state == FIRING:
            fired = at
            break
    assert fired is not None and fired - fault <= 15 * 60, fired
    assert "against its own reference curve" in state.summary


@pytest.mark.slow  # a week backfilled through the demo's own path: ~100 s on two shared cores
def test_the_rule_never_fires_over_the_demos_simulated_week(tmp_path):
    from app.alerts.backtest import backtest
    from app.backfill import backfill
    from app.commands.run import BACKFILL_STEP_S, demo_target

    now = START + 8 * DAY
    url = f"sqlite:///{tmp_path / 'week.db'}"
    engine = open_engine(url)
    writer = Writer(engine)
    target = demo_target(DEMO_URLS)
    writer.register_target(target)
    backfill(writer, target, now - 7 * DAY, now, BACKFILL_STEP_S)
    rollup(engine, now)
    settings = Settings(db_url=url, targets=(target,))
    rule = by_name(DEFAULT_RULES, "under_delivering")
    result = backtest(Reader(url), settings, "demo", rule, now - 7 * DAY, now, 60.0)  # every minute of the week
    assert result.evaluations == 10080 and result.fired == 0 and result.firing_s == 0.0


@pytest.mark.parametrize("clients", [8, 16, 32])
def test_the_rule_holds_its_fire_at_the_reports_operating_points_and_not_with_a_slowed_gpu(clients):
    from simulator.calibrate import run_closed_loop
    from simulator.params import EngineConfig, EngineParams

    reference = SweetSpot(16, REFERENCE, "the report's", ((8.0, 85.0), (16.0, 126.0), (32.0, 145.0)), REFERENCE)
    rule = by_name(DEFAULT_RULES, "under_delivering")
    for slowdown, status in ((0.0, "clear"), (0.3, "holds")):
        config = EngineConfig(params=EngineParams(slowdown=slowdown))
        measured = run_closed_loop(clients, 600.0, clients, config, 60.0)
        figures = window(running_avg=float(clients), running_max=float(clients), tokens_per_s=measured["tokens_per_s"])
        names = Names(_names(figures, reference))
        assert outcome(rule, names).status == status, (clients, slowdown, measured["tokens_per_s"])


def _names(figures, spot):
    from app.alerts.names import window_names

    return window_names(figures, SweetSpotSettings(), (), spot)


def test_no_nan_or_division_by_zero_in_the_share():
    spot = SweetSpot(16, REFERENCE, "", ((8.0, 0.0),), REFERENCE)
    names = _names(window(running_avg=4.0, tokens_per_s=10.0), spot)
    assert names["curve_share"] is None and not math.isnan(names["expected_tokens_per_s"])


def test_the_stored_thresholds_hold_the_demos_reference_and_none_for_an_unconfigured_target():
    from app.collection import sweetspot_pairs
    from app.commands.run import demo_target

    pairs = dict(sweetspot_pairs(Settings(targets=(demo_target(DEMO_URLS), target_settings("prod")))))
    assert (pairs["*"].concurrency, pairs["demo"].concurrency, pairs["prod"].concurrency) == (None, 16, None)


# -- the cap reads the TTFT clients see: the engine's plus the gateway's wait -----------------------
def _behind_a_gateway(tmp_path, queue_at) -> str:
    """An hour of 15-s rounds, 6 minutes at each of 2, 4, 8, 12, 16, 20, 24, 28, 32 running on the
    saturating curve, 2 requests a second entering the engine with every first token under 0.5 s (its
    TTFT P95 0.48 s), ``queue_at(c)`` requests waiting at the gateway; written and rolled up as the
    collector does."""
    from tests.store_helpers import vllm_round

    url = f"sqlite:///{tmp_path / 'gw.db'}"
    engine = open_engine(url)
    writer = Writer(engine)
    writer.register_target(target_settings("gw"))
    gen = started = 0.0
    ts = START
    for c in (2, 4, 8, 12, 16, 20, 24, 28, 32):
        for _ in range(24):
            gen, started, ts = gen + saturating(c) * 15, started + 30, ts + 15
            round_ = vllm_round(ts, gen, target="gw", hist=(0.0, started, started, started), running=float(c))
            writer.write_round(dataclasses.replace(round_, gateway=GatewayReading(float(queue_at(c)), "test"),
                                                   gateway_status=SourceResult(True)))  # fmt: skip
    rollup(engine, ts + 60)
    engine.dispose()
    return url


def test_a_gateway_wait_moves_the_learners_cap_to_where_clients_pass_the_slo(tmp_path):
    """Issue 28: the knee is capped where the client-seen TTFT P95 passes the SLO. The engine's TTFT
    is 0.48 s at every level; from 16 running on, 20 requests wait at the gateway, admitted at 2 a
    second: a 10-s wait by Little's law, so clients see a TTFT P95 far past 3 s and the knee steps
    back to 12. The same engine with an empty gateway queue keeps its throughput knee (16)."""
    from app.sweet_spot import learn_from_history
    from core.settings import LearnerSettings

    learner = LearnerSettings(min_busy_s=1800.0, min_level_s=180.0)
    end = START + 9 * 24 * 15 + 1
    queued = _behind_a_gateway(tmp_path / "a", lambda c: 20 if c >= 16 else 0)
    capped = learn_from_history(Reader(queued), learner, "gw", end, SLO)
    empty = _behind_a_gateway(tmp_path / "b", lambda c: 0)
    free = learn_from_history(Reader(empty), learner, "gw", end, SLO)
    assert free is not None and capped is not None
    engine_ttft = {lv.concurrency: lv.ttft_p95_s for lv in free.levels}
    assert all(t is not None and t < 0.5 for t in engine_ttft.values()), engine_ttft
    assert free.knee == 16 and "capped" not in free.reason, free.reason
    client = {lv.concurrency: lv.ttft_p95_s for lv in capped.levels}
    assert all(t is not None and t > SLO for c, t in client.items() if c >= 16), client
    assert all(t is not None and t < 0.5 for c, t in client.items() if c < 16), client  # no queue: the engine's
    assert capped.knee == 12 and "capped at 12" in capped.reason, capped.reason
