"""Cumulative values of one (target, model) series and the reset-aware increase rules.

Pure functions over a small mutable state, so the rules are testable without a database.
"""

from __future__ import annotations

import binascii
import json
import struct
from dataclasses import dataclass, field
from typing import Any

from collectors.records import Histogram
from db.histo import MAX_INC, entries

# What json.dumps(..., separators=(",", ":")) writes, from an encoder built once: dumps builds one per
# call. No circular check: the state is plain nested lists and dicts.
_ENCODE = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode
# to_text's JSON heads by (counter keys, (histogram key, buckets)…, positions of None): a state keeps
# its head from round to round, and encoding it cost ~16 µs of CPU warm, ~65 µs after a wait (the
# encoder's Python side builds its C encoder at every call).
_HEADS: dict[tuple[tuple[str, ...], tuple[tuple[str, int], ...], tuple[int, ...]], str] = {}
_HEADS_MAX = 64


@dataclass
class HistState:
    layout: int
    cumulative: list[float]
    count: float
    sum: float | None
    created: float | None


@dataclass
class SeriesState:
    """Last stored cumulative values (``counters``: key → (value, created))."""

    ts: int | None = None
    process_start: float | None = None
    counters: dict[str, tuple[float, float | None]] = field(default_factory=dict)
    hists: dict[str, HistState] = field(default_factory=dict)

    def restarted(self, process_start: float | None) -> bool:
        """True when vLLM's process start time changed since the last scrape."""
        return self.process_start is not None and process_start is not None and process_start != self.process_start

    def to_text(self) -> str:
        """The form the writer stores every round: ``HEAD|DATA``, exact, ~3× cheaper than :meth:`to_json`.

        HEAD is JSON ``[counter keys, [[histogram key, buckets], …], positions of None]``; DATA is
        base64 of little-endian float64s: ts, process start, (value, created) per counter,
        (layout, count, sum, created) per histogram, then every histogram's cumulative counts. Each
        float is written as its 8 bytes: no decimal conversion, which is what made the JSON cost
        ~80 µs a round (and it is exact, NaN and infinities included).
        """
        scalars: list[Any] = [self.ts, self.process_start]
        for pair in self.counters.values():
            scalars += pair
        cumulative: list[float] = []
        for h in self.hists.values():
            scalars += (h.layout, h.count, h.sum, h.created)
            cumulative += h.cumulative
        none = tuple([i for i, v in enumerate(scalars) if v is None]) if None in scalars else ()
        if none:
            scalars = [0.0 if v is None else v for v in scalars]
        key = (tuple(self.counters), tuple([(k, len(h.cumulative)) for k, h in self.hists.items()]), none)
        head = _HEADS.get(key)
        if head is None:
            if len(_HEADS) >= _HEADS_MAX:
                _HEADS.clear()  # heads are few (one per model layout); endless distinct ones must not grow memory
            head = _HEADS[key] = _ENCODE([list(key[0]), [list(pair) for pair in key[1]], list(none)])
        data = struct.pack(f"<{len(scalars) + len(cumulative)}d", *scalars, *cumulative)
        return f"{head}|{binascii.b2a_base64(data, newline=False).decode()}"

    @classmethod
    def from_text(cls, text: str) -> SeriesState:
        """Read :meth:`to_text` or :meth:`to_json` (states stored by earlier releases are JSON)."""
        if text.startswith("{"):
            return cls.from_json(text)
        head, _, data = text.partition("|")
        counter_keys, hist_keys, none = json.loads(head)
        raw = binascii.a2b_base64(data)
        values: list[Any] = list(struct.unpack(f"<{len(raw) // 8}d", raw))
        for i in none:
            values[i] = None
        ts, ps = values[0], values[1]
        state = cls(ts=None if ts is None else int(ts), process_start=ps)
        at = 2
        for k in counter_keys:
            state.counters[k] = (values[at], values[at + 1])
            at += 2
        cum_at = at + 4 * len(hist_keys)
        for k, n in hist_keys:
            layout, count, total, created = values[at : at + 4]
            state.hists[k] = HistState(int(layout), values[cum_at : cum_at + n], count, total, created)
            at, cum_at = at + 4, cum_at + n
        return state

    def to_json(self) -> str:
        return _ENCODE(
            {
                "ts": self.ts,
                "ps": self.process_start,
                "c": {k: list(v) for k, v in self.counters.items()},
                "h": {k: [h.layout, h.cumulative, h.count, h.sum, h.created] for k, h in self.hists.items()},
            }
        )

    @classmethod
    def from_json(cls, text: str) -> SeriesState:
        data: dict[str, Any] = json.loads(text)
        return cls(
            ts=data.get("ts"),
            process_start=data.get("ps"),
            counters={k: (v[0], v[1]) for k, v in data.get("c", {}).items()},
            hists={k: HistState(*v) for k, v in data.get("h", {}).items()},
        )


# Observations one bucket may gain in one scrape interval: 2³² ≈ 4.3 × 10⁹, far beyond any server
# (vLLM counts requests and tokens). More, or an infinite count, is a garbage page: its increases are
# unknown rather than stored (an infinite one cannot be, and a huge one would be split into millions
# of 24-bit entries, for ages, by db.histo.entries).
MAX_BUCKET_INCREASE = float(2**32)


def _created_changed(old: float | None, new: float | None) -> bool:
    return old is not None and new is not None and old != new


def counter_increase(
    state: SeriesState, key: str, value: float | None, created: float | None, restarted: bool, fresh: bool
) -> float | None:
    """Increase of a counter since the last scrape; None when unknown (absent or baseline).

    A decrease, a ``created`` change or ``restarted`` → the new value is the increase.
    """
    if value is None:
        return None
    prev = state.counters.get(key)
    state.counters[key] = (value, created)
    if prev is None or fresh:
        return None
    old, old_created = prev
    if restarted or _created_changed(old_created, created) or value < old:
        return value
    return value - old


def histogram_increase(
    state: SeriesState,
    key: str,
    hist: Histogram | None,
    layout: int | None,
    created: float | None,
    restarted: bool,
    fresh: bool,
) -> tuple[float, float | None, list[int]] | None:
    """``(Δcount, Δsum, packed bucket increases)`` since the last scrape; None when unknown.

    Packed increases are ``increase << 8 | bucket_index`` for the buckets that grew (see
    :mod:`db.histo`). Unknown: histogram absent, first observation, after a long gap, or bucket
    layout changed (no increase for that scrape; the new layout counts from the next one).
    """
    if hist is None or layout is None:
        return None
    cumulative = list(hist.cumulative)
    count = hist.count if hist.count is not None else (cumulative[-1] if cumulative else 0.0)
    prev = state.hists.get(key)
    state.hists[key] = HistState(layout, cumulative, count, hist.sum, created)
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
