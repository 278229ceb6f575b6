"""The arithmetic of the figures computed from other figures (db/figures.py's ``derived`` rows,
vLLM 0.33 and SGLang: docs/metrics.md). Each takes the step arrays (rates and ratios already in)
and returns the figure's, or None where its inputs were not read. NaN is "no data" (a gap), never zero.

- ``engine_bw_gbps``: the engine's own estimate of memory traffic per GPU, (rate(read) + rate(write))
  ÷ 1e9 (vLLM's docs give it so), from ``--enable-mfu-metrics``. Beside the measured bandwidth
  (NVML GPM / DCGM) and the peak it tells whether the ceiling's assumption holds.
- ``mean_context_tokens`` = mean prompt + half the mean output of the requests finished in the step
  (``vllm:request_prompt_tokens`` / ``request_generation_tokens`` sum ÷ count): the step model's context.
- ``decode_tok_s_per_request`` = tokens_per_s ÷ running_avg.
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


def mean_context_tokens(f: dict[str, np.ndarray]) -> np.ndarray | None:
    """The mean prompt of the requests finished in the step + half their mean output: the context a
    decode step reads on average over a request's life (its cache grows one token a step)."""
    prompt, output = _mean(f, "request_prompt_tokens"), _mean(f, "request_generation_tokens")
    if prompt is None or output is None:
        return None
    return prompt + output / 2.0


def decode_tok_s_per_request(f: dict[str, np.ndarray]) -> np.ndarray | None:
    """Output tok/s ÷ running requests (average): each request's decode speed."""
    tok, running = f.get("tokens_per_s"), f.get("requests_running_avg")
    if tok is None or running is None:
        return None
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(running > 0, tok / np.where(running > 0, running, 1.0), np.nan)


def _mean(f: dict[str, np.ndarray], histogram: str) -> np.ndarray | None:
    """A histogram's mean observation in the step (sum ÷ count); NaN where nothing was observed."""
    total, count = f.get(f"{histogram}_sum"), f.get(f"{histogram}_count")
    if total is None or count is None:
        return None
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.where(count > 0, count, 1.0), np.nan)


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
