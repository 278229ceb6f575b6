"""The arithmetic of the figures computed from other figures (db/figures.py's ``derived`` rows,
vLLM 0.33 and SGLang: docs/metrics.md). Each takes the step arrays (rates and ratios already in)
and returns the figure's, or None where its inputs were not read. NaN is "no data" (a gap), never zero.

- ``engine_bw_gbps``: the engine's own estimate of memory traffic per GPU, (rate(read) + rate(write))
  ÷ 1e9 (vLLM's docs give it so), from ``--enable-mfu-metrics``. Beside the measured bandwidth
  (NVML GPM / DCGM) and the peak it tells whether the ceiling's assumption holds.
- ``spec_decode_mean_acceptance_length`` = 1 + accepted ÷ drafts (ENGINES.md); the acceptance rate
  (accepted ÷ draft tokens) is a ratio row.
"""

from __future__ import annotations

import numpy as np


def engine_bw_gbps(f: dict[str, np.ndarray]) -> np.ndarray | None:
    read, write = f.get("engine_read_bytes_per_s"), f.get("engine_write_bytes_per_s")
    if read is None and write is None:
        return None
    return _plus(read, write) / 1e9


def mean_acceptance_length(f: dict[str, np.ndarray]) -> np.ndarray | None:
    if "spec_decode_accepted_tokens" not in f or "spec_decode_drafts" not in f:
        return None
    drafts = f["spec_decode_drafts"]
    with np.errstate(invalid="ignore", divide="ignore"):
        return 1.0 + np.where(drafts > 0, f["spec_decode_accepted_tokens"] / np.where(drafts > 0, drafts, 1.0), np.nan)


def _plus(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray:
    """a + b where both are known; the known one where only one is (a write-only page is rare)."""
    if a is None or b is None:
        return a if b is None else b  # type: ignore[return-value]
    return np.where(np.isnan(a), b, np.where(np.isnan(b), a, a + b))
