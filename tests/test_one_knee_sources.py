"""Every source of a sweet spot through the one knee rule (issue 37): a sweep and the learner fed the
same levels agree; imported benchmark runs are a source of their own, ranked with sweeps by date; the
learner starts from fewer minutes saying its confidence, and never judges inside a bucket."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from app.bench_files import read_bench
from app.sweet_spot import BENCHMARK, SWEEP, bench_levels, resolve
from core.histogram_slo import CANNOT_TELL
from core.learner import Sample, StepSlo, learn
from core.settings import Settings
from db.benches import store_bench
from db.engine import open_engine
from db.queries import Reader
from db.results import BenchPoint, BenchRun, SweepLevel
from db.sweeps import store_sweep
from db.writer import Writer
from sweep.verdict import recommend
from tests.ui_db import demo_sweep, target_settings

DATA = Path(__file__).parent / "data" / "bench"
LEVELS = (2, 4, 8, 12, 16, 20, 24, 28, 32)
T0 = 1_780_000_000.0


def saturating(c: float) -> float:
    return 9.0 * c if c <= 14 else 126.0 + 1.0 * (c - 14)


def sweep_level(c: int, ttft: float = 1.0, requests: int = 100) -> SweepLevel:
    return SweepLevel(c, 600.0, requests, 0, saturating(c), None, None, ttft, None, None, None, None, 0.0)


def test_sweep_and_learner_fed_the_same_levels_return_the_same_knee_and_sweet_spot():
    for ttft in (lambda c: 1.0, lambda c: 4.0 if c >= 16 else 1.0):
        verdict = recommend([sweep_level(c, ttft(c)) for c in LEVELS], ttft_slo_s=3.0)
        learned = learn([Sample(float(c), saturating(c), ttft(c)) for c in LEVELS for _ in range(30)], 3.0)
        assert learned.found is not None
        assert learned.found.knee == verdict["knee_concurrency"] == 16
        assert learned.knee == verdict["sweet_spot_concurrency"]
    assert learned.knee == 12  # the second: TTFT past the SLO from 16 caps both at 12


def test_the_learner_starts_from_a_quarter_of_its_minutes_and_says_its_confidence_is_low():
    samples = [Sample(float(c), saturating(c), 1.0) for c in LEVELS for _ in range(5)]  # 45 minutes
    learned = learn(samples, 3.0)
    assert learned.knee == 16
    assert learned.reason.endswith("low confidence: 45 of the 120 busy minutes it wants (the number may move as traffic comes)")
    full = learn([Sample(float(c), saturating(c), 1.0) for c in LEVELS for _ in range(15)], 3.0)
    assert full.knee == 16 and "low confidence" not in full.reason


def test_a_level_whose_buckets_cannot_tell_is_never_the_sweet_spot():
    # vLLM's (2.5, 5] bucket around a 3 s SLO: 93 % of 16's requests under 2.5 s, 98 % under 5 s. The
    # median P95 interpolated inside the bucket (2.9 s) would pass; the bounds prove nothing.
    def step_slo(c: int) -> StepSlo:
        return StepSlo(50.0, 0.99, 1.0, (2.5, 5.0)) if c < 16 else StepSlo(50.0, 0.93, 0.98, (2.5, 5.0))

    samples = [Sample(float(c), saturating(c), 2.9 if c >= 16 else 1.0, 1.0, step_slo(c)) for c in LEVELS for _ in range(30)]
    learned = learn(samples, 3.0)
    sixteen = next(lv for lv in learned.levels if lv.concurrency == 16)
    assert sixteen.judgement is not None and sixteen.judgement.state == CANNOT_TELL
    assert learned.knee == 12 and "cannot tell against 3 s: P95 in (2.5, 5] s" in learned.reason
    # the same shares at 16 proving 96 % under 2.5 s: within, and the knee stands
    proven = [dataclasses.replace(s, slo=StepSlo(50.0, 0.96, 1.0, (2.5, 5.0))) for s in samples]
    assert learn(proven, 3.0).knee == 16


def _db(tmp_path: Path) -> tuple[str, Settings]:
    url = f"sqlite:///{tmp_path / 'sources.db'}"
    writer = Writer(open_engine(url))
    writer.register_target(target_settings("sim"))
    writer.close()
    return url, Settings(db_url=url, targets=(target_settings("sim"),))


def bench_run(at: float, concurrency: int, tok_s: float, ttft: float | None) -> BenchRun:
    point = BenchPoint(float(concurrency), "max_concurrency", tok_s, 200, 0, 600.0, None, ttft)
    return BenchRun("vllm bench serve", at, "sweetspot/sim-70b-awq", {"max_concurrency": concurrency}, (point,),
                    f"c{concurrency}.json", "sim")


def test_four_vllm_bench_files_are_one_curve_and_a_source_of_their_own_ranked_with_sweeps_by_date(tmp_path):
    # vllm bench serve at 2, 4, 8, 16 (one file each): 8 → 16 buys +15 %: the knee is 8
    url, settings = _db(tmp_path)
    engine = open_engine(url)
    for i, (c, tok) in enumerate(((2, 60.0), (4, 115.0), (8, 200.0), (16, 230.0))):
        store_bench(engine, bench_run(T0 + 600 * i, c, tok, 0.4), T0 + 3600)
    spot = resolve(Reader(url), settings, "sim", T0 + 3600)
    assert (spot.value, spot.source, spot.curve_source) == (8, BENCHMARK, BENCHMARK)
    assert spot.found is not None and spot.found.knee == 8 and "vllm bench serve runs of" in spot.detail
    # a sweep measured later ranks first; one measured before the benchmarks does not
    store_sweep(engine, demo_sweep(T0 + 7200, "http://127.0.0.1:8000/v1", "sim"))
    later = resolve(Reader(url), settings, "sim", T0 + 7200 + 1200)  # another 10-minute slot: read again
    assert (later.value, later.source) == (16, SWEEP)
    engine.dispose()
    url2, settings2 = _db(tmp_path / "b")
    engine = open_engine(url2)
    store_sweep(engine, demo_sweep(T0 - 86400, "http://127.0.0.1:8000/v1", "sim"))
    for i, (c, tok) in enumerate(((2, 60.0), (4, 115.0), (8, 200.0), (16, 230.0))):
        store_bench(engine, bench_run(T0 + 600 * i, c, tok, 0.4), T0 + 3600)
    assert resolve(Reader(url2), settings2, "sim", T0 + 3600).source == BENCHMARK
    engine.dispose()


def test_a_sweeps_stored_number_is_what_every_surface_shows(tmp_path):
    url, settings = _db(tmp_path)
    engine = open_engine(url)
    run = demo_sweep(T0, "http://127.0.0.1:8000/v1", "sim")
    store_sweep(engine, dataclasses.replace(run, recommendation=recommend(run.levels, run.ttft_slo_s)))
    spot = resolve(Reader(url), settings, "sim", T0 + 60)
    (stored,) = Reader(url).sweep_runs()
    assert spot.value == stored.recommendation["sweet_spot_concurrency"] == 16
    assert spot.as_json()["knee"] == 16 and spot.source == SWEEP
    engine.dispose()


def test_bench_levels_read_the_real_vllm_bench_file():
    files = sorted(DATA.glob("*.json"))
    runs = [read_bench(f.read_text(encoding="utf-8"), f.name) for f in files]
    vllm = [r for r in runs if r.tool == "vllm bench serve"]
    levels = bench_levels(vllm)
    assert levels and all(lv.tokens_per_s and lv.tokens_per_s > 0 for lv in levels)
    assert [lv.concurrency for lv in levels] == sorted({lv.concurrency for lv in levels})
