"""Per-level figures from the request records of one closed-loop level.

The level's window is ``[0, window_s]`` seconds since its start. A request counts as *ended* when it
ended inside the window; one still streaming when the window closed is *in flight* and is cut there:

- tok/s counts every output token received inside the window, over the window, whatever became of
  its request (ended, in flight, or failed after some tokens): it is what the server delivered.
  An ended request counts its usage tokens (else its text chunks); an in-flight one counts the text
  chunks that arrived inside the window.
- QPS = successful requests that ended inside the window ÷ window.
- TTFT is taken over successful or in-flight requests whose first token arrived inside the window;
  ITL over the gaps between their consecutive text chunks inside the window; E2E over successful
  ended requests only. Failed requests are left out of latencies (their timing says nothing useful).
- error rate = failed ÷ ended requests (in-flight requests are neither).

Percentiles interpolate linearly between closest ranks (numpy's default). Every figure is None when
it has no sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from db.results import SweepLevel
from sweep.client import RequestRecord


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-quantile (0–1) of ``values`` with linear interpolation; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean; None when empty."""
    return sum(values) / len(values) if values else None


def ended(record: RequestRecord, window_s: float) -> bool:
    """Whether the request ended (successfully or not) inside the window."""
    return record.end_s is not None and record.end_s <= window_s


def tokens_in_window(record: RequestRecord, window_s: float) -> int:
    """Output tokens of the request received inside the window (see the module docstring)."""
    if ended(record, window_s):
        return record.output_tokens
    return sum(1 for t in record.chunk_times_s if t <= window_s)


def _ttft(record: RequestRecord, window_s: float) -> float | None:
    if record.chunk_times_s and record.chunk_times_s[0] <= window_s:
        return record.chunk_times_s[0] - record.start_s
    return None


def _gaps(record: RequestRecord, window_s: float) -> list[float]:
    times = [t for t in record.chunk_times_s if t <= window_s]
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def level_stats(records: Sequence[RequestRecord], concurrency: int, window_s: float) -> SweepLevel:
    """The figures of one level from its records; ``window_s`` is the measured window in seconds."""
    done = [r for r in records if ended(r, window_s)]
    failed = [r for r in done if r.error is not None]
    ok = [r for r in done if r.error is None]
    timed = [r for r in records if r.error is None]
    ttfts = [v for v in (_ttft(r, window_s) for r in timed) if v is not None]
    gaps = [g for r in timed for g in _gaps(r, window_s)]
    e2es = [r.end_s - r.start_s for r in ok if r.end_s is not None]
    tokens = sum(tokens_in_window(r, window_s) for r in records)
    return SweepLevel(
        concurrency=concurrency,
        duration_s=window_s,
        requests=len(done),
        errors=len(failed),
        tokens_per_s=tokens / window_s if window_s > 0 else None,
        qps=len(ok) / window_s if window_s > 0 else None,
        ttft_p50_s=percentile(ttfts, 0.50),
        ttft_p95_s=percentile(ttfts, 0.95),
        ttft_p99_s=percentile(ttfts, 0.99),
        itl_p95_s=percentile(gaps, 0.95),
        e2e_mean_s=mean(e2es),
        e2e_p95_s=percentile(e2es, 0.95),
        error_rate=len(failed) / len(done) if done else None,
    )


def rescale(level: SweepLevel, speed: float) -> SweepLevel:
    """Figures of a server whose clock runs ``speed`` × real time (the simulator's ``--speed``), in
    the server's time: durations × speed, rates ÷ speed. The client's own overhead is scaled too, so
    keep ``speed`` where that overhead stays small next to the latencies (≤ 20 for the simulator)."""
    if speed == 1:
        return level

    def times(value: float | None) -> float | None:
        return None if value is None else value * speed

    def rate(value: float | None) -> float | None:
        return None if value is None else value / speed

    return replace(
        level,
        duration_s=level.duration_s * speed,
        tokens_per_s=rate(level.tokens_per_s),
        qps=rate(level.qps),
        ttft_p50_s=times(level.ttft_p50_s),
        ttft_p95_s=times(level.ttft_p95_s),
        ttft_p99_s=times(level.ttft_p99_s),
        itl_p95_s=times(level.itl_p95_s),
        e2e_mean_s=times(level.e2e_mean_s),
        e2e_p95_s=times(level.e2e_p95_s),
    )
