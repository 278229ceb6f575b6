"""Generate vLLM /metrics payloads in vLLM's exact shapes, with prometheus_client's own exposition.

Run from the repo root: ``.venv/bin/python tests/data/make_vllm_fixtures.py`` (rewrites the .txt files
next to this script; tests/test_vllm_collector.py checks the committed files match this script).

- ``vllm_v1.txt``: V1 (>= 0.11 names), two engines of one model, ~58 KB, ``*_created`` series.
- ``vllm_v0.txt``: V0 names (gpu_cache_usage_perc, time_per_output_token_seconds, num_requests_swapped),
  no engine label, TTFT buckets stopping at 10 s, no ``*_created``.
- ``vllm_v0_10.txt``: 0.9.2-0.10 shape: kv_cache_usage_perc and gpu_cache_usage_perc both exposed with
  equal values, gpu_prefix_cache_* counters, time_per_output_token_seconds.

Values are fixed (no clock, no randomness) so tests can assert known totals.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

HERE = Path(__file__).resolve().parent
MODEL = "meta-llama/Llama-3.3-70B-Instruct-AWQ"
CREATED = 1764490000.25  # engine start, unix seconds
PROCESS_START = 1764489990.5

TTFT_V1 = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
           20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
TTFT_V0 = TTFT_V1[:16]
ITL = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
REQUEST_TIME = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
                480.0, 960.0, 1920.0, 7680.0)
TOKENS_125 = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
ITERATION_TOKENS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
PARAMS_N = (1, 2, 5, 10, 20)
HTTP_DURATION = (0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 7.5,
                 10.0, 30.0, 60.0)

# Per engine: counters, gauges, and per-bucket (non-cumulative) TTFT counts (the last is the +Inf bucket).
ENGINES = {
    "0": {"generation": 1234567, "prompt": 3000000, "preempt": 3, "success": (5000, 1000, 12),
          "hits": 300000, "queries": 900000, "running": 9, "waiting": 2, "kv": 0.41, "ttft_sum": 6400.5,
          "ttft": (0, 0, 3, 10, 40, 60, 80, 100, 600, 900, 800, 700, 1000, 500, 150, 50, 15, 3, 1, 0, 0, 0, 1)},
    "1": {"generation": 765433, "prompt": 2500000, "preempt": 4, "success": (4000, 900, 8),
          "hits": 250000, "queries": 800000, "running": 7, "waiting": 3, "kv": 0.57, "ttft_sum": 6100.25,
          "ttft": (0, 1, 2, 9, 30, 50, 70, 110, 500, 800, 700, 600, 900, 450, 120, 40, 10, 2, 0, 0, 0, 0, 0)},
}
REASONS = ("stop", "length", "abort")


def _family(name: str, doc: str, typ: str) -> Metric:
    return Metric(name, doc, typ)


def _cumulative(per_bucket: Sequence[float]) -> list[float]:
    out, total = [], 0.0
    for n in per_bucket:
        total += n
        out.append(total)
    return out


def _spread(count: int, n_bounds: int) -> list[int]:
    """A plausible per-bucket split of ``count`` observations over ``n_bounds`` + 1 buckets."""
    weights = [min(i + 1, n_bounds + 1 - i) for i in range(n_bounds + 1)]
    parts = [count * w // sum(weights) for w in weights]
    parts[len(parts) // 2] += count - sum(parts)
    return parts


def histogram(name: str, doc: str, bounds: Sequence[float], series: Iterable[tuple[dict[str, str], Sequence[float], float]],
              created: bool) -> Metric:
    """A histogram family; ``series`` yields (labels, per-bucket counts incl. +Inf, sum)."""
    metric = _family(name, doc, "histogram")
    for labels, per_bucket, total in series:
        cumulative = _cumulative(per_bucket)
        for le, value in zip([*bounds, float("inf")], cumulative, strict=True):
            metric.add_sample(name + "_bucket", {**labels, "le": floatToGoString(le)}, value)
        metric.add_sample(name + "_count", labels, cumulative[-1])
        metric.add_sample(name + "_sum", labels, total)
        if created:
            metric.add_sample(name + "_created", labels, CREATED)
    return metric


def counter(name: str, doc: str, series: Iterable[tuple[dict[str, str], float]], created: bool) -> Metric:
    metric = _family(name, doc, "counter")
    for labels, value in series:
        metric.add_sample(name + "_total", labels, value)
        if created:
            metric.add_sample(name + "_created", labels, CREATED)
    return metric


def gauge(name: str, doc: str, series: Iterable[tuple[dict[str, str], float]]) -> Metric:
    metric = _family(name, doc, "gauge")
    for labels, value in series:
        metric.add_sample(name, labels, value)
    return metric


class Payload:
    """A prometheus_client collector returning a fixed list of families."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def render(families: list[Metric]) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Payload(families))  # type: ignore[arg-type]
    return generate_latest(registry).decode("utf-8")


def process_families() -> list[Metric]:
    """The python_* and process_* families prometheus_client's default registry adds to vLLM's page."""
    fams = []
    gc = _family("python_gc_objects_collected", "Objects collected during gc", "counter")
    for gen, n in (("0", 20412.0), ("1", 7721.0), ("2", 411.0)):
        gc.add_sample("python_gc_objects_collected_total", {"generation": gen}, n)
    fams.append(gc)
    fams.append(gauge("python_info", "Python platform information",
                      [({"implementation": "CPython", "major": "3", "minor": "12", "patchlevel": "9", "version": "3.12.9"}, 1.0)]))
    for name, value in (("process_virtual_memory_bytes", 1.2345e11), ("process_resident_memory_bytes", 9.87654e9),
                        ("process_start_time_seconds", PROCESS_START), ("process_open_fds", 312.0),
                        ("process_max_fds", 1048576.0)):
        fams.append(gauge(name, name.replace("_", " "), [({}, value)]))
    fams.append(counter("process_cpu_seconds", "Total user and system CPU time spent in seconds.", [({}, 81234.56)], False))
    return fams


def http_families() -> list[Metric]:
    """prometheus-fastapi-instrumentator families vLLM's API server exposes."""
    handlers = ("/v1/chat/completions", "/v1/completions", "/metrics", "/health")
    reqs = [({"handler": h, "method": m, "status": "2xx"}, float(1000 * (i + 1))) for i, h in enumerate(handlers)
            for m in ("GET", "POST")]
    duration = histogram("http_request_duration_highr_seconds", "Latency with many buckets but no API specific labels.",
                         HTTP_DURATION, [({}, _spread(12000, len(HTTP_DURATION)), 93422.5)], created=True)
    return [counter("http_requests", "Total number of requests by method, status and handler.", reqs, True), duration]


def v1_families(model: str, names: dict[str, str], extra_gauges: Sequence[str] = ()) -> list[Metric]:
    """vLLM V1 families; ``names`` maps roles (kv, itl, hits, queries) to the version's exposed names."""
    eng = {e: {"model_name": model, "engine": e} for e in ENGINES}
    v = ENGINES
    fams = [
        gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
              [(eng[e], v[e]["running"]) for e in v]),
        gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
              [(eng[e], v[e]["waiting"]) for e in v]),
    ]
    for kv_name in [names["kv"], *extra_gauges]:
        fams.append(gauge(kv_name, "KV-cache usage. 1 means 100 percent usage.", [(eng[e], v[e]["kv"]) for e in v]))
    fams += [
        counter(names["queries"][:-6], "Prefix cache queries, in terms of number of queried tokens.",
                [(eng[e], v[e]["queries"]) for e in v], True),
        counter(names["hits"][:-6], "Prefix cache hits, in terms of number of cached tokens.",
                [(eng[e], v[e]["hits"]) for e in v], True),
        counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
                [(eng[e], v[e]["preempt"]) for e in v], True),
        counter("vllm:prompt_tokens", "Number of prefill tokens processed.", [(eng[e], v[e]["prompt"]) for e in v], True),
        counter("vllm:generation_tokens", "Number of generation tokens processed.",
                [(eng[e], v[e]["generation"]) for e in v], True),
        counter("vllm:request_success", "Count of successfully processed requests.",
                [({**eng[e], "finished_reason": r}, v[e]["success"][i]) for e in v for i, r in enumerate(REASONS)], True),
        gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
              [({"block_size": "16", "cache_dtype": "auto", "enable_prefix_caching": "True", "engine": e,
                 "gpu_memory_utilization": "0.92", "num_cpu_blocks": "None", "num_gpu_blocks": "30210",
                 "prefix_caching_hash_algo": "builtin", "swap_space": "4"}, 1.0) for e in v]),
    ]
    fams += v1_histograms(eng, names)
    return fams


def v1_histograms(eng: dict[str, dict[str, str]], names: dict[str, str]) -> list[Metric]:
    v = ENGINES
    plain = [
        ("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", ITERATION_TOKENS, 90000),
        ("vllm:request_prompt_tokens", "Number of prefill tokens processed.", TOKENS_125, 9900),
        ("vllm:request_generation_tokens", "Number of generation tokens processed.", TOKENS_125, 9900),
        ("vllm:request_params_n", "Histogram of the n request parameter.", PARAMS_N, 9900),
        (names["itl"], "Histogram of inter-token latency in seconds.", ITL, 2000000),
        ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", REQUEST_TIME, 9900),
        ("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", REQUEST_TIME, 9900),
        ("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", REQUEST_TIME, 9900),
    ]
    fams = [histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_V1,
                      [(eng[e], v[e]["ttft"], v[e]["ttft_sum"]) for e in v], created=True)]
    for name, doc, bounds, count in plain:
        series = [(eng[e], _spread(count // (i + 1), len(bounds)), count * 0.37 * (i + 1)) for i, e in enumerate(v)]
        fams.append(histogram(name, doc, bounds, series, created=True))
    return fams


def v0_families() -> list[Metric]:
    """vLLM V0: one engine, no engine label, old names, TTFT buckets stopping at 10 s, no *_created."""
    lab = {"model_name": MODEL}
    e = ENGINES["0"]
    ttft = [*e["ttft"][:16], sum(e["ttft"][16:])]
    fams = [
        gauge("vllm:num_requests_running", "Number of requests currently running on GPU.", [(lab, e["running"])]),
        gauge("vllm:num_requests_swapped", "Number of requests swapped to CPU.", [(lab, 1.0)]),
        gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", [(lab, e["waiting"])]),
        gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", [(lab, e["kv"])]),
        gauge("vllm:cpu_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.", [(lab, 0.0)]),
        counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", [(lab, e["preempt"])], False),
        counter("vllm:prompt_tokens", "Number of prefill tokens processed.", [(lab, e["prompt"])], False),
        counter("vllm:generation_tokens", "Number of generation tokens processed.", [(lab, e["generation"])], False),
        counter("vllm:request_success", "Count of successfully processed requests.",
                [({**lab, "finished_reason": r}, e["success"][i]) for i, r in enumerate(REASONS)], False),
        histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", ITERATION_TOKENS,
                  [(lab, _spread(90000, len(ITERATION_TOKENS)), 1.5e7)], created=False),
        histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_V0,
                  [(lab, ttft, e["ttft_sum"])], created=False),
        histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", ITL,
                  [(lab, _spread(1000000, len(ITL)), 61000.0)], created=False),
        histogram("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
                  REQUEST_TIME, [(lab, _spread(6012, len(REQUEST_TIME)), 181234.0)], created=False),
    ]
    return fams


V1_NAMES = {"kv": "vllm:kv_cache_usage_perc", "itl": "vllm:inter_token_latency_seconds",
            "hits": "vllm:prefix_cache_hits_total", "queries": "vllm:prefix_cache_queries_total"}
V0_10_NAMES = {"kv": "vllm:kv_cache_usage_perc", "itl": "vllm:time_per_output_token_seconds",
               "hits": "vllm:gpu_prefix_cache_hits_total", "queries": "vllm:gpu_prefix_cache_queries_total"}


def payloads() -> dict[str, str]:
    """File name → exposition text."""
    return {
        "vllm_v1.txt": render(process_families() + v1_families(MODEL, V1_NAMES) + http_families()),
        "vllm_v0.txt": render(process_families() + v0_families()),
        "vllm_v0_10.txt": render(process_families() + v1_families(MODEL, V0_10_NAMES, ["vllm:gpu_cache_usage_perc"])),
    }


def main() -> int:
    for name, text in payloads().items():
        (HERE / name).write_text(text, encoding="utf-8")
        print(f"{name}: {len(text.encode())} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
