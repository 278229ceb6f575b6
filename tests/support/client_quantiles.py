"""What an engine's latency buckets prove about a client's quantile of the same requests."""

from __future__ import annotations

import math


def client_quantile_floor(q: float, before: dict[float, float], after: dict[float, float]) -> float:
    """The highest bucket edge a client's ``q``-quantile of the same requests must lie above, from the
    engine's buckets over its run, for a client that interpolates linearly between sorted values (the
    sweep, numpy in ``vllm bench serve``) and sees each first token no earlier than the engine made it.

    The client's quantile is at least its value of 0-based index ``floor(q·(n-1))``; an edge ``e`` with
    at most that many requests at or below it in the engine's buckets has every value from that index
    up above ``e``. The engine's histogram_quantile bucket is not such a bound: its rank is ``q·n``, so
    with 40-odd requests the client's interpolation can sit a bucket below (0.455 s for (0.5, 0.75])."""
    bounds = sorted(after)
    cumulative = {b: after[b] - before.get(b, 0.0) for b in bounds}
    index = math.floor(q * (cumulative[bounds[-1]] - 1))
    return max([0.0, *(b for b in bounds if not math.isinf(b) and cumulative[b] <= index)])
