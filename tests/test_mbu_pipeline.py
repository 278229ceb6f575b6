"""MBU end to end: vLLM pages of an engine decoding at batch 1, 8, 32 and 64 (built with the fixture
tooling: iteration_tokens_total, the MFU byte counters, the request-length histograms, cache_config_info)
and a recorded dcgm-exporter page, read by the collectors' parsers, stored by the writer in a real
SQLite file, read back through the facade; every figure against arithmetic written out here."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from app.alerts import store as alert_store
from app.alerts.evaluator import Evaluator
from app.alerts.model import FIRING, INACTIVE
from app.alerts.model import NO_DATA as RULE_NO_DATA
from app.cli import main
from app.formatting import percent
from collectors.dcgm import parse_dcgm
from collectors.records import GpuReading, ScrapeRound, SourceResult
from collectors.vllm import parse_vllm
from core import mbu
from core.settings import AlertsSettings, CeilingSettings, RuleSettings, Settings, TargetSettings
from db.engine import open_engine
from db.queries import Reader
from db.writer import Writer
from tests.data.make_vllm_fixtures import ITERATION_TOKENS, MODEL, TOKENS_125, counter, gauge, histogram, render
from tests.support.http_server import serve

DCGM_H200 = (Path(__file__).parent / "data" / "dcgm-exporter-h200x2.txt").read_text()
INTERVAL = 10.0  # seconds between the two scrapes of each target
# The engine at each batch: decode steps per second (each step yields one token per running request)
STEPS = {1: 250.0, 8: 240.0, 32: 200.0, 64: 150.0}
# An 8B model in bf16 on one H200 (TP 1): 16 GB of weights; Llama-3-8B's KV: 32 layers × 8 KV heads ×
# 128 × 2 (K, V) × 2 bytes = 131,072 bytes a token, as cache_config_info states it (its blocks below).
WEIGHTS, PEAK, KV = 16.0, 4800.0, 32 * 8 * 128 * 2 * 2
BLOCKS, BLOCK_SIZE = 1000, 16
# Requests finished between the two scrapes: 4, of 1,000 prompt and 200 output tokens on average
FINISHED, PROMPT, OUTPUT = 4, 1000.0, 200.0


def page(batch: int, scrape: int, mfu: bool = True, waiting: float = 0.0) -> str:
    """vLLM 0.33's page at the ``scrape``-th read (0 or 1) of an engine decoding ``batch`` requests."""
    eng = {"model_name": MODEL, "engine": "0"}
    steps = 1_000_000 + scrape * STEPS[batch] * INTERVAL
    finished = 500 + scrape * FINISHED
    # every step of this engine held ``batch`` tokens: all its observations in the bucket le ≥ batch
    at = next(i for i, le in enumerate(ITERATION_TOKENS) if le >= batch)
    iteration = [0.0] * (len(ITERATION_TOKENS) + 1)
    iteration[at] = steps
    lengths = [0.0] * (len(TOKENS_125) + 1)
    lengths[-1] = finished
    read = 5.0e15 + scrape * (2.0e13 + batch * 1e11) if mfu else 0.0
    write = 1.0e13 + scrape * 1e11 if mfu else 0.0
    tokens = str(BLOCKS * BLOCK_SIZE)
    return render([
        gauge("vllm:num_requests_running", "Number of requests in model execution batches.", [(eng, float(batch))]),
        gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", [(eng, waiting)]),
        counter("vllm:generation_tokens", "Number of generation tokens processed.",
                [(eng, 5.0e7 + scrape * batch * STEPS[batch] * INTERVAL)], True),
        histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", ITERATION_TOKENS,
                  [(eng, iteration, steps * batch)], True),
        histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", TOKENS_125,
                  [(eng, lengths, finished * PROMPT)], True),
        histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", TOKENS_125,
                  [(eng, lengths, finished * OUTPUT)], True),
        counter("vllm:estimated_read_bytes_per_gpu", "Estimated bytes read from memory per GPU.", [(eng, read)], True),
        counter("vllm:estimated_write_bytes_per_gpu", "Estimated bytes written to memory per GPU.", [(eng, write)], True),
        gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
              [({"block_size": str(BLOCK_SIZE), "engine": "0", "num_gpu_blocks": str(BLOCKS),
                 "kv_cache_size_tokens": tokens, "kv_cache_memory_bytes": str(BLOCKS * BLOCK_SIZE * KV)}, 1.0)]),
    ])  # fmt: skip


def store(db: str, start: float, targets: dict[str, tuple[int, CeilingSettings, bool, bool, float]]) -> None:
    """Two rounds per target (the first is the baseline its increases are counted from)."""
    writer = Writer(open_engine(db))
    for name, (batch, ceiling, mfu, dcgm, waiting) in targets.items():
        writer.register_target(TargetSettings(name=name, vllm_url="http://127.0.0.1:1/metrics", ceiling=ceiling))
        for scrape in (0, 1):
            gpus = parse_dcgm(DCGM_H200, peak_bw_gbps=ceiling.bandwidth_gbps) if dcgm else ()
            writer.write_round(ScrapeRound(name, start + scrape * INTERVAL, parse_vllm(page(batch, scrape, mfu, waiting)),
                                           SourceResult(True), gpus=gpus, gpu_status=SourceResult(True) if dcgm else None))  # fmt: skip


H200 = CeilingSettings(weight_gb=WEIGHTS, tensor_parallel=1, bandwidth_gbps=PEAK)
TARGETS = {
    **{f"b{b}": (b, H200, True, False, 0.0) for b in STEPS},  # the engine's byte counters, no GPU reading
    "b8-dcgm": (8, H200, True, True, 0.0),  # the GPUs' own reading wins
    "b8-no-mfu": (8, H200, False, False, 0.0),  # vLLM 0.32 without --enable-mfu-metrics: zero counters
    "b1-wrong": (1, CeilingSettings(weight_gb=40.0, tensor_parallel=1, bandwidth_gbps=PEAK), True, False, 0.0),
    "bare": (8, CeilingSettings(), False, False, 5.0),  # no ceiling inputs at all, requests waiting
    "partial": (8, CeilingSettings(weight_gb=40.0, tensor_parallel=8), False, False, 0.0),  # no bandwidth, no GPUs
    # requests waiting: a small model's single request (MBU 3 %), a batch of 64 at 9,600 tok/s (MBU 55 %)
    "slow-waiting": (1, CeilingSettings(weight_gb=0.5, tensor_parallel=1, bandwidth_gbps=PEAK), False, False, 5.0),
    "busy-waiting": (64, H200, True, False, 5.0),
}


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> tuple[str, float]:
    url = f"sqlite:///{tmp_path_factory.mktemp('mbu')}/mbu.db"
    start = float(int(time.time()) // 10 * 10 - 20)  # the second round lands in the last minute
    store(url, start, TARGETS)
    return url, start + INTERVAL


def modelled(batch: int) -> float:
    context = PROMPT + OUTPUT / 2  # 1,100 tokens: the cache grows one token a step
    bytes_per_step = WEIGHTS * 1e9 + batch * context * KV  # ÷ TP 1
    return bytes_per_step * STEPS[batch] / (PEAK * 1e9)


def test_the_hand_computed_figures():
    # batch 8: 16e9 + 8 × 1,100 × 131,072 = 17,153,433,600 bytes a step, × 240 steps/s ÷ 4.8e12 B/s
    assert modelled(8) == pytest.approx(17_153_433_600 * 240 / 4.8e12) == pytest.approx(0.85767168)
    assert modelled(1) == pytest.approx(16_144_179_200 * 250 / 4.8e12)  # 0.8408
    assert modelled(64) == pytest.approx((16e9 + 64 * 1100 * 131072) * 150 / 4.8e12)  # 0.7884


@pytest.mark.parametrize("batch", list(STEPS))
def test_steps_context_and_each_source_at_every_batch(db, batch):
    url, end = db
    f = Reader(url).window(f"b{batch}", end, 60)
    assert f.steps_per_s == pytest.approx(STEPS[batch])  # Δ count 2,500 (batch 1) ÷ 10 s
    assert f.tokens_per_s == pytest.approx(batch * STEPS[batch])  # a token per running request a step
    assert f.mean_context_tokens == pytest.approx(4000 / 4 + (800 / 4) / 2)  # 1,100
    assert f.decode_tok_s_per_request == pytest.approx(STEPS[batch])  # tok/s ÷ running
    assert f.ceiling is not None and (f.ceiling.kv_bytes_per_token, f.ceiling.kv_source) == (pytest.approx(KV), "cache_config_info")
    assert f.ceiling_steps_per_s == pytest.approx(4800 / 16)  # 300 steps/s
    assert f.ceiling_share == pytest.approx(batch * STEPS[batch] / 300)
    # engine: (2e13 + batch × 1e11 read + 1e11 written) per GPU in 10 s ÷ 4,800 GB/s
    engine = (2.0e13 + batch * 1e11 + 1e11) / 10 / 4.8e12
    assert f.mbu_engine == pytest.approx(engine)
    assert f.mbu_modelled == pytest.approx(modelled(batch))
    assert f.dram_bw_util is None and f.dram_bw_source is None and f.overhead_traffic_gbps is None
    assert (f.mbu, f.mbu_source) == (pytest.approx(engine), mbu.ENGINE)
    assert f.step_bound_breach is None  # 150-250 steps/s within the 300 the inputs allow
    (step,) = [p for p in Reader(url).series(f"b{batch}", end - 10, end + 10, 10) if p.ts == end]
    assert (step.steps_per_s, step.mbu) == (pytest.approx(STEPS[batch]), pytest.approx(engine))


def test_the_gpus_own_reading_is_dram_bandwidth_beside_mbu_never_mbu(db):
    url, end = db
    f = Reader(url).window("b8-dcgm", end, 60)
    # the recorded H200 page: DRAM active 0.884885 on GPU 0, 0.000004 on the idle GPU 1, averaged
    assert (f.dram_bw_util, f.dram_bw_source) == (pytest.approx((0.884885 + 0.000004) / 2), mbu.DRAM_DCGM)
    assert f.mbu_engine is not None and f.mbu_modelled == pytest.approx(modelled(8))
    assert (f.mbu, f.mbu_source) == (pytest.approx(f.mbu_engine), mbu.ENGINE)  # the model's bytes, not DCGM's
    assert f.overhead_ratio == pytest.approx(f.dram_bw_util / f.mbu)
    assert f.overhead_traffic_gbps == pytest.approx((f.dram_bw_util - f.mbu) * 4800)


def test_zero_engine_counters_are_absent_and_the_model_answers(db):
    url, end = db
    f = Reader(url).window("b8-no-mfu", end, 60)
    assert f.mbu_engine is None and f.engine_read_bytes_per_s == 0
    assert (f.mbu, f.mbu_source) == (pytest.approx(modelled(8)), mbu.MODELLED)


def test_more_steps_than_the_inputs_allow_is_flagged_in_status(db, capsys):
    url, end = db
    f = Reader(url).window("b1-wrong", end, 60)
    breach = f.step_bound_breach
    assert breach is not None
    # 4,800 GB/s ÷ 40 GB = 120 steps/s at most, against 250 measured: at most 4,800 ÷ 250 = 19.2 GB of
    # weights, or at least 250 × 40 = 10,000 GB/s
    assert (breach.bound_per_s, breach.max_weight_gb, breach.min_peak_gbps) == (
        pytest.approx(120), pytest.approx(19.2), pytest.approx(10_000))  # fmt: skip
    assert main(["status", "--db", url, "--target", "b1-wrong", "--window", "1m", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["step_bound_breach_message"] == breach.message()
    assert data["step_bound_breach"]["max_weight_gb"] == pytest.approx(19.2)
    assert main(["status", "--db", url, "--target", "b1-wrong", "--window", "1m"]) == 0
    text = capsys.readouterr().out
    assert "WARNING: the engine made 250 decode steps/s, more than the 120 steps/s" in text
    assert "ceiling                  at most 120 steps/s (the bandwidth bound: 40 GB ÷ TP 1 at 4,800 GB/s, config)" in text
    assert "MBU                      " in text and "(engine estimate, vLLM byte counters)" in text


def test_no_inputs_no_ceiling_no_model(db, capsys):
    url, end = db
    f = Reader(url).window("bare", end, 60)
    assert f.steps_per_s == pytest.approx(240) and f.ceiling is None and f.ceiling_steps_per_s is None
    assert f.mbu is None and f.mbu_modelled is None and f.step_bound_breach is None
    assert main(["status", "--db", url, "--target", "bare", "--window", "1m", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["mbu"] is None and data["ceiling_steps_per_s"] is None
    assert "unknown: set targets[].ceiling.weight_gb and tensor_parallel" in data["mbu_text"]
    assert "efficiency" not in data["not_evaluated"]  # the MBU floor is no default rule any more (issue 28)


def test_a_partial_ceiling_names_what_is_missing_and_shows_what_is_set(db, capsys, tmp_path):
    from app.ui import widgets
    from core.settings import SweetSpotSettings

    url, end = db
    lacks = "no bandwidth per GPU (no GPU source reads it): set targets[].ceiling.bandwidth_gbps"
    given = "(set: weight_gb 40 GB, tensor_parallel 8; GPU source: none)"
    assert main(["status", "--db", url, "--target", "partial", "--window", "1m", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ceiling_steps_per_s"] is None and lacks in data["ceiling_text"] and given in data["ceiling_text"]
    assert 'targets[].gpu.source = "nvml"' in data["ceiling_text"] and "weight_gb and tensor_parallel" not in data["ceiling_text"]
    assert "efficiency" not in data["not_evaluated"]  # the MBU floor is no default rule any more (issue 28)
    # a file that brings the retired MBU floor back: its "not evaluated" names the missing input
    config = tmp_path / "sweetspot.toml"
    config.write_text('[[alerts.rules]]\nname = "efficiency"\n')
    assert main(["--config", str(config), "status", "--db", url, "--target", "partial", "--window", "1m", "--json"]) == 0
    assert lacks in json.loads(capsys.readouterr().out)["not_evaluated"]["efficiency"]
    assert main(["status", "--db", url, "--target", "partial", "--window", "1m"]) == 0
    assert f"ceiling                  unknown: {lacks}" in capsys.readouterr().out
    reader = Reader(url)
    tiles = {t.label.split(" ·")[0]: t for t in widgets.kpi_tiles(reader.window("partial", end, 60), SweetSpotSettings(), gateway_source="none")}
    assert lacks in tiles["Output tok/s"].context and given in tiles["MBU"].context
    assert tiles["Gateway queue"].value == "no gateway" and "targets[].gateway" in tiles["Gateway queue"].context
    (info,) = [t for t in reader.targets() if t.name == "partial"]
    assert widgets.ceiling_text(info) == f"Ceiling: none: {lacks}, or targets[].gpu.source = \"nvml\" on the GPUs' host {given}"
    (bare,) = [t for t in reader.targets() if t.name == "bare"]  # nothing set: the inputs to start with
    assert widgets.ceiling_text(bare).endswith("(set targets[].ceiling.weight_gb and tensor_parallel)")


def test_inspect_checks_the_configured_targets_step_rate(db, tmp_path, capsys):
    url, _ = db
    with serve({"/metrics": (200, "text/plain; version=0.0.4", page(1, 1))}) as base:
        config = tmp_path / "sweetspot.toml"
        config.write_text(f'db_url = "{url}"\n[[targets]]\nname = "b1-wrong"\nvllm_url = "{base}/metrics"\n'
                          "ceiling = { weight_gb = 40, tensor_parallel = 1, bandwidth_gbps = 4800 }\n")  # fmt: skip
        assert main(["--config", str(config), "inspect", f"{base}/metrics"]) == 0
        text = capsys.readouterr().out
        assert "WARNING: the engine made 250 decode steps/s, more than the 120 steps/s" in text
        assert "at most 19.2 GB (targets[].ceiling.weight_gb)" in text
        assert main(["--config", str(config), "inspect", f"{base}/metrics", "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["step_bound_breach"].startswith("the engine made 250 decode steps/s")
        # the same page under a target whose inputs hold: nothing to say
        config.write_text(f'db_url = "{url}"\n[[targets]]\nname = "b1"\nvllm_url = "{base}/metrics"\n')
        assert main(["--config", str(config), "inspect", f"{base}/metrics", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["step_bound_breach"] is None


def test_the_rule_fires_on_low_mbu_while_requests_wait_not_on_high_tokens_and_says_why_without_one(db):
    url, end = db
    names = ("slow-waiting", "busy-waiting", "bare")
    targets = tuple(TargetSettings(name=n, vllm_url="http://127.0.0.1:1/metrics", ceiling=TARGETS[n][1]) for n in names)
    # the retired MBU floor, brought back by a file that names it (app/alerts/rules.py RETIRED_RULES),
    # firing at the first evaluation that holds
    now_rule = RuleSettings(name="efficiency", for_s=0.0)
    settings = Settings(db_url=url, targets=targets, alerts=AlertsSettings(rules=(now_rule,)))
    engine = open_engine(url, migrate=False)
    Evaluator(engine, settings, clock=lambda: end + 1).evaluate_once()
    states = alert_store.load_states(engine)
    slow = states[("efficiency", "slow-waiting", "")]
    # (0.5e9 + 1 × 1,100 × 131,072) bytes a step × 250 steps/s ÷ 4.8e12 B/s = 3.35 %, under 30 %
    assert slow.state == FIRING and slow.value == pytest.approx((0.5e9 + 1100 * KV) * 250 / 4.8e12)
    assert slow.summary == "MBU over 5m 3.36 % < 30 % (modelled, steps/s × bytes per step, while 5 requests wait)"
    busy = states[("efficiency", "busy-waiting", "")]
    # 9,600 tok/s is 3,200 % of the report's 300 steps/s ceiling: no verdict; its MBU 55 % is above 30 %
    assert busy.state == INACTIVE and busy.value == pytest.approx((2.0e13 + 64e11 + 1e11) / 10 / 4.8e12)
    bare = states[("efficiency", "bare", "")]
    assert bare.state == RULE_NO_DATA and bare.value is None
    assert bare.summary.startswith("not evaluated: no MBU: no peak bandwidth for the engine's byte counters")
    assert "no step model (unknown: set targets[].ceiling.weight_gb and tensor_parallel)" in bare.summary


def test_nvml_gpm_is_dram_bandwidth_beside_mbu_and_nvmls_peak_the_ceilings_bandwidth(tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/gpm.db"
    start = float(int(time.time()) // 10 * 10 - 20)
    writer = Writer(open_engine(url))
    inputs = CeilingSettings(weight_gb=WEIGHTS, tensor_parallel=1)  # no bandwidth: NVML's formula gives it
    writer.register_target(TargetSettings(name="gpm", vllm_url="http://127.0.0.1:1/metrics", ceiling=inputs))
    gpu = GpuReading(uuid="GPU-1", index=0, dram_bw_util_pct=23.0, dram_bw_source="gpm", peak_bw_gbps=4814.3,
                     peak_bw_source="nvml-formula")  # fmt: skip
    for scrape in (0, 1):
        writer.write_round(ScrapeRound("gpm", start + scrape * INTERVAL, parse_vllm(page(8, scrape)), SourceResult(True),
                                       gpus=(gpu,), gpu_status=SourceResult(True)))  # fmt: skip
    f = Reader(url).window("gpm", start + INTERVAL, 60)
    assert (f.dram_bw_util, f.dram_bw_source) == (pytest.approx(0.23), mbu.DRAM_GPM)
    assert (f.mbu, f.mbu_source) == (pytest.approx(f.mbu_engine), mbu.ENGINE)  # the model's bytes, never GPM
    assert f.ceiling is not None and f.ceiling.bandwidth_source == "nvml-formula"
    assert f.ceiling_steps_per_s == pytest.approx(4814.3 / 16)  # 300.9 steps/s
    assert f.mbu_modelled == pytest.approx(17_153_433_600 * 240 / 4814.3e9)
    assert main(["status", "--db", url, "--target", "gpm", "--window", "1m"]) == 0
    text = capsys.readouterr().out
    assert f"  MBU                      {percent(f.mbu)} (engine estimate, vLLM byte counters)\n" in text
    assert "  DRAM bandwidth           23 % of peak (NVML GPM)\n" in text
    # GPM's 23 % is under the model's bytes here: no overhead to show, said so, never a negative GB/s
    assert f.overhead_traffic_gbps is not None and f.overhead_traffic_gbps < 0
    assert f"  overhead traffic         none: the GPUs moved {f.overhead_ratio:.2f}× the model's bytes" in text
    assert "-" not in text.split("overhead traffic", 1)[1].splitlines()[0]
    assert "at most 301 steps/s (the bandwidth bound: 16 GB ÷ TP 1 at 4,814 GB/s, nvml-formula)" in text
    assert "% of the step bound      638 % (tok/s ÷ steps/s bound)" in text  # 1,920 tok/s ÷ 300.9
