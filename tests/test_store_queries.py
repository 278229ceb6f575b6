"""Rollups, retention, raw-vs-rollup equality, ceiling provenance, hostile strings, status CLI."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bench.synth import rounds
from collectors.records import INF, GpuReading, ScrapeRound, SourceResult
from core.settings import CeilingSettings, Settings, TargetSettings
from db import schema
from db.ceiling import compute_ceiling
from db.engine import open_engine
from db.queries import Reader
from db.results import SweepLevel, SweepRun
from db.rollup import GRACE_S, apply_retention, rollup
from db.sweeps import store_sweep
from db.writer import Writer
from tests.store_helpers import failed_round, one_round, vllm_round

DAY0 = 1_800_000_000 - 1_800_000_000 % 86400
REPO = Path(__file__).resolve().parent.parent


def _filled(db_url: str, hours: float = 2.0, start: float = DAY0) -> Any:
    engine = open_engine(db_url)
    writer = Writer(engine)
    # the reference's weights and TP; bandwidth from the GPUs' NVML peak (898 GB/s)
    writer.register_target(TargetSettings(name="t", ceiling=CeilingSettings(weight_gb=40.0, tensor_parallel=8)))
    writer.write_rounds(rounds("t", start, start + hours * 3600, restart_at=start + 2400, fail_every=97))
    return engine


def _dump(engine: Any, table: Any) -> list[Any]:
    with engine.connect() as conn:
        return sorted(conn.execute(select(table)).all(), key=repr)


def test_rollup_is_idempotent_and_rebuildable(db_url: str) -> None:
    engine = _filled(db_url)
    first = rollup(engine, DAY0 + 7200 + GRACE_S)
    assert first[60] >= 3 * 120 and first[3600] >= 3 * 2  # target, model and GPU rows
    tables = (schema.model_rollups, schema.target_rollups, schema.gpu_rollups)
    before = [_dump(engine, t) for t in tables]
    assert rollup(engine, DAY0 + 7200 + GRACE_S) == {60: 0, 3600: 0}
    assert rollup(engine, DAY0 + 7200 + GRACE_S + 20) == {60: 0, 3600: 0}  # no new finished minute
    rollup(engine, DAY0 + 7200, since=DAY0)
    assert [_dump(engine, t) for t in tables] == before


@pytest.mark.parametrize("step", [60, 300, 3600])
def test_rollups_answer_like_raw_rows(db_url: str, step: int) -> None:
    engine = _filled(db_url)
    rollup(engine, DAY0 + 7200 + GRACE_S)
    reader = Reader(db_url)
    raw = reader.series("t", DAY0, DAY0 + 7200, step, level=0)
    rolled = reader.series("t", DAY0, DAY0 + 7200, step)
    assert len(raw) == 7200 // step
    for a, b in zip(raw, rolled, strict=True):
        for f in dataclasses.fields(a):
            x, y = getattr(a, f.name), getattr(b, f.name)
            assert x == pytest.approx(y, rel=1e-9, abs=1e-12) if x is not None else y is None, (f.name, a.ts)
    assert any(p.up_ratio is not None and p.up_ratio < 1 for p in raw)  # failed scrapes were in there


def test_series_reads_raw_tail_after_rollups(db_url: str) -> None:
    engine = _filled(db_url)
    rollup(engine, DAY0 + 3600 + GRACE_S)  # the second hour is only in raw rows
    reader = Reader(db_url)
    mixed = reader.series_columns("t", DAY0, DAY0 + 7200, 60, fields=["tokens_per_s"])
    raw = reader.series_columns("t", DAY0, DAY0 + 7200, 60, fields=["tokens_per_s"], level=0)
    assert mixed["tokens_per_s"] == pytest.approx(raw["tokens_per_s"])


def test_window_figures_and_gaps(db_url: str) -> None:
    _filled(db_url, hours=0.5)
    reader = Reader(db_url)
    fig = reader.window("t", DAY0 + 1800, 300)
    assert fig.tokens_per_s is not None and 50 < fig.tokens_per_s < 400
    assert fig.ttft_p95_s is not None and fig.ttft_p50_s is not None and fig.ttft_p50_s <= fig.ttft_p95_s
    assert fig.ceiling_steps_per_s == pytest.approx(898 / 5)
    assert fig.ceiling_share == pytest.approx(fig.tokens_per_s / fig.ceiling_steps_per_s)
    assert [g.uuid for g in fig.gpus] == ["GPU-00000000", "GPU-00000001"]
    empty = reader.window("t", DAY0 + 86400, 300)
    assert empty.tokens_per_s is None and empty.up is None and empty.scrapes == 0
    assert reader.window("nope", DAY0, 300).up is None


def _two_models(ts: float, gen_a: float, gen_b: float | None) -> ScrapeRound:
    """A round of model "a", and of model "b" too when ``gen_b`` is given."""
    round_ = vllm_round(ts, gen_a, model="a")
    return round_ if gen_b is None else one_round(round_, vllm_round(ts, gen_b, model="b"))


def test_rates_divide_by_the_time_the_increases_cover(db_url: str) -> None:
    # Each model makes 100 tok/s, scraped every 5 s. The collector is stopped for two minutes and
    # one scrape fails: the increase after each gap covers it, so no step shows more than the rate
    # (divided by a 5 s step, the row after the stop showed 2500 tok/s), and a step the collector
    # saw only part of shows no less. Model "b" appears halfway: rates are per model, then summed.
    engine = open_engine(db_url)
    writer = Writer(engine)
    writer.register_target(TargetSettings(name="t"))
    rows: list[ScrapeRound] = []
    for i in range(120):
        ts = DAY0 + 5 * i + 0.3
        if 24 <= i < 48:
            continue  # the collector is stopped
        if i == 70:
            rows.append(failed_round(ts))
            continue
        rows.append(_two_models(ts, 500.0 * i, 500.0 * (i - 80) if i >= 80 else None))
    writer.write_rounds(rows)
    reader = Reader(db_url)

    def rates(step: int, level: int | None = None) -> set[float]:
        cols = reader.series_columns("t", DAY0, DAY0 + 600, step, fields=["tokens_per_s"], level=level)
        return {round(v, 6) for ts, v in zip(cols["ts"], cols["tokens_per_s"], strict=True) if v is not None}

    assert rates(5, level=0) == rates(15, level=0) == {100.0, 200.0}
    # b's first minute: a's 100, and b's 3 × 500 tokens after its baseline (its time before is zero)
    assert rates(60, level=0) == {100.0, 125.0, 200.0}
    rollup(engine, DAY0 + 600 + GRACE_S)
    assert rates(60) == rates(60, level=0)
    assert reader.window("t", DAY0 + 599, 60).tokens_per_s == pytest.approx(200.0)
    assert reader.window("t", DAY0 + 399, 300, model="a").tokens_per_s == pytest.approx(100.0)
    # The whole window: the rounds cover 595 s, from the first to the last (the round after the stop
    # covers the stop, with its tokens); b's 39 increases count over all of it, as Prometheus'
    # rate() counts a series that began inside the window.
    assert reader.window("t", DAY0 + 599, 600).tokens_per_s == pytest.approx(100.0 + 500 * 39 / 595)
    # one model's rate: its increases over the same time, the target's
    assert reader.window("t", DAY0 + 599, 600, model="b").tokens_per_s == pytest.approx(500 * 39 / 595)
    only_b = reader.series_columns("t", DAY0, DAY0 + 600, 60, fields=["tokens_per_s"], model="b")["tokens_per_s"]
    assert [None if v is None else round(v, 6) for v in only_b] == [None] * 6 + [25.0, 100.0, 100.0, 100.0]


def test_preemptions_per_second_divide_by_the_time_covered_too(db_url: str) -> None:
    # One preemption a minute, scraped once a minute; two scrapes missing: the step after them
    # holds three preemptions, over the three minutes they happened in (the chart's per-minute bars).
    writer = Writer(open_engine(db_url))
    writer.register_target(TargetSettings(name="t"))
    times = [DAY0 + 60 * i for i in range(10) if i not in (4, 5)]
    writer.write_rounds([vllm_round(ts, 0.0, preemptions=float(ts - DAY0) // 60) for ts in times])
    cols = Reader(db_url).series_columns("t", DAY0, DAY0 + 600, 60, fields=["preemptions", "preemptions_per_s"], level=0)
    assert cols["preemptions"] == [None, 1, 1, 1, None, None, 3, 1, 1, 1]
    assert cols["preemptions_per_s"] == [None, *[pytest.approx(1 / 60)] * 3, None, None, *[pytest.approx(1 / 60)] * 4]


def test_retention_keeps_rollups_answering(db_url: str) -> None:
    engine = _filled(db_url)
    rollup(engine, DAY0 + 7200 + GRACE_S)
    before = Reader(db_url).series_columns("t", DAY0, DAY0 + 3600, 3600)
    settings = Settings(raw_retention_s=1800, rollup_retention_s=5400)
    deleted = apply_retention(engine, DAY0 + 7200, settings)
    assert deleted["samples"] > 0 and deleted["model_rollups[60s]"] > 0
    with engine.connect() as conn:
        oldest = conn.execute(select(schema.samples.c.ts).order_by(schema.samples.c.ts).limit(1)).scalar()
    assert oldest >= DAY0 + 7200 - 1800
    after = Reader(db_url).series_columns("t", DAY0, DAY0 + 3600, 3600)
    assert after["tokens_per_s"] == pytest.approx(before["tokens_per_s"])


def test_ceiling_provenance(db_url: str) -> None:
    reference = compute_ceiling(40, 8, 900)
    assert reference is not None and (reference.steps_per_s, reference.bandwidth_source) == (pytest.approx(180), "config")
    nvml = compute_ceiling(40, 8, None, 898)
    assert nvml is not None and nvml.bandwidth_source == "nvml-formula"
    # nothing borrowed: no bandwidth, or no weights or TP, is no ceiling
    assert compute_ceiling(40, 8) is None and compute_ceiling(None, 8, 900) is None and compute_ceiling(40, None, 900) is None
    engine = open_engine(db_url)
    writer = Writer(engine)
    inputs = CeilingSettings(weight_gb=40.0, tensor_parallel=8)
    writer.register_target(TargetSettings(name="a", ceiling=inputs))
    writer.register_target(TargetSettings(name="b", ceiling=CeilingSettings(40.0, 8, 2000.0, 327680.0)))
    writer.register_target(TargetSettings(name="bare"))
    gpu = GpuReading(uuid="GPU-1", peak_bw_gbps=1000.0, peak_bw_source="nvml-formula")
    writer.write_round(ScrapeRound("b", DAY0, None, SourceResult(False, "x"), gpus=(gpu,)))
    by_name = {t.name: t.ceiling for t in Reader(db_url).targets()}
    assert by_name["a"] is None  # weights and TP, but no bandwidth yet
    b = by_name["b"]
    assert b is not None and (b.bandwidth_source, b.steps_per_s) == ("config", 400)
    assert (b.kv_bytes_per_token, b.kv_source) == (327680.0, "config")
    assert b.model().step_bound_per_s == pytest.approx(400)
    writer.write_round(ScrapeRound("a", DAY0, None, SourceResult(False, "x"), gpus=(gpu,)))
    writer.write_round(ScrapeRound("bare", DAY0, None, SourceResult(False, "x"), gpus=(gpu,)))
    stored = {t.name: t.ceiling for t in Reader(db_url).targets()}
    a = stored["a"]
    assert a is not None and (a.bandwidth_source, a.steps_per_s) == ("nvml-formula", 200)
    assert stored["bare"] is None  # NVML knows its peak, but not the weights: no ceiling
    # a peak carried from configuration by a dcgm GPU row is not NVML's figure
    writer.register_target(TargetSettings(name="c", ceiling=inputs))
    dcgm = GpuReading(uuid="GPU-2", peak_bw_gbps=1200.0, peak_bw_source="config")
    writer.write_round(ScrapeRound("c", DAY0, None, SourceResult(False, "x"), gpus=(dcgm,)))
    assert next(t for t in Reader(db_url).targets() if t.name == "c").ceiling is None


HOSTILE = 'x\'); DROP TABLE targets; -- "quoted" % _ \\ ∑ 🚀'


def test_hostile_strings_round_trip_verbatim(db_url: str) -> None:
    engine = open_engine(db_url)
    writer = Writer(engine)
    # quotes in the URL's path are stored as written; a query value is stored as *** whatever it holds
    # (docs/security.md (e): every query value of a stored URL is masked, it may be a credential)
    writer.register_target(TargetSettings(name=HOSTILE, vllm_url="http://h/o'neil\"s%_/metrics?a='1'"))
    writer.write_rounds([vllm_round(DAY0, 1, target=HOSTILE, model=HOSTILE), failed_round(DAY0 + 5, HOSTILE, HOSTILE)])
    reader = Reader(db_url)
    (info,) = reader.targets()
    assert (info.name, info.vllm_url, info.models, info.last_error) == (
        HOSTILE,
        "http://h/o'neil\"s%_/metrics?a=***",
        (HOSTILE,),
        HOSTILE,
    )
    assert reader.models(HOSTILE) == [HOSTILE]
    assert reader.window(HOSTILE, DAY0 + 5, 60, model=HOSTILE).last_error == HOSTILE
    assert reader.models("x' OR '1'='1") == []


def test_sweeps_round_trip(db_url: str) -> None:
    level = SweepLevel(16, 600.0, 170, 0, 126.0, 0.28, 0.8, 2.1, 2.9, 0.09, 40.0, 60.0, 0.0)
    run = SweepRun(
        1.0, "http://x", HOSTILE, "mixed", 3.0, (level, dataclasses.replace(level, concurrency=32)), {"sweet_spot": 16}
    )
    run_id = store_sweep(open_engine(db_url), run)
    (loaded,) = Reader(db_url).sweep_runs(5)
    assert loaded == dataclasses.replace(run, id=run_id)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEETSPOT_")}
    return subprocess.run(
        [sys.executable, "-m", "app", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )


def test_status_cli_json_and_table(db_url: str) -> None:
    now = time.time()
    engine = open_engine(db_url)
    writer = Writer(engine)
    writer.register_target(TargetSettings(name="t"))
    writer.write_rounds(
        [
            vllm_round(now - 300 + 5 * i, 1000 + 60 * i, hist=(i, 2 * i, 3 * i, 3 * i), running=float(i % 5))
            for i in range(60)
        ]
    )
    done = _cli("status", "--db", db_url, "--json", "--window", "5m")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    for key in (
        "ttft_p50_s",
        "ttft_p95_s",
        "ttft_p99_s",
        "tokens_per_s",
        "prompt_tokens_per_s",
        "preemptions",
        "requests_per_s",
        "running_avg",
        "running_max",
        "waiting_max",
        "queue_depth_max",
        "kv_cache_usage_max",
        "ceiling_steps_per_s",
        "ceiling_share",
        "mbu",
        "mbu_source",
        "steps_per_s",
        "gpus",
        "last_scrape_at",
        "up",
    ):
        assert key in data
    # 60 tokens every 5 s (the first round is the baseline: its tokens are not counted, nor its time)
    assert data["tokens_per_s"] == pytest.approx(12.0, rel=0.01)
    assert data["prompt_tokens_per_s"] is None and data["queue_depth_max"] is None
    assert data["running_max"] == 4 and data["up"] is True
    # a target without ceiling inputs: no ceiling, no share of it, no MBU, and the rule says why
    assert data["ceiling_steps_per_s"] is None and data["ceiling_share"] is None and data["ceiling"] is None
    assert data["mbu"] is None and data["mbu_source"] is None
    assert data["ceiling_text"] == "unknown: set targets[].ceiling.weight_gb and tensor_parallel"
    assert "unknown: set targets[].ceiling.weight_gb and tensor_parallel" in data["mbu_text"]
    assert not any("efficiency" in r or "MBU" in r for r in data["reasons"])  # no MBU floor among the defaults
    # no sweet spot configured, swept or learned (5 minutes of traffic): unknown, never the report's 16
    assert data["sweet_spot"] is None and data["sweet_spot_source"] is None
    assert data["not_evaluated"]["concurrency"].startswith("no sweet spot yet (run a load sweep: `python -m app sweep --target NAME`")
    assert data["not_evaluated"]["under_delivering"].startswith("no curve yet")
    # so the verdict cannot tell, and says what it could not judge (never "every rule holds")
    assert data["state"] == "cannot_tell" and {"rule": "concurrency", "reason": data["not_evaluated"]["concurrency"]} in data["not_judged"]
    assert 0 < data["ttft_p95_s"] <= 1.0
    lower, upper = data["ttft_p95_bucket"]  # the engine's bucket that holds it
    assert lower < data["ttft_p95_s"] <= upper and data["queue_time_p95_bucket"] is None
    if db_url.startswith("sqlite"):  # the table is the same code on both databases; spare a subprocess
        table = _cli("status", "--db", db_url, "--window", "5m")
        assert table.returncode == 0 and "over 5m" in table.stdout and "tok/s" in table.stdout
        assert "ceiling                  unknown: set targets[].ceiling.weight_gb and tensor_parallel" in table.stdout
        assert "concurrency rule not judged: no sweet spot yet" in table.stdout
        assert "sweet spot               unknown: no sweet spot yet" in table.stdout
        assert f"TTFT ({lower:g}, {upper:g}]" in table.stdout


def test_status_cli_missing_database(tmp_path: Path) -> None:
    done = _cli("status", "--db", f"sqlite:///{tmp_path}/none.db")
    assert done.returncode == 2 and "SWEETSPOT_DB_URL" in done.stderr


def test_gpu_series_and_latest(db_url: str) -> None:
    _filled(db_url, hours=0.25)
    reader = Reader(db_url)
    points = reader.gpu_series("t", DAY0, DAY0 + 600, 60)
    assert len(points) == 2 * 10 and {p.uuid for p in points} == {"GPU-00000000", "GPU-00000001"}
    assert all(p.memory_total_bytes == 32e9 and p.dram_bw_gbps is None for p in points)
    latest = reader.latest_gpus("t")
    assert [g.uuid for g in latest] == ["GPU-00000000", "GPU-00000001"]
    assert latest[0].peak_bw_source == "nvml-formula" and latest[0].temperature_c_max is not None


def test_latest_gpus_are_the_last_minute_of_readings_not_the_first(db_url: str) -> None:
    # The writer touches a GPU's row in `gpus` only when its identity or meta changes, not every
    # round; the latest figures must come from the latest readings all the same.
    writer = Writer(open_engine(db_url))
    for step in range(60):  # five minutes of 5 s rounds, power rising by 1 W a round
        gpus = (GpuReading(uuid="GPU-0", index=0, name="H200", power_w=100.0 + step),)
        writer.write_round(ScrapeRound("t", DAY0 + 5 * step, None, SourceResult(False, "x"), gpus=gpus))
    (latest,) = Reader(db_url).latest_gpus("t", window_s=60.0)
    assert latest.power_w_avg == pytest.approx(sum(100.0 + s for s in range(48, 60)) / 12)


def test_gpu_rows_of_targets_sharing_a_second_read_back_per_target(db_url: str) -> None:
    # gpu_samples is keyed (target, ts, gpu): two targets' rounds in the same second interleave
    # nothing; each target's GPUs come back with their own readings, raw and rolled up
    engine = open_engine(db_url)
    writer = Writer(engine)
    for step in range(12):  # a minute of 5 s rounds
        ts = DAY0 + 5 * step
        for t, power in (("a", 100.0), ("b", 300.0)):
            gpus = tuple(GpuReading(uuid=f"{t}-{i}", index=i, power_w=power + i + step) for i in range(3))
            writer.write_round(ScrapeRound(t, ts, None, SourceResult(False, "x"), gpus=gpus))
    rollup(engine, DAY0 + 60 + GRACE_S)
    reader = Reader(db_url)
    for t, power in (("a", 100.0), ("b", 300.0)):
        raw = reader.gpu_series(t, DAY0, DAY0 + 60, 5)
        assert [(p.ts, p.uuid, p.power_w) for p in raw] == [
            (DAY0 + 5 * step, f"{t}-{i}", power + i + step) for step in range(12) for i in range(3)
        ]
        minute = reader.gpu_series(t, DAY0, DAY0 + 60, 60)
        assert [(p.uuid, p.power_w) for p in minute] == [(f"{t}-{i}", power + i + 5.5) for i in range(3)]


def test_status_json_stays_strict_json_when_a_page_said_infinity(db_url: str) -> None:
    # JSON has no infinities: a gauge a garbage page gave as +Inf is null, not `Infinity`.
    now = time.time()
    writer = Writer(open_engine(db_url))
    writer.write_rounds([vllm_round(now - 60 + 5 * i, 1000 + 60 * i, running=math.inf) for i in range(12)])
    done = _cli("status", "--db", db_url, "--json", "--window", "5m")
    assert done.returncode == 0, done.stderr

    def refuse(constant: str) -> None:
        raise ValueError(f"not strict JSON: {constant}")

    data = json.loads(done.stdout, parse_constant=refuse)
    assert data["running_max"] is None and data["tokens_per_s"] is not None  # the rest is read as usual


def test_prefix_cache_hit_rate_and_queue_time_reach_the_facade_from_raw_rows_and_rollups(db_url: str) -> None:
    # Figures stored all along and shown nowhere before: hits ÷ queries over the window (two models:
    # their sums, not an average of their rates), and the queue-time histogram's P95.
    from collectors.records import Histogram

    engine = open_engine(db_url)
    writer = Writer(engine)
    writer.register_target(TargetSettings(name="t"))
    rows = []
    for i in range(30):
        round_ = one_round(vllm_round(DAY0 + 5 * i, 10.0 * i, model="a"), vllm_round(DAY0 + 5 * i, 10.0 * i, model="b"))
        assert round_.vllm is not None
        models = {}
        for name, hits_per_round in (("a", 30.0), ("b", 10.0)):  # each looks up 100 tokens a round
            figures = round_.vllm.models[name]
            queue = Histogram((0.1, 1.0, INF), (2.0 * i, 2.0 * i, 2.0 * i), 2.0 * i, 0.05 * i)  # every wait under 0.1 s
            models[name] = dataclasses.replace(
                figures, counters={**figures.counters, "prefix_cache_hits": hits_per_round * i, "prefix_cache_queries": 100.0 * i},
                histograms={"queue_time": queue},
            )
        rows.append(dataclasses.replace(round_, vllm=dataclasses.replace(round_.vllm, models=models)))
    writer.write_rounds(rows)
    reader = Reader(db_url)
    fig = reader.window("t", DAY0 + 145, 120)
    assert fig.prefix_cache_hit_rate == pytest.approx(0.2)  # (30 + 10) ÷ (100 + 100)
    assert reader.window("t", DAY0 + 145, 120, model="a").prefix_cache_hit_rate == pytest.approx(0.3)
    assert fig.queue_time_p95_s is not None and 0 < fig.queue_time_p95_s <= 0.1
    points = reader.series("t", DAY0, DAY0 + 120, 60)
    assert [round(p.prefix_cache_hit_rate or 0, 6) for p in points] == [0.2, 0.2]
    rollup(engine, DAY0 + 150 + GRACE_S)
    assert [round(p.prefix_cache_hit_rate or 0, 6) for p in reader.series("t", DAY0, DAY0 + 120, 60)] == [0.2, 0.2]
    assert reader.window("t", DAY0 + 145, 300).prefix_cache_hit_rate is not None


def test_retention_out_of_order_never_costs_a_rollup(db_url: str) -> None:
    # Settings built in code skip the loader's order check: a raw retention longer than the
    # rollups' keeps the rollups as long as the raw rows.
    engine = _filled(db_url)
    rollup(engine, DAY0 + 7200 + GRACE_S)
    deleted = apply_retention(engine, DAY0 + 7200, Settings(raw_retention_s=3 * 3600, rollup_retention_s=1800))
    assert deleted["model_rollups[60s]"] == 0 and deleted["samples"] == 0
