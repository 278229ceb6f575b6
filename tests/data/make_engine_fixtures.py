"""Generate /metrics pages of every vLLM naming era and of SGLang 0.5, from the names in ENGINES.md.

Run from the repo root: ``.venv/bin/python -m tests.data.make_engine_fixtures`` (rewrites the
``engine_*.txt`` files next to this script; tests/test_engine_fixtures.py checks that the committed
files match this script and that prometheus_client's parser reads every sample the script meant).

| file | engine, version | what makes it that era |
|---|---|---|
| ``engine_vllm_0_4.txt`` | vLLM 0.4 (V0) | ``gpu_cache_usage_perc``, ``time_per_output_token_seconds``, ``num_requests_swapped``, no ``engine`` label, no ``*_created``, TTFT up to 10 s |
| ``engine_vllm_0_6.txt`` | vLLM 0.6 (V0) | as 0.4 plus the phase histograms (queue, prefill, decode), V0 spec-decode counters and ``lora_requests_info`` |
| ``engine_vllm_0_10.txt`` | vLLM 0.10.2 (V1) | both KV names (``kv_cache_usage_perc`` and ``gpu_cache_usage_perc``), both prefix-cache names, TPOT and ITL |
| ``engine_vllm_0_11.txt`` | vLLM 0.11 | old KV/prefix names hidden; ``time_per_output_token_seconds`` still shown beside ITL and ``request_time_per_output_token_seconds`` (it is hidden from 0.12) |
| ``engine_vllm_0_15.txt`` | vLLM 0.15 | ``time_per_output_token_seconds`` removed |
| ``engine_vllm_0_33.txt`` | vLLM 0.33, one API server | MFU bytes counters, finished-by-reason incl. error/repetition, admission rejections, waiting by reason, sleep state, spec decode, ``lora_requests_info``, ``cache_config_info`` with ``kv_cache_size_tokens`` |
| ``engine_vllm_0_33_mp.txt`` | vLLM 0.33, ``--api-server-count 2`` | the same families with no ``*_created``, no ``process_*``/``python_*``, and each histogram's ``_sum`` before its buckets |
| ``engine_sglang_0_5.txt`` | SGLang 0.5 | ``sglang:`` names; two data-parallel ranks (``dp_rank``) of TP 2 whose scheduler figures are repeated by ``tp_rank`` 1; tokenizer-side counters split by ``is_streaming``; served as prometheus_client's multiprocess collector serves it (SGLang's processes share one directory): no ``*_created``, no ``process_*`` |

Values are fixed (no clock, no randomness); ``EXPECTED`` holds the totals a reader must find.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from prometheus_client.metrics_core import Metric

from tests.data.make_vllm_fixtures import (
    ENGINES,
    ITL,
    MODEL,
    REQUEST_TIME,
    TOKENS_125,
    TTFT_V1,
    _spread,
    counter,
    gauge,
    histogram,
    http_families,
    process_families,
    render,
    v0_families,
)

HERE = Path(__file__).resolve().parent
REASONS_V1 = ("stop", "length", "abort", "error", "repetition")
# Per engine (0.33): finished by reason, MFU bytes per GPU, admission rejections (per model), waiting split,
# spec decode, KV capacity as vLLM 0.33 states it in cache_config_info.
V33 = {
    "0": {"success": (5000, 1000, 12, 3, 1), "read": 4.0e15, "write": 2.0e13, "flops": 9.0e17, "capacity": 2,
          "deferred": 0, "drafts": 40000, "draft_tokens": 120000, "accepted": 84000, "blocks": 30210},
    "1": {"success": (4000, 900, 8, 1, 0), "read": 3.0e15, "write": 1.0e13, "flops": 7.0e17, "capacity": 1,
          "deferred": 2, "drafts": 30000, "draft_tokens": 90000, "accepted": 60000, "blocks": 30210},
}
REJECTIONS = {"max_num_queued_reqs": 17.0, "max_num_queued_tokens": 4.0}
BLOCK_SIZE = 16
KV_BYTES_PER_TOKEN = 327680
# SGLang: two data-parallel ranks; tokenizer-side counters per is_streaming.
SGLANG_DP = {
    "0": {"running": 12, "queue": 3, "usage": 0.62, "max_tokens": 480000, "hit": 0.25, "retracted_now": 1},
    "1": {"running": 10, "queue": 1, "usage": 0.48, "max_tokens": 480000, "hit": 0.35, "retracted_now": 0},
}
SGLANG_TOKENIZER = {
    "true": {"prompt": 4000000, "generation": 1500000, "requests": 7000, "aborted": 20},
    "false": {"prompt": 1000000, "generation": 500000, "requests": 2000, "aborted": 5},
}
SGLANG_RETRACTED = {"0": 6, "1": 3}  # per dp rank (scheduler side)
TTFT_SGLANG = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0)

# What a reader must find, totals across engines/ranks and models (tests assert these).
EXPECTED = {
    "engine_vllm_0_4.txt": {"engine": "vllm", "generation_tokens": 1234567, "kv_cache_usage": 0.41,
                            "names": {"kv_cache_usage": "vllm:gpu_cache_usage_perc",
                                      "itl": "vllm:time_per_output_token_seconds"}},
    "engine_vllm_0_6.txt": {"engine": "vllm", "generation_tokens": 1234567, "kv_cache_usage": 0.41,
                            "names": {"kv_cache_usage": "vllm:gpu_cache_usage_perc",
                                      "queue_time": "vllm:request_queue_time_seconds"}},
    "engine_vllm_0_10.txt": {"engine": "vllm", "generation_tokens": 2000000, "kv_cache_usage": 0.57,
                             "prefix_cache_hits": 550000,
                             "names": {"kv_cache_usage": "vllm:kv_cache_usage_perc",
                                       "prefix_cache_hits": "vllm:prefix_cache_hits_total",
                                       "itl": "vllm:inter_token_latency_seconds"}},
    "engine_vllm_0_11.txt": {"engine": "vllm", "generation_tokens": 2000000, "kv_cache_usage": 0.57,
                             "names": {"itl": "vllm:inter_token_latency_seconds",
                                       "tpot": "vllm:request_time_per_output_token_seconds"}},
    "engine_vllm_0_15.txt": {"engine": "vllm", "generation_tokens": 2000000, "kv_cache_usage": 0.57,
                             "names": {"itl": "vllm:inter_token_latency_seconds"}},
    "engine_vllm_0_33.txt": {"engine": "vllm", "generation_tokens": 2000000, "kv_cache_usage": 0.57,
                             "engine_read_bytes": 3.5e15, "engine_write_bytes": 1.5e13,
                             "admission_rejections": 21, "finished": {"stop": 9000, "length": 1900, "abort": 20,
                                                                       "error": 4, "repetition": 1},
                             "waiting_capacity": 3, "waiting_deferred": 2, "kv_capacity_tokens": 2 * 30210 * 16,
                             "spec_decode_drafts": 70000, "spec_decode_draft_tokens": 210000,
                             "spec_decode_accepted_tokens": 144000, "lora_running": ["sql-lora"],
                             "lora_waiting": ["chat-lora", "summ-lora"], "process_start": True},
    "engine_vllm_0_33_mp.txt": {"engine": "vllm", "generation_tokens": 2000000, "engine_read_bytes": 3.5e15,
                                "process_start": False},
    "engine_sglang_0_5.txt": {"engine": "sglang", "generation_tokens": 2000000, "prompt_tokens": 5000000,
                              "requests_running": 22, "requests_waiting": 4, "kv_cache_usage": 0.62,
                              "preemptions": 9, "kv_capacity_tokens": 960000, "request_success": 9000,
                              "names": {"preemptions": "sglang:num_retracted_requests_total"}},
}


def _eng(e: str) -> dict[str, str]:
    return {"model_name": MODEL, "engine": e}


def _per_engine(values: dict[str, float | int]) -> list[tuple[dict[str, str], float]]:
    return [(_eng(e), float(v)) for e, v in values.items()]


def _hist(name: str, doc: str, bounds: Sequence[float], count: int, created: bool, scale: float = 0.37) -> Metric:
    series = [(_eng(e), _spread(count // (i + 1), len(bounds)), count * scale * (i + 1)) for i, e in enumerate(ENGINES)]
    return histogram(name, doc, bounds, series, created=created)


def _ttft(created: bool) -> Metric:
    return histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_V1,
                     [(_eng(e), ENGINES[e]["ttft"], ENGINES[e]["ttft_sum"]) for e in ENGINES], created=created)


def v0_page(version: str) -> list[Metric]:
    """vLLM V0 (0.4 or 0.6): one engine, no engine label, no *_created (V0 disabled them)."""
    lab = {"model_name": MODEL}
    fams = v0_families() + [
        gauge("vllm:cache_config_info", "information of cache_config",
              [({"block_size": "16", "cache_dtype": "auto", "gpu_memory_utilization": "0.9",
                 "num_cpu_blocks": "2048", "num_gpu_blocks": "30210", "sliding_window": "None",
                 "swap_space_bytes": "4294967296"}, 1.0)]),
    ]
    if version == "0.6":
        for name, what in (("queue", "WAITING"), ("prefill", "PREFILL"), ("decode", "DECODE")):
            fams.append(histogram(f"vllm:request_{name}_time_seconds", f"Histogram of time spent in {what} phase.",
                                  REQUEST_TIME, [(lab, _spread(6012, len(REQUEST_TIME)), 9000.0)], created=False))
        fams.append(gauge("vllm:lora_requests_info", "Running stats on lora requests.",
                          [({"running_lora_adapters": "", "max_lora": "4", "waiting_lora_adapters": ""}, 1764490100.0)]))
    return fams


def v1_page(era: str, created: bool = True) -> list[Metric]:
    """vLLM V1 pages of 0.10.2, 0.11, 0.15 and 0.33 (two engines of one model)."""
    v = ENGINES
    kv_names = ["vllm:kv_cache_usage_perc"] + (["vllm:gpu_cache_usage_perc"] if era == "0.10" else [])
    prefix_names = ["vllm:prefix_cache"] + (["vllm:gpu_prefix_cache"] if era == "0.10" else [])
    fams = [
        gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
              _per_engine({e: v[e]["running"] for e in v})),
        gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
              _per_engine({e: v[e]["waiting"] for e in v})),
    ]
    fams += [gauge(n, "KV-cache usage. 1 means 100 percent usage.", _per_engine({e: v[e]["kv"] for e in v}))
             for n in kv_names]
    for prefix in prefix_names:
        fams.append(counter(f"{prefix}_queries", "Prefix cache queries, in terms of number of queried tokens.",
                            _per_engine({e: v[e]["queries"] for e in v}), created))
        fams.append(counter(f"{prefix}_hits", "Prefix cache hits, in terms of number of cached tokens.",
                            _per_engine({e: v[e]["hits"] for e in v}), created))
    reasons = REASONS_V1 if era == "0.33" else ("stop", "length", "abort")
    success = {e: V33[e]["success"] if era == "0.33" else v[e]["success"] for e in v}
    fams += [
        counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
                _per_engine({e: v[e]["preempt"] for e in v}), created),
        counter("vllm:prompt_tokens", "Number of prefill tokens processed.",
                _per_engine({e: v[e]["prompt"] for e in v}), created),
        counter("vllm:generation_tokens", "Number of generation tokens processed.",
                _per_engine({e: v[e]["generation"] for e in v}), created),
        counter("vllm:request_success", "Count of successfully processed requests.",
                [({**_eng(e), "finished_reason": r}, success[e][i]) for e in v for i, r in enumerate(reasons)], created),
        _ttft(created),
        _hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL, 2000000, created),
        _hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", REQUEST_TIME, 9900,
              created),
        _hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
              REQUEST_TIME, 9900, created, 0.05),
        _hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
              REQUEST_TIME, 9900, created, 0.2),
        _hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
              REQUEST_TIME, 9900, created),
        _hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", TOKENS_125, 9900, created, 550.0),
    ]
    if era in ("0.10", "0.11"):
        fams.append(_hist("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.",
                          ITL, 2000000, created))
    if era != "0.10":
        fams.append(_hist("vllm:request_time_per_output_token_seconds",
                          "Histogram of time_per_output_token_seconds per request.", ITL, 9900, created, 0.06))
    fams.append(cache_config(era))
    if era == "0.33":
        fams += v33_families(created)
    return fams


def cache_config(era: str) -> Metric:
    rows = []
    for e in ENGINES:
        labels = {"block_size": str(BLOCK_SIZE), "cache_dtype": "auto", "enable_prefix_caching": "True", "engine": e,
                  "gpu_memory_utilization": "0.92", "num_cpu_blocks": "None", "num_gpu_blocks": str(V33[e]["blocks"]),
                  "prefix_caching_hash_algo": "sha256", "swap_space": "4"}
        if era == "0.33":
            tokens = V33[e]["blocks"] * BLOCK_SIZE
            labels |= {"kv_cache_size_tokens": str(tokens), "kv_cache_memory_bytes": str(tokens * KV_BYTES_PER_TOKEN)}
        rows.append((labels, 1.0))
    return gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", rows)


def v33_families(created: bool, sleep: str = "awake") -> list[Metric]:
    """The families 0.33 adds: MFU, admission, waiting by reason, sleep, spec decode, LoRA."""
    e33 = V33
    states = ("awake", "weights_offloaded", "discard_all")
    return [
        gauge("vllm:num_requests_waiting_by_reason", "Number of requests waiting, by reason.",
              [({**_eng(e), "reason": r}, float(e33[e][r])) for e in e33 for r in ("capacity", "deferred")]),
        gauge("vllm:engine_sleep_state", "Engine sleep state; awake = 0 means engine is sleeping.",
              [({**_eng(e), "sleep_state": s}, 1.0 if s == sleep else 0.0) for e in e33 for s in states]),
        counter("vllm:admission_rejections", "Requests rejected at admission (HTTP 503).",
                [({"model_name": MODEL, "reason": r}, n) for r, n in REJECTIONS.items()], created),
        counter("vllm:estimated_flops_per_gpu", "Estimated floating point operations per GPU.",
                _per_engine({e: e33[e]["flops"] for e in e33}), created),
        counter("vllm:estimated_read_bytes_per_gpu", "Estimated bytes read from memory per GPU.",
                _per_engine({e: e33[e]["read"] for e in e33}), created),
        counter("vllm:estimated_write_bytes_per_gpu", "Estimated bytes written to memory per GPU.",
                _per_engine({e: e33[e]["write"] for e in e33}), created),
        counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.",
                _per_engine({e: e33[e]["drafts"] for e in e33}), created),
        counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.",
                _per_engine({e: e33[e]["draft_tokens"] for e in e33}), created),
        counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.",
                _per_engine({e: e33[e]["accepted"] for e in e33}), created),
        gauge("vllm:lora_requests_info", "Running stats on lora requests.",
              [({"max_lora": "4", "waiting_lora_adapters": "chat-lora,summ-lora",
                 "running_lora_adapters": "sql-lora"}, 1764490300.5),
               ({"max_lora": "4", "waiting_lora_adapters": "", "running_lora_adapters": "old-lora"}, 1764490200.0)]),
    ]


def multiprocess(families: list[Metric]) -> list[Metric]:
    """What prometheus_client's MultiProcessCollector serves: no *_created, histogram _sum first."""
    out = []
    for family in families:
        samples = [s for s in family.samples if not s.name.endswith("_created")]
        if family.type == "histogram":
            samples.sort(key=lambda s: 0 if s.name.endswith("_sum") else 1)  # stable: buckets keep their order
        copy = Metric(family.name, family.documentation, family.type)
        copy.samples = samples
        out.append(copy)
    return out


def sglang_page() -> list[Metric]:
    """SGLang 0.5: scheduler figures per (dp_rank, tp_rank) of TP 2, tokenizer figures per is_streaming."""
    def sched(dp: str, tp: str) -> dict[str, str]:
        return {"model_name": MODEL, "engine_type": "unified", "tp_rank": tp, "pp_rank": "0", "moe_ep_rank": "0",
                "dp_rank": dp}

    def tok(streaming: str) -> dict[str, str]:
        return {"model_name": MODEL, "is_streaming": streaming}

    ranks = [(dp, tp) for dp in SGLANG_DP for tp in ("0", "1")]

    def per_rank(key: str) -> list[tuple[dict[str, str], float]]:
        return [(sched(dp, tp), float(SGLANG_DP[dp][key])) for dp, tp in ranks]

    t = SGLANG_TOKENIZER
    ttft = [(tok(s), _spread(t[s]["requests"], len(TTFT_SGLANG)), t[s]["requests"] * 0.45) for s in t]
    fams = [
        gauge("sglang:num_running_reqs", "The number of running requests.", per_rank("running")),
        gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", per_rank("queue")),
        gauge("sglang:token_usage", "The token usage.", per_rank("usage")),
        gauge("sglang:num_used_tokens", "The number of used tokens.",
              [(sched(dp, tp), float(int(SGLANG_DP[dp]["usage"] * SGLANG_DP[dp]["max_tokens"]))) for dp, tp in ranks]),
        gauge("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV pool.", per_rank("max_tokens")),
        gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", per_rank("hit")),
        gauge("sglang:gen_throughput", "The generation throughput (token/s).", [(sched(dp, tp), 180.5) for dp, tp in ranks]),
        gauge("sglang:num_retracted_reqs", "The number of retracted requests.", per_rank("retracted_now")),
        counter("sglang:num_retracted_requests", "Number of retracted requests.",
                [(sched(dp, tp), float(SGLANG_RETRACTED[dp])) for dp, tp in ranks], True),
        counter("sglang:prompt_tokens", "Number of prefill tokens processed.", [(tok(s), t[s]["prompt"]) for s in t], True),
        counter("sglang:generation_tokens", "Number of generation tokens processed.",
                [(tok(s), t[s]["generation"]) for s in t], True),
        counter("sglang:num_requests", "Number of requests processed.", [(tok(s), t[s]["requests"]) for s in t], True),
        counter("sglang:num_aborted_requests", "Number of requests aborted.", [(tok(s), t[s]["aborted"]) for s in t],
                True),
        histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_SGLANG,
                  ttft, created=True),
        histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL,
                  [(tok(s), _spread(t[s]["generation"], len(ITL)), t[s]["generation"] * 0.04) for s in t], created=True),
        histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
                  REQUEST_TIME, [(tok(s), _spread(t[s]["requests"], len(REQUEST_TIME)), t[s]["requests"] * 9.0)
                                 for s in t], created=True),
        histogram("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", REQUEST_TIME,
                  [(sched(dp, "0"), _spread(4500, len(REQUEST_TIME)), 900.0) for dp in SGLANG_DP], created=True),
    ]
    return fams


def families() -> dict[str, list[Metric]]:
    """File name → the families its page holds (what a parser must read back)."""
    return {
        "engine_vllm_0_4.txt": process_families() + v0_page("0.4"),
        "engine_vllm_0_6.txt": process_families() + v0_page("0.6"),
        "engine_vllm_0_10.txt": process_families() + v1_page("0.10"),
        "engine_vllm_0_11.txt": process_families() + v1_page("0.11"),
        "engine_vllm_0_15.txt": process_families() + v1_page("0.15"),
        "engine_vllm_0_33.txt": process_families() + v1_page("0.33") + http_families(),
        "engine_vllm_0_33_mp.txt": multiprocess(v1_page("0.33", created=False) + http_families()),
        "engine_sglang_0_5.txt": multiprocess(sglang_page()),
    }


def payloads() -> dict[str, str]:
    """File name → exposition text (prometheus_client's own exposition of ``families()``)."""
    return {name: render(fams) for name, fams in families().items()}


def v33_sleeping_page(state: str, scale: float = 1.0) -> str:
    """A 0.33 multiprocess page whose engines are in sleep ``state``; counters times ``scale`` (for restarts)."""
    fams = multiprocess(v1_page("0.33", created=False)[:-len(v33_families(False))] + v33_families(False, state))
    for family in fams:
        if family.type == "counter":
            family.samples = [s._replace(value=s.value * scale) for s in family.samples]
    return render(fams)


def main() -> int:
    for name, text in payloads().items():
        (HERE / name).write_text(text, encoding="utf-8")
        print(f"{name}: {len(text.encode())} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
