"""Cumulative values of one (target, model) series and the reset-aware increase rules.

Pure functions over a small mutable state, so the rules are testable without a database.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from collectors.records import Histogram
from db.histo import MAX_INC, entries


@dataclass
class HistState:
    layout: int
    cumulative: list[float]
    count: float
    sum: float | None
    created: float | None
    # increases of skipped rounds not stored yet: [Δcount, Δsum, Δcumulative], same layout
    carried: list[Any] | None = None


@dataclass
class SeriesState:
    """Last seen cumulative values (``counters``: key → (value, created)); ``carried``: counter
    increases of skipped rounds (see :func:`counter_increase`), key → increase."""

    ts: int | None = None
    process_start: float | None = None
    counters: dict[str, tuple[float, float | None]] = field(default_factory=dict)
    hists: dict[str, HistState] = field(default_factory=dict)
    carried: dict[str, float] = field(default_factory=dict)

    def restarted(self, process_start: float | None) -> bool:
        """True when vLLM's process start time changed since the last scrape (by more than a millisecond:
        VictoriaMetrics keeps about 12 significant digits, so 1796526064.6512923 reads back as
        1796526064.6512918 through it, and a target moved from a direct scrape to it is no restart)."""
        return (self.process_start is not None and process_start is not None
                and abs(process_start - self.process_start) > 0.001)  # fmt: skip

    def to_json(self) -> str:
        """The stored form (``series_state.state``): plain JSON; NaN and infinities as Python's json
        writes them. Carried increases only while there are some (rarely: after a skipped round)."""
        data: dict[str, Any] = {
            "ts": self.ts,
            "ps": self.process_start,
            "c": {k: list(v) for k, v in self.counters.items()},
            "h": {k: [h.layout, h.cumulative, h.count, h.sum, h.created] + ([h.carried] if h.carried else [])
                  for k, h in self.hists.items()},
        }
        if self.carried:
            data["k"] = self.carried
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> SeriesState:
        data: dict[str, Any] = json.loads(text)
        return cls(
            ts=data.get("ts"),
            process_start=data.get("ps"),
            counters={k: (v[0], v[1]) for k, v in data.get("c", {}).items()},
            hists={k: HistState(*v) for k, v in data.get("h", {}).items()},
            carried=data.get("k", {}),
        )


# Observations one bucket may gain in one scrape interval: 2³² ≈ 4.3 × 10⁹, far beyond any server
# (vLLM counts requests and tokens). More, or an infinite count, is a garbage page: its increases are
# unknown rather than stored (an infinite one cannot be, and a huge one would be split into millions
# of 24-bit entries, for ages, by db.histo.entries).
MAX_BUCKET_INCREASE = float(2**32)


def _created_changed(old: float | None, new: float | None) -> bool:
    # by more than a millisecond, as a process start (SeriesState.restarted: VictoriaMetrics's precision)
    return old is not None and new is not None and abs(old - new) > 0.001


def counter_increase(
    state: SeriesState,
    key: str,
    value: float | None,
    created: float | None,
    restarted: bool,
    fresh: bool,
    skipped: bool = False,
) -> float | None:
    """Increase of a counter since the last scrape; None when unknown (absent or baseline).

    A decrease, a ``created`` change or ``restarted`` → the new value is the increase. A ``skipped``
    scrape (not stored) still moves the state on, its increase carried into the next stored one:
    a reset after it is then measured from its value, not from the last stored one's, which would
    lose what was counted between the two.
    """
    if value is None:
        return None
    prev = state.counters.get(key)
    state.counters[key] = (value, created)
    carried = state.carried.pop(key, 0.0)
    if prev is None or fresh:
        return None
    old, old_created = prev
    reset = restarted or _created_changed(old_created, created) or value < old
    increase = (value if reset else value - old) + carried
    if skipped:
        state.carried[key] = increase
        return None
    return increase


def histogram_increase(
    state: SeriesState,
    key: str,
    hist: Histogram | None,
    layout: int | None,
    created: float | None,
    restarted: bool,
    fresh: bool,
    skipped: bool = False,
) -> tuple[float, float | None, list[int]] | None:
    """``(Δcount, Δsum, packed bucket increases)`` since the last scrape; None when unknown.

    Packed increases are ``increase << 8 | bucket_index`` for the buckets that grew (see
    :mod:`db.histo`). Unknown: histogram absent, first observation, after a long gap, or bucket
    layout changed (no increase for that scrape; the new layout counts from the next one). A
    ``skipped`` scrape's increase is carried into the next stored one, as a counter's is.
    """
    if hist is None or layout is None:
        return None
    cumulative = list(hist.cumulative)
    count = hist.count if hist.count is not None else (cumulative[-1] if cumulative else 0.0)
    prev = state.hists.get(key)
    now = state.hists[key] = HistState(layout, cumulative, count, hist.sum, created)
    if prev is None or fresh or prev.layout != layout or len(prev.cumulative) != len(cumulative):
        return None
    delta = [c - p for c, p in zip(cumulative, prev.cumulative, strict=True)]
    reset = restarted or _created_changed(prev.created, created) or count < prev.count or min(delta) < 0
    if reset:
        delta = cumulative
        d_count, d_sum = count, hist.sum
    else:
        d_count = count - prev.count
        d_sum = None if hist.sum is None or prev.sum is None else hist.sum - prev.sum
    if prev.carried:
        c_count, c_sum, c_delta = prev.carried
        delta = [d + c for d, c in zip(delta, c_delta, strict=True)]
        d_count += c_count
        d_sum = None if d_sum is None or c_sum is None else d_sum + c_sum
    if skipped:
        now.carried = [d_count, d_sum, delta]
        return None
    packed = pack_increases(delta)
    return None if packed is None else (d_count, d_sum, packed)


def pack_increases(delta_cumulative: list[float]) -> list[int] | None:
    """Cumulative increases → packed per-bucket increases (whole counts; zero buckets skipped);
    None when a bucket's increase is beyond :data:`MAX_BUCKET_INCREASE` (a garbage page)."""
    packed = []
    below = 0.0
    for i, d in enumerate(delta_cumulative):
        if d == below:  # most buckets did not grow: skip them before any arithmetic
            continue
        inc = d - below
        below = d
        if inc >= 0.5:  # counts are whole numbers; rounding absorbs float noise
            if not inc <= MAX_BUCKET_INCREASE:  # infinite, or beyond any real server
                return None
            whole = int(inc + 0.5)
            if whole <= MAX_INC:
                packed.append((whole << 8) | i)
            else:
                packed.extend(entries(i, whole))
    return packed
