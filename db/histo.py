"""Packed histogram increases: encode one scrape's bucket increases, sum many rows quickly.

A row stores the *per-bucket* (non-cumulative) increases of one histogram as a blob of little-endian
uint32 values ``increase << 8 | bucket_index``, only for buckets that grew (most scrapes see 0–3
requests, so the blob is a few bytes or NULL). Increases are whole counts (Prometheus histogram
counts are integers in practice; fractional parts are rounded). Layouts up to 256 buckets. An
increase above 2**24 - 1 is written as several entries for the same bucket: entries simply add up.

Mixed layouts in one window (vLLM restarted with other buckets): every row is mapped onto the
*newest* layout of the window: an old bucket's count goes to the new bucket whose upper bound is the
smallest one ≥ the old upper bound (+Inf → +Inf). This is exact when the new bounds include the old
ones, and otherwise never reports a value below what was observed (it rounds up to the next bound).
"""

from __future__ import annotations

import bisect
import json
import struct
from collections.abc import Sequence

import numpy as np

INF = float("inf")
MAX_BUCKETS = 256


def bounds_key(bounds: Sequence[float]) -> str:
    """The stable text form of a layout stored in ``bucket_layouts.bounds``."""
    return json.dumps(["+Inf" if b == INF else float(b) for b in bounds])


def bounds_from_key(text: str) -> tuple[float, ...]:
    return tuple(INF if b == "+Inf" else float(b) for b in json.loads(text))


MAX_INC = (1 << 24) - 1
DTYPE = "<u4"


def entries(index: int, inc: int) -> list[int]:
    """Packed entries for one bucket's increase (split when it does not fit 24 bits)."""
    out = []
    while inc > MAX_INC:
        out.append((MAX_INC << 8) | index)
        inc -= MAX_INC
    if inc > 0:
        out.append((inc << 8) | index)
    return out


def encode(increases: Sequence[int]) -> bytes | None:
    """Pack dense per-bucket increases (ints ≥ 0); None when no bucket grew."""
    return pack([e for i, inc in enumerate(increases) if inc > 0 for e in entries(i, int(inc))])


def pack(values: Sequence[int]) -> bytes | None:
    """Blob of already packed values (``increase << 8 | index``); None when empty."""
    return struct.pack(f"<{len(values)}I", *values) if values else None


def decode(blob: bytes | None, size: int) -> list[int]:
    """Dense per-bucket increases of one row (``size`` buckets)."""
    dense = [0] * size
    if blob:
        for value in np.frombuffer(blob, dtype=DTYPE).tolist():
            dense[value & 255] += value >> 8
    return dense


def sum_blobs(groups: int, size: int, keys: Sequence[int], blobs: Sequence[bytes]) -> np.ndarray:
    """Dense ``counts[groups, size]`` from packed blobs of one layout (``keys[i]`` = blob i's group)."""
    if not blobs:
        return np.zeros((groups, size), dtype=np.int64)
    lens = np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs)) >> 2
    data = np.frombuffer(b"".join(blobs), dtype=DTYPE).astype(np.int64)
    flat = np.repeat(np.asarray(keys, dtype=np.int64), lens) * size + (data & 255)
    counts = np.bincount(flat, weights=(data >> 8).astype(np.float64), minlength=groups * size)
    return counts.astype(np.int64).reshape(groups, size)


def remap_index(old: Sequence[float], new: Sequence[float]) -> np.ndarray:
    """For each old bucket, the index of the new bucket receiving its count (see module doc)."""
    return np.asarray([min(bisect.bisect_left(new, b), len(new) - 1) for b in old], dtype=np.int64)


def accumulate(
    groups: int,
    rows: Sequence[tuple[int, int | None, bytes | None]],
    layouts: dict[int, tuple[float, ...]],
) -> tuple[tuple[float, ...], np.ndarray] | None:
    """Sum packed rows ``(group, layout_id, blob)`` into dense per-group bucket increases.

    Returns ``(bounds, counts[groups, buckets])`` on the newest layout (the layout of the last row
    with one), or None when no row has a layout (histogram never exposed). Groups with no increase
    keep zeros: the caller turns Δcount = 0 into "no value".
    """
    with_layout = [r for r in rows if r[1] is not None]
    if not with_layout:
        return None
    target_id = int(with_layout[-1][1])  # type: ignore[arg-type]
    target = layouts[target_id]
    nb = len(target)
    blobs = [(g, lid, b) for g, lid, b in with_layout if b]
    counts = np.zeros(groups * nb, dtype=np.int64)
    if blobs:
        lens = np.fromiter((len(b) >> 2 for _, _, b in blobs), dtype=np.int64, count=len(blobs))
        data = np.frombuffer(b"".join(b for _, _, b in blobs), dtype=DTYPE).astype(np.int64)
        idx = data & 255
        row_group = np.repeat(np.fromiter((g for g, _, _ in blobs), dtype=np.int64, count=len(blobs)), lens)
        layout_ids = {lid for _, lid, _ in blobs}
        if layout_ids != {target_id}:
            idx = _remap(idx, np.repeat([lid for _, lid, _ in blobs], lens), layouts, target)
        flat = row_group * nb + idx
        counts = np.bincount(flat, weights=(data >> 8).astype(np.float64), minlength=groups * nb).astype(np.int64)
    return target, counts.reshape(groups, nb)


def _remap(idx: np.ndarray, row_layout: np.ndarray, layouts: dict[int, tuple[float, ...]], target: tuple[float, ...]) -> np.ndarray:
    out = idx.copy()
    for lid in set(row_layout.tolist()):
        mask = row_layout == lid
        table = remap_index(layouts[int(lid)], target)
        out[mask] = table[np.minimum(idx[mask], len(table) - 1)]
    return out
