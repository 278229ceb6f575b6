"""The simulator speaks SGLang's names, vLLM's multiprocess exposition and 0.33's families."""

from __future__ import annotations

import time

import httpx

from collectors.vllm import parse_vllm, total_figures
from simulator import SimOptions, start_simulator
from tests.support.waiting import wait_until


def _page(sim) -> str:
    return httpx.get(sim.urls["vllm_metrics"], timeout=10).text


def _busy_page(sim, running: int) -> str:
    """The engine's page once its clients all run and it has made tokens (a condition: a loaded
    machine takes longer than the 1.5 s this slept)."""
    def busy() -> str | None:
        text = _page(sim)
        total = total_figures(parse_vllm(text))
        return text if total.counters.get("generation_tokens", 0) > 0 and total.gauges.get("requests_running") == running else None

    return wait_until(busy, f"{running} requests running and tokens made")


def test_sglang_names_read_as_the_same_figures():
    with start_simulator(SimOptions(engine="sglang", load=4, speed=20)) as sim:
        text = _busy_page(sim, 4)
    scrape = parse_vllm(text)
    assert scrape.engine == "sglang" and "vllm:" not in text
    assert scrape.metric_names_used["preemptions"] == "sglang:num_retracted_requests_total"
    total = total_figures(scrape)
    assert total.counters["generation_tokens"] > 0 and total.gauges["requests_running"] == 4
    assert total.gauges["kv_capacity_tokens"] > 0
    assert scrape.process_start_time_s is None and "_created" not in text


def test_0_33_families_and_sleep_state():
    with start_simulator(SimOptions(load=4, speed=20)) as sim:
        _busy_page(sim, 4)
        base = sim.urls["vllm_metrics"].removesuffix("/metrics")
        assert httpx.post(f"{base}/sleep?level=2", timeout=10).status_code == 200
        asleep = total_figures(parse_vllm(_page(sim)))
        tokens = asleep.counters["generation_tokens"]
        time.sleep(0.5)
        still = total_figures(parse_vllm(_page(sim)))
        httpx.post(f"{base}/wake_up", timeout=10)
        awake = total_figures(parse_vllm(_page(sim)))
    assert asleep.gauges["sleep_discard_all"] == 1 and awake.gauges["sleep_discard_all"] == 0
    assert still.counters["generation_tokens"] == tokens  # a sleeping engine runs no steps
    # a decode step reads the 5 GB of weights per GPU once, plus KV: more bytes than weights × tokens ÷ batch
    assert asleep.counters["engine_read_bytes"] > 5e9 and asleep.counters["engine_write_bytes"] > 0
    assert asleep.counters["finished_error"] == 0 and asleep.counters["admission_rejections"] == 0


def test_multiprocess_exposition_has_no_created_nor_process_start():
    with start_simulator(SimOptions(api_servers=2)) as sim:
        text = _page(sim)
    assert "_created" not in text and "process_start_time_seconds" not in text
    lines = [line for line in text.splitlines() if line.startswith("vllm:time_to_first_token_seconds")]
    assert lines[0].startswith("vllm:time_to_first_token_seconds_sum")
    assert parse_vllm(text).process_start_time_s is None
