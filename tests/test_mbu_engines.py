"""MBU per data-parallel engine, with the KV term read from the cache itself, on the real path: vLLM
0.33 pages served over HTTP, read by the collector (CollectionService, a clock of the test's own), stored
in a real SQLite file, and read back through the query facade, ``status`` and the SQL views.

Each data-parallel engine steps on its own GPUs: a target's MBU is the mean over its engines, not the
model applied to their summed steps and requests (which read two engines at 9.2 % each as 31.9 %), and
the per-step check holds each engine to the bound (400 summed steps/s against a 300 bound is two
engines at 200, not wrong inputs). The KV bytes a step reads are the tokens resident in the cache
(kv_cache_usage_perc × kv_cache_size_tokens) × KV bytes per token; the request-length estimate only
where the engine does not expose the cache figure, and then labelled.
"""

from __future__ import annotations

import json

import pytest

from app.collection import CollectionService
from app.commands.status import figures_json
from core import mbu
from core.settings import CeilingSettings, Settings, TargetSettings
from db import mbu_figures
from db.queries import Reader
from db.query_runner import Limits, run_query
from tests.data.make_vllm_fixtures import ITERATION_TOKENS, MODEL, TOKENS_125, counter, gauge, histogram, render
from tests.support.http_server import serve

T0, INTERVAL = 1_800_000_000.0, 10.0
# An 8B model in bf16 at TP 1 on H200s: 16 GB of weights, 300 steps/s at most; Llama-3-8B's KV,
# 131,072 B a token, as each engine's cache_config_info states it (16,000 tokens, 2.1 GB)
WEIGHTS, PEAK, KV, TOKENS = 16.0, 4800.0, 131_072, 16_000
STEPS, RUNNING, USAGE = 240.0, 8.0, 0.3  # one engine: 240 steps/s, 8 running, 30 % of its cache in use
PROMPT, OUTPUT = 1000.0, 200.0  # finished requests' mean lengths (the estimate's inputs)


def page(engines: int, scrape: int, usage: bool = True) -> str:
    """vLLM 0.33's page of ``engines`` data-parallel engines, each at one engine's rates."""
    labels = [{"model_name": MODEL, "engine": str(e)} for e in range(engines)]
    steps = 1_000_000 + scrape * STEPS * INTERVAL
    iteration = [0.0] * (len(ITERATION_TOKENS) + 1)
    iteration[next(i for i, le in enumerate(ITERATION_TOKENS) if le >= RUNNING)] = steps
    finished = 500 + scrape * 4
    lengths = [0.0] * (len(TOKENS_125) + 1)
    lengths[-1] = finished
    cache = [({"block_size": "16", "engine": str(e), "num_gpu_blocks": str(TOKENS // 16), "kv_cache_size_tokens": str(TOKENS),
               "kv_cache_memory_bytes": str(TOKENS * KV)}, 1.0) for e in range(engines)]  # fmt: skip
    families = [
        gauge("vllm:num_requests_running", "Running.", [(lbl, RUNNING) for lbl in labels]),
        gauge("vllm:num_requests_waiting", "Waiting.", [(lbl, 0.0) for lbl in labels]),
        counter("vllm:generation_tokens", "Generated.", [(lbl, 5e7 + scrape * RUNNING * STEPS * INTERVAL) for lbl in labels], True),
        histogram("vllm:iteration_tokens_total", "Tokens per step.", ITERATION_TOKENS,
                  [(lbl, iteration, steps * RUNNING) for lbl in labels], True),
        histogram("vllm:request_prompt_tokens", "Prompts.", TOKENS_125, [(lbl, lengths, finished * PROMPT) for lbl in labels], True),
        histogram("vllm:request_generation_tokens", "Outputs.", TOKENS_125, [(lbl, lengths, finished * OUTPUT) for lbl in labels], True),
        gauge("vllm:cache_config_info", "CacheConfig.", cache),
    ]  # fmt: skip
    if usage:
        families.append(gauge("vllm:kv_cache_usage_perc", "KV usage.", [(lbl, USAGE) for lbl in labels]))
    return render(families)


ONE_ENGINE_MBU = (WEIGHTS * 1e9 + USAGE * TOKENS * KV) * STEPS / (PEAK * 1e9)  # 0.8315: 16.63 GB × 240 ÷ 4,800 GB/s
TARGETS = {"one": (1, True), "two": (2, True), "four": (4, True), "two-no-usage": (2, False)}


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('engines')}/engines.db"
    routes = {f"/{name}": (200, "text/plain", page(n, 0, usage)) for name, (n, usage) in TARGETS.items()}
    now = [T0]
    ceiling = CeilingSettings(weight_gb=WEIGHTS, tensor_parallel=1, bandwidth_gbps=PEAK)
    with serve(routes) as base:
        targets = tuple(TargetSettings(name=name, vllm_url=f"{base}/{name}", ceiling=ceiling) for name in TARGETS)
        service = CollectionService(Settings(db_url=url, targets=targets), clock=lambda: now[0])
        try:
            for scrape in (0, 1):
                now[0] = T0 + scrape * INTERVAL
                routes.update({f"/{name}": (200, "text/plain", page(n, scrape, usage)) for name, (n, usage) in TARGETS.items()})
                assert all(" up" in line for line in service.collect_once()), "every target read"
            now[0] = T0 + 120
            service.rollup()
        finally:
            service.close()
    return url


def window(url: str, name: str):
    return Reader(url).window(name, T0 + INTERVAL, 60)


def test_one_engine_reads_the_models_bytes_with_the_kv_tokens_resident(db):
    f = window(db, "one")
    assert f.kv_resident_tokens_avg == pytest.approx(USAGE * TOKENS)  # 4,800 tokens resident
    assert f.ceiling is not None and f.ceiling.kv_bytes_per_token == pytest.approx(KV)  # from cache_config_info
    assert (f.mbu, f.mbu_source, f.mbu_kv_source) == (pytest.approx(ONE_ENGINE_MBU), mbu.MODELLED, mbu_figures.KV_RESIDENT)


@pytest.mark.parametrize("name", ["two", "four"])
def test_data_parallel_engines_at_one_engines_rates_read_that_engines_mbu(db, name):
    one, many = window(db, "one"), window(db, name)
    assert many.steps_per_s == pytest.approx(TARGETS[name][0] * STEPS)  # the steps of every engine, summed
    assert many.engines_max == TARGETS[name][0]
    assert many.mbu == pytest.approx(one.mbu, rel=0.02)  # not 2× or 4× (the summed model read 31.9 % for 9.2 %)
    assert many.step_bound_breach is None  # 480 or 960 summed steps/s: each engine's 240 is under the 300 bound


def test_without_the_cache_figure_the_request_length_estimate_is_used_and_labelled(db):
    f = window(db, "two-no-usage")
    assert f.kv_resident_tokens_avg is None and f.mbu_kv_source == mbu_figures.KV_ESTIMATE
    estimate = (WEIGHTS * 1e9 + RUNNING * (PROMPT + OUTPUT / 2) * KV) * STEPS / (PEAK * 1e9)
    assert f.mbu == pytest.approx(estimate)


def test_status_and_the_minutes_view_read_the_same_per_engine_mbu(db):
    data = json.loads(json.dumps(figures_json(window(db, "two"))))  # the ``status --json`` document
    assert data["mbu"] == pytest.approx(window(db, "one").mbu) and data["step_bound_breach"] is None
    assert data["mbu_kv_source"] == mbu_figures.KV_RESIDENT and data["engines_max"] == 2
    sql = "SELECT target, mbu_pct, mbu_source FROM minutes WHERE target IN ('one', 'two', 'four', 'two-no-usage')"
    got = {row[0]: (row[1], row[2]) for row in run_query(db, sql, Limits(timeout_s=20, row_limit=1000, max_timeout_s=30)).rows}
    for name in TARGETS:
        # the minute's figures as the facade reads them at the same level
        (point,) = [p for p in Reader(db).series(name, T0, T0 + 60, 60, level=60) if p.mbu is not None]
        assert got[name][0] == pytest.approx(100 * point.mbu, rel=1e-6) and got[name][1] == mbu.MODELLED, name
    assert got["two"][0] == pytest.approx(got["one"][0], rel=0.02) and got["four"][0] == pytest.approx(got["one"][0], rel=0.02)
