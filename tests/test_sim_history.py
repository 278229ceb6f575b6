"""generate_history: what the demo backfills (monotonic counters, restarts, incidents, speed)."""

import random
import time

from prometheus_client.parser import text_string_to_metric_families

from simulator.expo import ValueSink, VllmView, render, vllm_families, vllm_layout
from simulator.fasttext import Template
from simulator.history import generate_history
from simulator.stats import EngineStats

DAY = 86400.0
START = 1_795_000_000.0  # 2026-11-18 (a Wednesday), 11:06 UTC
COUNTERS = ("vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:num_preemptions_total",
            "vllm:e2e_request_latency_seconds_count")


def _values(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key.split("{")[0] if "_bucket" not in key else key] = float(value)
    return out


def test_counters_are_monotonic_except_at_restarts():
    samples = list(generate_history(START, START + 3 * DAY, 120.0, seed=0))
    assert len(samples) == 3 * 720 + 1
    restarts = storms = 0
    previous = _values(samples[0].vllm)
    for sample in samples[1:]:
        current = _values(sample.vllm)
        restarted = current["process_start_time_seconds"] != previous["process_start_time_seconds"]
        restarts += restarted
        if not restarted:
            for key in [*COUNTERS, *(k for k in current if "_bucket" in k)]:
                assert current[key] >= previous[key], (sample.ts, key)
        else:
            assert current["process_start_time_seconds"] <= sample.ts
            assert current["vllm:generation_tokens_total"] < previous["vllm:generation_tokens_total"]
        storms += _values(sample.gateway)["sweetspot_gateway_limit"] > 16
        previous = current
    assert restarts >= 1 and storms >= 1
    assert max(_values(s.gateway)["sweetspot_gateway_queue_depth"] for s in samples) > 10


def test_samples_parse_and_histograms_are_consistent():
    sample = next(generate_history(START, START + 600, 30.0, seed=1))
    for text in (sample.vllm, sample.gateway, sample.dcgm):
        assert list(text_string_to_metric_families(text))
    families = {f.name: f for f in text_string_to_metric_families(sample.vllm)}
    ttft = families["vllm:time_to_first_token_seconds"].samples
    buckets = [s.value for s in ttft if s.name.endswith("_bucket")]
    count = next(s.value for s in ttft if s.name.endswith("_count"))
    assert buckets == sorted(buckets) and buckets[-1] == count > 0


def test_same_seed_same_history():
    first = [s.vllm for s in generate_history(START, START + 3600, 300.0, seed=5)]
    assert first == [s.vllm for s in generate_history(START, START + 3600, 300.0, seed=5)]


def test_fast_template_writes_what_prometheus_client_writes():
    rng = random.Random(0)
    for version in ("v1", "v0"):
        stats = EngineStats(started_at=1.7e9 + rng.random())
        view = VllmView('m/"odd",name=x', stats, 3, 1, 0.25, 4980, 16, 0.92, version)
        template = Template(vllm_families(view))
        for _ in range(20):
            for hist in stats.hists.values():
                hist.observe(rng.expovariate(0.3), rng.randint(1, 10**7))
            stats.generation_tokens += rng.randint(0, 10**9)
            stats.preemptions = float(rng.choice([0, 1e21, 12345678.0]))
            sink = ValueSink()
            vllm_layout(view, sink)
            assert template.render(sink.values) == render(vllm_families(view))


def test_history_rate_is_about_a_millisecond_per_sample():
    list(generate_history(START, START + 60, 30.0))  # profiles are computed once per process
    began = time.perf_counter()
    n = sum(1 for _ in generate_history(START, START + 2000 * 30.0 - 1, 30.0, seed=2))
    per_sample = (time.perf_counter() - began) / n
    assert n == 2000
    assert per_sample < 0.005  # ~1.2 ms measured on the shared 2-core machine; loose for CI noise
