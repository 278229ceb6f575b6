"""The figures of vLLM 0.33 and SGLang (docs/metrics.md) as the query facade computes them.

Name tables the facade extends its own with (what to read, what each stored column is needed by),
and the figures computed from the step arrays once rates are known. Arrays hold one value per step;
NaN is "no data" (a gap), never zero: a ratio over no queries, or a rate of a counter the engine does
not expose, stays NaN.

- ``engine_bw_gbps``: the engine's own estimate of memory traffic per GPU, (rate(read) + rate(write))
  ÷ 1e9 (vLLM's docs give it so), from ``--enable-mfu-metrics``. Beside the measured bandwidth
  (NVML GPM / DCGM) and the peak it tells whether the ceiling's assumption holds.
- ``prefix_cache_hit_rate``: vLLM's hits ÷ queries over the step (tokens); SGLang's own gauge
  averaged over the step when there are no counters.
- speculative decoding: acceptance rate = accepted ÷ draft tokens; mean acceptance length =
  1 + accepted ÷ drafts (ENGINES.md).
"""

from __future__ import annotations

import numpy as np

from collectors.catalogue import FINISHED_BY_REASON

# counters whose rates the facade computes: figure "<counter>_per_s"
RATE_COUNTERS = (*FINISHED_BY_REASON.values(), "admission_rejections", "engine_read_bytes", "engine_write_bytes")
RATIO_COUNTERS = ("prefix_cache_hits", "prefix_cache_queries", "spec_decode_drafts", "spec_decode_draft_tokens",
                  "spec_decode_accepted_tokens")
GAUGE_MAXES = (
    "waiting_capacity_max",
    "waiting_deferred_max",
    "kv_capacity_tokens_max",
    "kv_capacity_bytes_max",
    "sleep_weights_offloaded_max",
    "sleep_discard_all_max",
    "lora_running_adapters_max",
    "lora_waiting_adapters_max",
)
# per-model values that describe the server, not a share of it: the largest model's, not a sum
MAX_ACROSS_MODELS = frozenset({*GAUGE_MAXES, "prefix_cache_hit_rate_avg"}) - {"waiting_capacity_max",
                                                                               "waiting_deferred_max"}
QUANTILES = (
    ("queue_time", 0.95, "queue_time_p95_s"),
    ("prefill_time", 0.95, "prefill_time_p95_s"),
    ("tpot", 0.95, "tpot_p95_s"),
)
POINT_KEYS = (
    *(f"{c}_per_s" for c in RATE_COUNTERS),
    "engine_bw_gbps",
    "waiting_capacity_max",
    "waiting_deferred_max",
    "kv_capacity_tokens",
    "kv_capacity_bytes",
    "prefix_cache_hit_rate",
    "sleep_weights_offloaded_max",
    "sleep_discard_all_max",
    "lora_running_adapters_max",
    "lora_waiting_adapters_max",
    "spec_decode_acceptance_rate",
    "spec_decode_mean_acceptance_length",
    *(name for _, _, name in QUANTILES),
)
_ACCEPTANCE = {"spec_decode_acceptance_rate", "spec_decode_mean_acceptance_length"}
NEEDED_BY: dict[str, set[str]] = {
    **{c: {f"{c}_per_s"} for c in RATE_COUNTERS},
    "engine_read_bytes": {"engine_read_bytes_per_s", "engine_bw_gbps"},
    "engine_write_bytes": {"engine_write_bytes_per_s", "engine_bw_gbps"},
    "prefix_cache_hits": {"prefix_cache_hit_rate"},
    "prefix_cache_queries": {"prefix_cache_hit_rate"},
    "prefix_cache_hit_rate_sum": {"prefix_cache_hit_rate"},
    "spec_decode_drafts": _ACCEPTANCE,
    "spec_decode_draft_tokens": _ACCEPTANCE,
    "spec_decode_accepted_tokens": _ACCEPTANCE,
    "kv_capacity_tokens_max": {"kv_capacity_tokens"},
    "kv_capacity_bytes_max": {"kv_capacity_bytes"},
    **{g: {g} for g in GAUGE_MAXES if not g.startswith("kv_")},
}


def add(f: dict[str, np.ndarray]) -> None:
    """Add the derived figures to the step arrays ``f`` (rates already in), where their inputs are."""
    with np.errstate(invalid="ignore", divide="ignore"):
        if "engine_read_bytes_per_s" in f or "engine_write_bytes_per_s" in f:
            read, write = f.get("engine_read_bytes_per_s"), f.get("engine_write_bytes_per_s")
            f["engine_bw_gbps"] = _plus(read, write) / 1e9
        if "prefix_cache_hits" in f:
            ratio = _ratio(f["prefix_cache_hits"], f["prefix_cache_queries"])
            gauge = f.get("prefix_cache_hit_rate_avg")
            f["prefix_cache_hit_rate"] = ratio if gauge is None else np.where(np.isnan(ratio), gauge, ratio)
        elif "prefix_cache_hit_rate_avg" in f:
            f["prefix_cache_hit_rate"] = f["prefix_cache_hit_rate_avg"]
        if "spec_decode_accepted_tokens" in f:
            accepted = f["spec_decode_accepted_tokens"]
            f["spec_decode_acceptance_rate"] = _ratio(accepted, f["spec_decode_draft_tokens"])
            f["spec_decode_mean_acceptance_length"] = 1.0 + _ratio(accepted, f["spec_decode_drafts"])
        for name in ("kv_capacity_tokens", "kv_capacity_bytes"):
            if f"{name}_max" in f:
                f[name] = f[f"{name}_max"]


def _plus(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray:
    """a + b where both are known; the known one where only one is (a write-only page is rare)."""
    if a is None or b is None:
        return a if b is None else b  # type: ignore[return-value]
    return np.where(np.isnan(a), b, np.where(np.isnan(b), a, a + b))


def _ratio(part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    return np.where(whole > 0, part / np.where(whole > 0, whole, 1.0), np.nan)
