"""The simulator follows its own step model: the bandwidth DCGM shows, the engine's byte counters and
steps/s × bytes per step are one figure (docs/simulator.md "Memory traffic").

A closed loop of c clients runs on the live engine in virtual time; the /metrics and dcgm pages are
rendered and parsed as a collector reads them, at two instants 300 simulated seconds apart.
"""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from collectors.dcgm import parse_dcgm
from collectors.vllm import parse_vllm
from core import mbu
from simulator import generate_history
from simulator.dcgm import dcgm_reading
from simulator.engine import Sequence, StepPlan
from simulator.expo import render, vllm_families
from simulator.live import LiveEngine, VirtualClock
from simulator.params import EngineConfig, EngineParams
from simulator.workload import answer_length, sample_request

ROOT = Path(__file__).resolve().parent.parent
START = 1_795_000_000.0  # simulated unix seconds
WARMUP_S, WINDOW_S, SCRAPE_S = 60.0, 300.0, 5.0
# The reference deployment of DOMAIN.md §1 with Llama-70B's grouped-query KV cache: 2 (K, V) × 80 layers
# × 8 KV heads × 128 dims × 2 bytes = 327,680 bytes a token, over TP 8 (docs/ceiling.md, the demo).
REFERENCE = mbu.StepModel(weight_gb=40.0, tensor_parallel=8, peak_gbps=900.0, kv_bytes_per_token=2 * 80 * 8 * 128 * 2)
PEAK_BYTES_S = 900e9


@dataclass(frozen=True)
class Run:
    tokens_per_s: float  # from generation_tokens_total
    steps_per_s: float  # from iteration_tokens_total_count
    steps_counted: int  # steps the spy saw end inside the window that produced a token
    steps_run: int  # every step the spy saw end inside the window
    steps_on_pages: float  # the growth of iteration_tokens_total_count between the two pages
    mean_running: float  # sequences per step
    mean_context: float  # tokens of context per sequence the step's attention reads
    modelled: mbu.Mbu
    measured: mbu.DramBw  # from DCGM_FI_PROF_DRAM_ACTIVE: the DRAM reading, set against the model
    engine: mbu.Mbu  # from the engine's byte counters
    dram_per_gpu: tuple[float, ...]
    # what the product's collector reads of the pages: running and the KV tokens resident (gauges,
    # averaged over the scrapes), the KV bytes a token holds (cache_config_info, all GPUs)
    scraped_running: float
    scraped_kv_tokens: float
    scraped_kv_bytes_per_token: float


def _counters(page: str) -> dict[str, float]:
    wanted = {"vllm:iteration_tokens_total_count", "vllm:estimated_read_bytes_per_gpu_total",
              "vllm:estimated_write_bytes_per_gpu_total", "vllm:generation_tokens_total"}
    return {s.name: s.value for f in text_string_to_metric_families(page) for s in f.samples if s.name in wanted}


@lru_cache(maxsize=4)
def run(clients: int) -> Run:
    live = LiveEngine(EngineConfig(), VirtualClock(START), keep_s=2 * WINDOW_S)  # the GPUs' history: a reading's interval
    rng = random.Random(f"physics:{clients}")
    ids = itertools.count()

    def submit(*_: object) -> None:
        spec = sample_request(rng)
        target, reason = answer_length(rng, spec.max_tokens)
        live.submit(Sequence(f"r{next(ids)}", spec.prompt_tokens, target, reason, 0.0, None, submit))

    steps: list[tuple[int, int]] = []  # (sequences, context tokens) of each step that ended in the window
    tokens: list[bool] = []  # whether each produced a token (vLLM observes only those steps)
    commit = live.engine.commit

    def spy(plan: StepPlan, now: float) -> None:
        if counting:
            steps.append((len(plan.work), sum(seq.computed + n for seq, n in plan.work)))
            tokens.append(any(not seq.done and seq.blocks and seq.computed + n >= seq.known_tokens() for seq, n in plan.work))
        commit(plan, now)

    live.engine.commit = spy  # type: ignore[method-assign]
    counting = False
    for _ in range(clients):
        submit()
    live.run_until(START + WARMUP_S)
    first = dcgm_reading(live, EngineParams(), None, WINDOW_S, 0, "sim")
    before, t0 = _counters(render(vllm_families(live.view()))), live.clock.now()
    counting = True
    scraped = []  # the product's parser on a page every SCRAPE_S, as the collector reads the demo
    for k in range(1, int(WINDOW_S / SCRAPE_S) + 1):
        live.run_until(t0 + k * SCRAPE_S)
        scraped.append(next(iter(parse_vllm(render(vllm_families(live.view()))).models.values())).gauges)
    reading = dcgm_reading(live, EngineParams(), first, WINDOW_S, 0, "sim")  # dcgm-exporter's interval
    after, t1 = _counters(render(vllm_families(live.view()))), live.clock.now()
    assert reading.at == t1 and first.at == t0

    def rate(name: str) -> float:
        return (after[name] - before[name]) / (t1 - t0)

    running = sum(n for n, _ in steps) / len(steps)
    context = sum(c for _, c in steps) / len(steps) / running
    steps_per_s = rate("vllm:iteration_tokens_total_count")
    dram = tuple(gpu.dram_bw_util_pct for gpu in parse_dcgm(reading.page.decode()))
    engine_bytes = rate("vllm:estimated_read_bytes_per_gpu_total") + rate("vllm:estimated_write_bytes_per_gpu_total")
    return Run(
        tokens_per_s=rate("vllm:generation_tokens_total"),
        steps_per_s=steps_per_s,
        steps_counted=sum(tokens),
        steps_run=len(steps),
        steps_on_pages=after["vllm:iteration_tokens_total_count"] - before["vllm:iteration_tokens_total_count"],
        mean_running=running,
        mean_context=context,
        modelled=mbu.modelled_mbu(REFERENCE, steps_per_s, running, context),  # type: ignore[arg-type]
        measured=mbu.dram_bw_util(sum(dram) / len(dram), mbu.DRAM_DCGM),  # type: ignore[arg-type]
        engine=mbu.engine_mbu(engine_bytes, REFERENCE.peak_gbps),  # type: ignore[arg-type]
        scraped_running=sum(g["requests_running"] for g in scraped) / len(scraped),
        scraped_kv_tokens=sum(g["kv_resident_tokens"] for g in scraped) / len(scraped),
        scraped_kv_bytes_per_token=scraped[-1]["kv_token_bytes"] * EngineParams().tensor_parallel,
        dram_per_gpu=dram,
    )


def test_the_simulators_inputs_are_the_reference_step_model():
    assert EngineParams().step_model() == REFERENCE
    assert EngineParams().kv_bytes_per_token == 327_680 and EngineParams().kv_bytes_per_token_per_gpu == 40_960


@pytest.mark.parametrize("clients", [8, 16, 32])
def test_dcgm_bandwidth_engine_bytes_and_steps_times_bytes_per_step_agree(clients):
    got = run(clients)
    assert got.steps_on_pages == got.steps_counted  # one histogram observation per step that produced a token
    assert got.steps_run >= got.steps_counted  # steps of prefill chunks alone are not observed, as in vLLM
    assert len(set(got.dram_per_gpu)) == 1  # tensor parallelism: each GPU moves the same bytes
    assert got.measured.value == pytest.approx(got.modelled.value, rel=0.01)
    assert got.engine.value == pytest.approx(got.modelled.value, rel=0.01)
    # not the report's accounting (every output token one pass over the weights: 0.46 at 8, 0.82 at 32)
    assert got.measured.value < 0.3 * got.tokens_per_s * REFERENCE.weight_bytes_per_gpu / PEAK_BYTES_S
    # one step takes far longer than reading its bytes at peak: the step time is not bandwidth-bound
    bytes_per_step = REFERENCE.bytes_per_step(got.mean_running, got.mean_context)
    assert bytes_per_step / PEAK_BYTES_S < 0.2 / got.steps_per_s


def _documented() -> dict[int, list[str]]:
    text = (ROOT / "docs" / "simulator.md").read_text()
    section = text[text.index("### Memory traffic"):]
    rows = re.findall(r"^\| (\d+) \|(.+)\|$", section, re.MULTILINE)
    return {int(c): [cell.strip() for cell in rest.split("|")] for c, rest in rows[:3]}


def test_the_documented_figures_are_the_measured_ones():
    documented = _documented()
    assert set(documented) == {8, 16, 32}
    for clients, cells in documented.items():
        got = run(clients)
        ms = 1000 / got.steps_per_s
        gb = REFERENCE.bytes_per_step(got.mean_running, got.mean_context) / 1e9
        assert cells == [f"{got.tokens_per_s:.1f}", f"{got.steps_per_s:.2f}", f"{ms:.0f} ms", f"{got.mean_running:.1f}",
                         f"{got.mean_context:,.0f}", f"{gb:.1f} GB", f"{100 * got.measured.value:.1f} %",
                         f"{100 * got.engine.value:.1f} %", f"{100 * got.modelled.value:.1f} %"], clients


def test_the_demos_history_keeps_dcgm_and_the_engine_counters_together():
    # The backfill's samples (generate_history) follow the same bytes: DRAM_ACTIVE of a sample is the
    # engine counters' growth since the previous one ÷ 30 s ÷ peak.
    samples = list(generate_history(START, START + 1800, 30.0, seed=2))
    compared = 0
    for prev, cur in itertools.pairwise(samples):
        a, b = _counters(prev.vllm), _counters(cur.vllm)
        moved = sum(b[n] - a[n] for n in ("vllm:estimated_read_bytes_per_gpu_total",
                                          "vllm:estimated_write_bytes_per_gpu_total"))
        if moved <= 0:  # a restart between the two samples
            continue
        (dram,) = {gpu.dram_bw_util_pct for gpu in parse_dcgm(cur.dcgm)}
        assert dram / 100 == pytest.approx(moved / 30.0 / PEAK_BYTES_S, rel=0.01)
        compared += 1
    assert compared >= 50


@pytest.mark.parametrize("clients", [8, 16, 32])
def test_the_products_step_model_on_the_demo_reads_the_simulators_own_bytes(clients):
    """The step model as the product applies it to the demo's pages (steps/s, the KV tokens resident
    from kv_cache_usage_perc × kv_cache_size_tokens, the KV bytes per token from cache_config_info)
    agrees with the bytes the simulator itself counts, within 5 %, the KV term counted."""
    got = run(clients)
    model = mbu.StepModel(40.0, 8, 900.0, got.scraped_kv_bytes_per_token)
    assert got.scraped_kv_bytes_per_token == pytest.approx(327_680)  # one KV shape: Llama-70B grouped-query
    product = mbu.modelled_mbu(model, got.steps_per_s, got.scraped_running, None, got.scraped_kv_tokens)
    assert product is not None and product.value == pytest.approx(got.engine.value, rel=0.05)
    weights_only = mbu.modelled_mbu(model, got.steps_per_s, got.scraped_running, None)
    assert weights_only is not None and weights_only.value < 0.9 * got.engine.value  # the KV term matters here
