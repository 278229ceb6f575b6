"""The arithmetic of the figures computed from other figures (db/figures.py's ``derived`` rows,
vLLM 0.33 and SGLang: docs/metrics.md). Each takes the step arrays (rates and ratios already in)
and returns the figure's, or None where its inputs were not read. NaN is "no data" (a gap), never zero.

- ``engine_bw_gbps``: the engine's own estimate of memory traffic per GPU, (rate(read) + rate(write))
  ÷ 1e9 (vLLM's docs give it so), from ``--enable-mfu-metrics`` (without it the counters stay 0: no
  data where tokens were generated). Beside the measured bandwidth
  (NVML GPM / DCGM) and the peak it tells whether the ceiling's assumption holds.
- ``mean_context_tokens`` = mean prompt + half the mean output of the requests finished in the step
  (``vllm:request_prompt_tokens`` / ``request_generation_tokens`` sum ÷ count): the step model's context.
- ``decode_tok_s_per_request`` = tokens_per_s ÷ max(running_avg, tokens_per_s ÷ steps_per_s): never above
  steps/s (an idle share of the window lowers the running average, not the requests in each step).
- ``gateway_wait_s``: the gateway's own wait histogram's mean where it counted waits (measured), else
  average gateway queue ÷ requests entering the engine per second (Little's law, an estimate);
  ``gateway_wait_p95_s`` its P95 (the histogram's, else a Gamma estimate), ``client_ttft_p95_s`` =
  max(the engine's TTFT P95, its median + the wait's P95).
- ``spec_decode_mean_acceptance_length`` = 1 + accepted ÷ drafts (ENGINES.md); the acceptance rate
  (accepted ÷ draft tokens) is a ratio row.
"""

from __future__ import annotations

import numpy as np


def engine_bw_gbps(f: dict[str, np.ndarray]) -> np.ndarray | None:
    """GB/s per GPU; NaN (no data) in a step whose engine produced tokens while its byte counters
    stood still: vLLM 0.32+ exposes them at 0 unless started with ``--enable-mfu-metrics``, and
    "0 GB/s" beside tokens being generated is no figure."""
    read, write = f.get("engine_read_bytes_per_s"), f.get("engine_write_bytes_per_s")
    if read is None and write is None:
        return None
    gbps = _plus(read, write) / 1e9
    tokens = f.get("tokens_per_s")
    if tokens is None:
        return gbps
    return np.where((gbps == 0) & (np.nan_to_num(tokens) > 0), np.nan, gbps)


def mean_context_tokens(f: dict[str, np.ndarray]) -> np.ndarray | None:
    """The mean prompt of the requests finished in the step + half their mean output: the context a
    decode step reads on average over a request's life (its cache grows one token a step)."""
    prompt, output = _mean(f, "request_prompt_tokens"), _mean(f, "request_generation_tokens")
    if prompt is None or output is None:
        return None
    return prompt + output / 2.0


def decode_tok_s_per_request(f: dict[str, np.ndarray]) -> np.ndarray | None:
    """Output tok/s ÷ the requests running while the engine stepped: each request's decode speed.

    The running gauge is a time average, which counts the seconds the engine idled between requests
    as 0 running, though no step (and no token) happened in them: tok/s ÷ running_avg then reads
    above steps/s by the idle share (112 vs 93 tok/s on a real vLLM, issue 28), which no request can
    decode at (one token per step at most). Each step ran at least its tokens' worth of requests, tok/s
    ÷ steps/s, so the divisor is the larger of that and running_avg; without a step count (SGLang),
    running_avg."""
    tok, running = f.get("tokens_per_s"), f.get("requests_running_avg")
    if tok is None or running is None:
        return None
    steps = f.get("steps_per_s")
    with np.errstate(invalid="ignore", divide="ignore"):
        if steps is not None:
            per_step = np.where(steps > 0, tok / np.where(steps > 0, steps, 1.0), np.nan)
            running = np.where(np.isnan(per_step), running, np.fmax(running, per_step))
        return np.where(running > 0, tok / np.where(running > 0, running, 1.0), np.nan)


def gateway_wait_s(f: dict[str, np.ndarray]) -> np.ndarray | None:
    """The mean wait in the gateway: measured where the gateway's own wait histogram counted waits in
    the step (its sum ÷ count, :func:`measured_waits`), else Little's law: the gateway queue's average
    ÷ the rate requests enter the engine (its TTFT count's rate, else finished requests' where vLLM has
    no TTFT histogram). An empty queue waits 0; a queue while nobody entered (rate 0 or unknown) is
    NaN: the wait is unknown, never a division by zero. NaN too where no gateway queue was read."""
    queue = f.get("queue_depth_avg")
    if queue is None:
        return None
    rate = admission_rate(f)
    with np.errstate(invalid="ignore", divide="ignore"):
        little = np.where(queue == 0, 0.0, np.where(rate > 0, queue / np.where(rate > 0, rate, 1.0), np.nan))
    measured = measured_waits(f)
    if measured is None:
        return little
    waits, total = f["gateway_waits"], f["gateway_wait_hist_sum"]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(measured & ~np.isnan(total), total / np.where(measured, waits, 1.0), little)


def measured_waits(f: dict[str, np.ndarray]) -> np.ndarray | None:
    """Where the gateway's own wait histogram counted at least one wait in the step (the measured
    source); None where no step has one (every step then reads the estimate)."""
    waits, p95 = f.get("gateway_waits"), f.get("gateway_wait_hist_p95_s")
    if waits is None or p95 is None:
        return None
    measured = (np.nan_to_num(waits) > 0) & ~np.isnan(p95)
    return measured if measured.any() else None


def gateway_wait_p95_s(f: dict[str, np.ndarray]) -> np.ndarray | None:
    """The 95th percentile of the gateway wait: the gateway's own histogram's where it counted waits in
    the step, else the estimate of :func:`wait_p95_s` from the queue and the admission rate."""
    queue = f.get("queue_depth_avg")
    if queue is None:
        return None
    estimate = wait_p95_s(queue, admission_rate(f))
    measured = measured_waits(f)
    return estimate if measured is None else np.where(measured, f["gateway_wait_hist_p95_s"], estimate)


def admission_rate(f: dict[str, np.ndarray]) -> np.ndarray:
    """Requests entering the engine per second: TTFT observations' rate, else finished requests'."""
    started, finished = f.get("requests_started_per_s"), f.get("requests_per_s")
    if started is None:
        return finished if finished is not None else np.full(len(f["scrapes"]), np.nan)
    return started if finished is None else np.where(np.isnan(started), finished, started)


Z95 = 1.6449  # the standard normal's 95th percentile


def wait_p95_s(queue: np.ndarray, rate: np.ndarray) -> np.ndarray:
    """The 95th percentile of the gateway wait: a request that finds ``queue`` waiting is admitted after
    as many departures, at ``rate`` a second; their time is Gamma(queue, rate) where departures come
    as a Poisson stream (mean queue ÷ rate: Little's law), its P95 by Wilson and Hilferty's cube-root
    approximation. 0 for an empty queue, NaN where the rate is 0 or unknown, or no queue was read (no
    gateway: a P95 of a wait nobody measured read 19.8 s beside "gateway wait: no data")."""
    k = np.where(queue > 0, queue, 1.0)
    gamma_p95 = k * (1.0 - 1.0 / (9.0 * k) + Z95 / (3.0 * np.sqrt(k))) ** 3
    with np.errstate(invalid="ignore", divide="ignore"):
        wait = np.where(queue == 0, 0.0, np.where(rate > 0, gamma_p95 / np.where(rate > 0, rate, 1.0), np.nan))
    return np.where(np.isnan(queue), np.nan, wait)


def client_ttft_p95_s(f: dict[str, np.ndarray]) -> np.ndarray | None:
    """What a client behind the gateway waits for its first token, at the 95th percentile: the larger
    of the engine's TTFT P95 and its median + the wait's P95 (:func:`wait_p95_s`; the usual bound on a
    sum's quantile where one term dominates: an empty queue gives the engine's P95, a long one the
    wait's). Where no gateway queue was read, the engine's own; where the wait is unknown, NaN."""
    ttft, median = f.get("ttft_p95_s"), f.get("ttft_p50_s")
    if ttft is None:
        return None
    queue, wait = f.get("queue_depth_avg"), f.get("gateway_wait_s")
    waited = gateway_wait_p95_s(f)
    if queue is None or wait is None or waited is None:
        return ttft
    both = np.fmax(ttft, (median if median is not None else ttft) + waited)
    return np.where(np.isnan(queue), ttft, np.where(np.isnan(wait), np.nan, both))


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
