"""The figures of vLLM 0.33 and SGLang (docs/metrics.md) that the catalogue's rate, quantile and
ratio fields do not give by themselves: gauge figures, and figures computed from other figures.

The facade (db/queries.py) extends its name tables with these and calls :func:`add` once rates and
ratios are in. Arrays hold one value per step; NaN is "no data" (a gap), never zero.

- ``engine_bw_gbps``: the engine's own estimate of memory traffic per GPU, (rate(read) + rate(write))
  ÷ 1e9 (vLLM's docs give it so), from ``--enable-mfu-metrics``. Beside the measured bandwidth
  (NVML GPM / DCGM) and the peak it tells whether the ceiling's assumption holds.
- ``prefix_cache_hit_rate``: the catalogue's ratio (vLLM's hits ÷ queries, tokens); where there are
  no counters, SGLang's own gauge averaged over the step.
- ``spec_decode_mean_acceptance_length`` = 1 + accepted ÷ drafts (ENGINES.md); the acceptance rate
  (accepted ÷ draft tokens) is a catalogue ratio.
"""

from __future__ import annotations

import numpy as np

# (figure, column of the reduced rows, how steps combine it), as db/queries.py's _GAUGE_FIGURES
GAUGE_FIGURES = (
    ("waiting_capacity_max", "waiting_capacity_max", "max"),
    ("waiting_deferred_max", "waiting_deferred_max", "max"),
    ("kv_capacity_tokens", "kv_capacity_tokens_max", "max"),
    ("kv_capacity_bytes", "kv_capacity_bytes_max", "max"),
    ("sleep_weights_offloaded_max", "sleep_weights_offloaded_max", "max"),
    ("sleep_discard_all_max", "sleep_discard_all_max", "max"),
    ("lora_running_adapters_max", "lora_running_adapters_max", "max"),
    ("lora_waiting_adapters_max", "lora_waiting_adapters_max", "max"),
)
AVERAGED = ("prefix_cache_hit_rate_sum",)  # SGLang's hit-rate gauge: → prefix_cache_hit_rate_avg
# per-model values that describe the server, not a share of it: the largest model's, not a sum
MAX_ACROSS_MODELS = frozenset(
    {col for _, col, _ in GAUGE_FIGURES if not col.startswith("waiting_")} | {"prefix_cache_hit_rate_avg"}
)
POINT_KEYS = ("engine_bw_gbps", "spec_decode_mean_acceptance_length")
NEEDED_BY: dict[str, set[str]] = {
    "engine_read_bytes": {"engine_bw_gbps"},
    "engine_write_bytes": {"engine_bw_gbps"},
    "covered_ms": {"engine_bw_gbps"},
    "spec_decode_drafts": {"spec_decode_mean_acceptance_length"},
    "spec_decode_accepted_tokens": {"spec_decode_mean_acceptance_length"},
    "prefix_cache_hit_rate_sum": {"prefix_cache_hit_rate"},
}


def add(f: dict[str, np.ndarray]) -> None:
    """Add the derived figures to the step arrays ``f`` (rates and ratios already in), where their inputs are."""
    with np.errstate(invalid="ignore", divide="ignore"):
        read, write = f.get("engine_read_bytes_per_s"), f.get("engine_write_bytes_per_s")
        if read is not None or write is not None:
            f["engine_bw_gbps"] = _plus(read, write) / 1e9
        gauge = f.get("prefix_cache_hit_rate_avg")
        if gauge is not None:
            ratio = f.get("prefix_cache_hit_rate")
            f["prefix_cache_hit_rate"] = gauge if ratio is None else np.where(np.isnan(ratio), gauge, ratio)
        if "spec_decode_accepted_tokens" in f and "spec_decode_drafts" in f:
            drafts = f["spec_decode_drafts"]
            per_draft = np.where(drafts > 0, f["spec_decode_accepted_tokens"] / np.where(drafts > 0, drafts, 1.0), np.nan)
            f["spec_decode_mean_acceptance_length"] = 1.0 + per_draft


def _plus(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray:
    """a + b where both are known; the known one where only one is (a write-only page is rare)."""
    if a is None or b is None:
        return a if b is None else b  # type: ignore[return-value]
    return np.where(np.isnan(a), b, np.where(np.isnan(b), a, a + b))
