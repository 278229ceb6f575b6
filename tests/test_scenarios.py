"""The scenario library (issue 40): its table is well formed and documented, the simulator's knobs
do what they say, the scorer's definitions hold on hand-made runs, and the fast subset runs through
the product's own ingestion, evaluator and stored verdicts with the figures it must keep."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.alerts.model import FIRING, INACTIVE, RESOLVED, Transition
from app.alerts.rules import DEFAULT_RULES
from app.scenarios import library, runner
from app.scenarios.library import EPOCH, FAULT, HEALTHY, SCENARIOS, WARMUP_S, Phase, Scenario, select
from app.scenarios.promtool import firing_of, go_seconds
from app.scenarios.score import score, total
from db.verdicts import IN_SWEET_SPOT, NO_DATA, OUTSIDE, StoredVerdict
from simulator.params import EngineParams
from simulator.scenario import Conditions, scenario_history

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_every_scenario_is_well_formed():
    names = [s.name for s in SCENARIOS]
    assert len(names) == len(set(names))
    rules = {r.name for r in DEFAULT_RULES}
    for s in SCENARIOS:
        assert all(0 <= p.start_s < p.end_s <= s.duration_s for p in s.phases), s.name
        if s.kind == FAULT:
            assert s.truth and s.clauses and set(s.clauses) <= rules, s.name
            assert s.truth[0][0] >= WARMUP_S, s.name
        else:
            assert s.kind == HEALTHY and not s.truth and not s.clauses, s.name
    faults = {s.name for s in SCENARIOS if s.kind == FAULT}
    near = {n for n in faults if n.endswith("_near")}
    assert near and all(n.removesuffix("_near") in faults or n.replace("_near", "_30") in faults for n in near)
    assert len(near) * 2 == len(faults), "every fault at two magnitudes, one near its threshold"
    healthy = {s.name for s in SCENARIOS if s.kind == HEALTHY}
    assert {"four_healthy_weeks", "restart_recovers", "blip_20s", "planned_sweep", "gateway_holds_queue"} <= healthy
    assert library.BY_NAME["four_healthy_weeks"].duration_s == 4 * library.WEEK_S


def test_docs_explain_every_scenario_and_the_command():
    text = (DOCS / "scenarios.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^### (\w+)$", text, re.MULTILINE))
    assert documented == {s.name for s in SCENARIOS}
    assert "## `scenarios`" in (DOCS / "commands.md").read_text(encoding="utf-8")


def test_select_names_the_unknown_scenario():
    assert [s.name for s in select("blip_20s,crash_loop")] == ["blip_20s", "crash_loop"]
    assert {s.name for s in select(None, fast_only=True)} == {s.name for s in SCENARIOS if s.fast}
    with pytest.raises(KeyError, match="nope"):
        select("blip_20s,nope")


def test_a_throttled_rank_slows_every_step_and_prefix_caching_spares_prefill():
    base = EngineParams()
    assert EngineParams(rank_slowdown=0.4).step_time_s(16, 0, 5e9) == pytest.approx(EngineParams(slowdown=0.4).step_time_s(16, 0, 5e9))
    assert EngineParams(rank_slowdown=0.4).step_time_s(16, 0, 5e9) == pytest.approx(base.step_time_s(16, 0, 5e9) / 0.6)
    cached = EngineParams(prefix_hit_share=0.7)
    assert cached.step_time_s(4, 200, 5e9) == pytest.approx(base.step_time_s(4, 200, 5e9) - 0.7 * 200 * base.prefill_s_per_token)
    assert cached.step_time_s(16, 0, 5e9) == base.step_time_s(16, 0, 5e9)  # decode alone is unchanged


def test_the_knobs_show_in_the_scraped_pages():
    phases = {(60.0, 120.0): Conditions(up=False), (120.0, 240.0): Conditions(error_per_s=0.5),
              (240.0, 300.0): Conditions(serving=False)}  # fmt: skip

    def at(ts: float) -> Conditions:
        return next((c for (a, b), c in phases.items() if a <= ts - EPOCH < b), Conditions())

    got = list(scenario_history(at, EPOCH, EPOCH + 300, 30.0))
    down = [s for s in got if s.sample is None]
    assert [s.ts - EPOCH for s in down] == [60.0, 90.0] and all("refused" in s.error for s in down)
    after = next(s for s in got if s.ts - EPOCH == 210.0).sample
    assert after is not None
    errors = re.search(r'vllm:request_success_total\{[^}]*finished_reason="error"[^}]*\} (\S+)', after.vllm)
    assert errors and float(errors.group(1)) >= 40  # 0.5 a second for ~90 s since the restart at 120 s
    stalled = next(s for s in got if s.ts - EPOCH == 270.0).sample
    assert stalled is not None
    assert re.search(r"^vllm:num_requests_running\{[^}]*\} 0(\.0)?$", stalled.vllm, re.MULTILINE)


def _t(rule: str, frm: str, to: str, at: float) -> Transition:
    return Transition(rule, "demo", "", frm, to, int(EPOCH + at), "critical")


def _verdicts(states: dict[int, str]) -> tuple[StoredVerdict, ...]:
    return tuple(StoredVerdict("demo", int(EPOCH) + m * 60, s, int(EPOCH) + m * 60, {}, {}) for m, s in states.items())


def test_the_scorer_counts_as_docs_scenarios_md_defines():
    sc = Scenario("x", FAULT, "", 1800.0, (Phase(600.0, 1200.0, out=True),), ("ttft_p95",))
    transitions = (
        _t("concurrency", INACTIVE, FIRING, 300.0),   # in the warm-up: not counted
        _t("preemptions", INACTIVE, FIRING, 660.0),   # during the fault, not its clause: not false either
        _t("ttft_p95", INACTIVE, FIRING, 750.0),      # detects after 150 s
        _t("ttft_p95", FIRING, RESOLVED, 1290.0),     # resolves 90 s after the fault's end
        _t("preemptions", FIRING, RESOLVED, 1230.0),
        _t("kv_cache", INACTIVE, FIRING, 1560.0),     # past the 5-minute lag: false
        _t("kv_cache", FIRING, RESOLVED, 1620.0),
    )  # fmt: skip
    states = {m: (OUTSIDE if 10 <= m < 20 else IN_SWEET_SPOT) for m in range(30)}
    states[12], states[25], states[26] = IN_SWEET_SPOT, NO_DATA, OUTSIDE  # one missed, two cried
    s = score(runner.Run(sc, EPOCH, transitions, _verdicts(states), 0))
    assert (s.caught, s.right_clause, s.detect_s) == (True, "ttft_p95", 150.0)
    assert s.false_firings == 1 and s.false_rules == ("kv_cache",)
    assert s.resolve_s == 90.0  # the fault's alerts: ttft_p95 stopped last, 90 s after its end
    assert (s.minutes, s.agreeing) == (20, 17)
    # a minute without data while out of the sweet spot is right unless it says OK
    states = {m: (NO_DATA if 10 <= m < 20 else IN_SWEET_SPOT) for m in range(30)}
    assert score(runner.Run(sc, EPOCH, (), _verdicts(states), 0)).agreeing == 20
    healthy = Scenario("h", HEALTHY, "", 1800.0)
    t = total([s, score(runner.Run(healthy, EPOCH, (_t("ttft_p95", INACTIVE, FIRING, 900.0),), (), 0))])
    assert (t.faults, t.caught, t.false_in_healthy, t.median_detect_s) == (1, 1, 1, 150.0)


def test_promtools_report_reads_back_as_transitions():
    report = '''  FAILED:
    expr: "ALERTS{alertstate=\\"firing\\"}", time: 11m15s,
        exp: nil
        got: {__name__="ALERTS", alertname="TTFTP95AboveSLO", alertstate="firing", instance="demo"} 1E+00
    expr: "ALERTS{alertstate=\\"firing\\"}", time: 11m30s,
        exp: nil
        got: {__name__="ALERTS", alertname="TTFTP95AboveSLO", alertstate="firing", instance="demo"} 1E+00
'''
    assert go_seconds("1h2m30s") == 3750.0
    got = firing_of(report, [660.0, 675.0, 690.0, 705.0])
    assert [(t.rule, t.to_state, t.at - EPOCH) for t in got] == [("ttft_p95", FIRING, 675.0), ("ttft_p95", RESOLVED, 705.0)]


@pytest.fixture(scope="module")
def fast_raw_runs(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("scenarios")
    return {s.name: runner.run(s, workdir) for s in select(None, fast_only=True)}


@pytest.fixture(scope="module")
def fast_runs(fast_raw_runs):
    return {name: score(run) for name, run in fast_raw_runs.items()}


def test_a_20_second_blip_fires_nothing_and_every_minute_reads_in_the_sweet_spot(fast_runs, fast_raw_runs):
    blip = fast_runs["blip_20s"]
    assert blip.false_firings == 0, blip.false_rules
    # a minute's verdict is its last evaluation's (judged with the minute's own scrapes), and 20 s of
    # refused scrapes is a blip, under target_down's `for`, not an outage that leaves the minute
    # unjudged (app/verdict.py): the refused scrapes' minute and the next read fine as the truth says
    run = fast_raw_runs["blip_20s"]
    odd = {v.ts - run.start: (v.state, v.not_judged) for v in run.verdicts
           if v.ts >= run.start + WARMUP_S and v.state != IN_SWEET_SPOT}  # fmt: skip
    assert odd == {} and (blip.minutes, blip.agreeing) == (15, 15)


def test_a_planned_sweep_holds_the_load_rules_and_says_so(fast_runs, fast_raw_runs):
    sweep = fast_runs["planned_sweep"]
    assert sweep.false_firings == 0, sweep.false_rules
    run = fast_raw_runs["planned_sweep"]
    loaded = [v for v in run.verdicts if run.start + WARMUP_S <= v.ts < run.start + WARMUP_S + 21 * 60]
    assert all(v.state == IN_SWEET_SPOT for v in loaded), [(v.ts - run.start, v.state) for v in loaded]
    # at 32 clients past the knee of 16: concurrency would hold; the minute says it was held, and why
    top = next(v for v in loaded if v.ts - run.start == WARMUP_S + 20 * 60)
    assert top.not_judged["concurrency"].startswith("held: load sweep 1 on this target"), top.not_judged
    # every other rule judges as always during a sweep
    assert "target_down" not in top.not_judged and "not_serving" not in top.not_judged


def test_scrapes_failing_for_3_minutes_are_caught_as_target_down_and_never_ok(fast_runs):
    failing = fast_runs["scrapes_failing_near"]
    assert (failing.caught, failing.right_clause) == (True, "target_down")
    assert failing.detect_s is not None and failing.detect_s <= 120.0
    assert failing.false_firings == 0
