"""Per-level figures from the request records of one closed-loop level.

Times are seconds since the level started. The clients run through a warm-up first, then the
window ``(w0, w1]`` (``w0`` = warm-up, ``w1`` = warm-up + window) in which they send the level's
*measured* requests; at ``w1`` they stop sending and the requests in flight run to their end (the
drain). The figures are over the span ``(w0, end]``, ``end`` = the last measured request's end
(``w1`` if that came earlier): with no warm-up this is what ``vllm bench serve`` divides by (first
request sent to last response finished). The warm-up keeps the start-up burst out of the figures
(all N clients send their first request at the same instant, so those requests queue behind N
prefills and would weigh on TTFT P95 far more than in steady state).

- tok/s = output tokens received inside the span ÷ span: what the server delivered. A measured
  request that succeeded counts the server's ``usage.completion_tokens`` (else its text chunks), as
  the bench does; any other (sent during the warm-up, failed mid-stream) counts its text chunks
  that arrived inside the span.
- QPS = successful measured requests ÷ span.
- Latencies are over the measured requests, failed ones left out: TTFT over those that got a first
  token, E2E over those that ended (every one once drained, so long requests weigh as they should).
  ITL over the gaps between consecutive text chunks of successful or unfinished requests, both
  chunks inside the span.
- requests / error rate: measured requests that ended, and the failed share of them. A request the
  drain gave up on (still running a request timeout after the window) is neither a success nor a
  failure.

Percentiles interpolate linearly between closest ranks (numpy's default). Every figure is None when
it has no sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

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


@dataclass(frozen=True)
class Window:
    """The measured part of a level, seconds since its start: ``(start_s, end_s]``."""

    start_s: float
    end_s: float

    def __contains__(self, t: float) -> bool:
        return self.start_s < t <= self.end_s

    @property
    def length_s(self) -> float:
        return self.end_s - self.start_s


def ended(record: RequestRecord, window: Window) -> bool:
    """Whether the request ended (successfully or not) inside the window."""
    return record.end_s is not None and record.end_s in window


def started(record: RequestRecord, window: Window) -> bool:
    """Whether the request was sent inside the window (or at its very start)."""
    return window.start_s <= record.start_s <= window.end_s


def tokens_in_window(record: RequestRecord, window: Window) -> int:
    """Output tokens of the request received inside ``window`` (the level's span, see the module
    docstring): all of a request sent and successfully ended inside it, else its chunks inside it."""
    if started(record, window) and ended(record, window) and record.error is None:
        return record.output_tokens
    return sum(1 for t in record.chunk_times_s if t in window)


def _gaps(record: RequestRecord, window: Window) -> list[float]:
    times = [t for t in record.chunk_times_s if t in window]
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def span_end(records: Sequence[RequestRecord], window: Window) -> float:
    """The end of the level's span: the last measured request's end, or the window's end if later."""
    ends = [r.end_s for r in records if started(r, window) and r.end_s is not None]
    return max([window.end_s, *ends])


def measured(records: Sequence[RequestRecord], window_s: float, warmup_s: float = 0.0) -> list[RequestRecord]:
    """The level's measured requests: those sent inside its window (after the warm-up)."""
    window = Window(warmup_s, warmup_s + window_s)
    return [r for r in records if started(r, window)]


def level_stats(
    records: Sequence[RequestRecord], concurrency: int, window_s: float, warmup_s: float = 0.0
) -> SweepLevel:
    """The figures of one level: requests sent in ``window_s`` seconds after ``warmup_s`` seconds of
    warm-up, over the span from the window's start to the last of them ended (``duration_s``)."""
    window = Window(warmup_s, warmup_s + window_s)
    span = Window(warmup_s, span_end(records, window))
    sent = measured(records, window_s, warmup_s)
    done = [r for r in sent if r.end_s is not None]
    failed = [r for r in done if r.error is not None]
    ok = [r for r in done if r.error is None]
    timed = [r for r in records if r.error is None]
    ttfts = [r.chunk_times_s[0] - r.start_s for r in sent if r.error is None and r.chunk_times_s]
    gaps = [g for r in timed for g in _gaps(r, span)]
    e2es = [r.end_s - r.start_s for r in ok if r.end_s is not None]
    tokens = sum(tokens_in_window(r, span) for r in records)
    length = span.length_s
    return SweepLevel(
        concurrency=concurrency,
        duration_s=length,
        requests=len(done),
        errors=len(failed),
        tokens_per_s=tokens / length if length > 0 else None,
        qps=len(ok) / length if length > 0 else None,
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
