"""The simulator's /metrics against a real vLLM 0.32's: families, types, label names, histogram bounds.

``tests/data/vllm_real_0_32.txt`` is a page captured from the real engine (the CPU build serving the
tiny model of tests/vllm_engine.py, after a ``vllm bench serve`` run); tests/test_real_engine.py
diffs the live page the same way. A difference fails the test unless ``KNOWN`` lists it with its
reason; an entry of ``KNOWN`` that no longer differs fails it too, so the table stays true.
"""

from __future__ import annotations

from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from simulator import SimOptions, start_simulator

REAL_PAGE = Path(__file__).parent / "data" / "vllm_real_0_32.txt"
Shape = dict[str, tuple[str, tuple[str, ...], tuple[float, ...]]]

_SERVER_OWN = "the API server's own process, Python and HTTP metrics (prometheus_client, prometheus-fastapi-instrumentator): the product reads only process_start_time_seconds"
_NOT_READ = "not read by the product (no catalogue row); the simulator leaves it out"
# (difference, family) → why the simulator is allowed to differ from the real engine there.
KNOWN: dict[tuple[str, str], str] = {
    **{("missing", name): _SERVER_OWN for name in (
        "http_request_duration_highr_seconds", "http_request_duration_seconds", "http_request_size_bytes",
        "http_requests", "http_response_size_bytes", "process_cpu_seconds", "process_max_fds", "process_open_fds",
        "process_resident_memory_bytes", "process_virtual_memory_bytes", "python_gc_collections",
        "python_gc_objects_collected", "python_gc_objects_uncollectable", "python_info")},
    **{("missing", name): _NOT_READ for name in (
        "vllm:estimated_flops_per_gpu", "vllm:external_prefix_cache_hits", "vllm:external_prefix_cache_queries",
        "vllm:mm_cache_hits", "vllm:mm_cache_queries", "vllm:prompt_tokens_by_source", "vllm:prompt_tokens_cached",
        "vllm:prompt_tokens_cached_by_source", "vllm:request_inference_time_seconds",
        "vllm:request_max_num_generation_tokens", "vllm:request_num_preemptions", "vllm:request_params_max_tokens",
        "vllm:request_params_n", "vllm:request_prefill_kv_computed_tokens")},
    # vLLM's build_1_2_5_buckets(max_model_len): the recorded engine's max_model_len is under 5,000 (up to 2,000),
    # the simulated one 8,192 (up to 5,000)
    **{("bounds", name): "1-2-5 buckets up to max_model_len, which differs" for name in (
        "vllm:request_prompt_tokens", "vllm:request_generation_tokens")},
    ("labels", "vllm:cache_config_info"): "every cache setting is a label and their set changes with each release; "
    "the simulator states the ones the product reads (block_size, num_gpu_blocks, kv_cache_size_tokens, "
    "kv_cache_memory_bytes) and a few more",
}  # fmt: skip


def shape(page: str) -> Shape:
    """Per family (``_created`` gauges left out: every counter and histogram has one): its type,
    the label names of its samples (``le`` aside) and its histogram bounds."""
    out: Shape = {}
    for family in text_string_to_metric_families(page):
        if family.name.endswith("_created"):
            continue
        labels = sorted({k for s in family.samples for k in s.labels if k != "le"})
        bounds = sorted({float(s.labels["le"]) for s in family.samples if s.name.endswith("_bucket")})
        out[family.name] = (family.type, tuple(labels), tuple(bounds))
    return out


def differences(real: Shape, simulated: Shape) -> set[tuple[str, str]]:
    """``(what, family)``: ``missing`` / ``extra`` in the simulator, or its ``type``, ``labels`` or
    ``bounds`` differ."""
    found = {("missing", name) for name in real.keys() - simulated.keys()}
    found |= {("extra", name) for name in simulated.keys() - real.keys()}
    for name in real.keys() & simulated.keys():
        for i, what in enumerate(("type", "labels", "bounds")):
            if real[name][i] != simulated[name][i]:
                found.add((what, name))
    return found


def simulator_page() -> str:
    sim = start_simulator(SimOptions(seed=3))
    try:
        return httpx.get(sim.urls["vllm_metrics"], headers={"Accept": "text/plain"}, timeout=10).text
    finally:
        sim.stop()


def check(real_page: str) -> None:
    found = differences(shape(real_page), shape(simulator_page()))
    unexplained = sorted(found - KNOWN.keys())
    assert not unexplained, f"the simulator differs from vLLM 0.32 here (fix simulator/ or add to KNOWN why): {unexplained}"
    stale = sorted(KNOWN.keys() - found)
    assert not stale, f"KNOWN lists differences that are gone: {stale}"


def test_the_simulator_exposes_what_a_real_vllm_0_32_exposes():
    check(REAL_PAGE.read_text(encoding="utf-8"))


def test_the_diff_sees_a_wrong_bound_and_a_missing_family():
    real = shape(REAL_PAGE.read_text(encoding="utf-8"))
    simulated = dict(real)
    ttft = simulated.pop("vllm:time_to_first_token_seconds")
    simulated["vllm:e2e_request_latency_seconds"] = ttft  # TTFT's bounds under E2E's name
    assert differences(real, simulated) == {("missing", "vllm:time_to_first_token_seconds"),
                                            ("bounds", "vllm:e2e_request_latency_seconds")}  # fmt: skip

