"""Vectorised grouping of stored rows (raw or rollup) into steps: sums, weighted averages, maxima
and histogram bucket increases. Shared by queries and rollups, so both compute the same way.

Every input row carries ``n`` (samples it stands for: 1 for a raw row, the sample count for a
rollup). ``None``/NULL values are skipped; a group where every value is missing yields NaN, which
callers turn into None (a gap), never 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from db import histo


@dataclass
class Reduced:
    """Per-key results (arrays of length ``nkeys``; NaN = no data)."""

    n: np.ndarray
    sums: dict[str, np.ndarray] = field(default_factory=dict)
    avgs: dict[str, np.ndarray] = field(default_factory=dict)
    maxes: dict[str, np.ndarray] = field(default_factory=dict)
    hists: dict[str, list[tuple[np.ndarray, tuple[float, ...], np.ndarray]]] = field(default_factory=dict)


def column(rows: Sequence[Sequence[Any]], i: int) -> np.ndarray:
    """Column ``i`` as float64, NULL → NaN."""
    return np.array([r[i] for r in rows], dtype=np.float64)


def group_sum(key: np.ndarray, values: np.ndarray, nkeys: int) -> np.ndarray:
    """Sum per key of the non-NaN values; NaN where a key has none."""
    present = ~np.isnan(values)
    total = np.bincount(key, weights=np.where(present, values, 0.0), minlength=nkeys)
    seen = np.bincount(key, weights=present.astype(np.float64), minlength=nkeys)
    return np.where(seen > 0, total, np.nan)


def group_avg(key: np.ndarray, sums: np.ndarray, counts: np.ndarray, nkeys: int) -> np.ndarray:
    """Average per key = Σ sums ÷ Σ counts over rows whose sum is known; NaN where none."""
    present = ~np.isnan(sums)
    total = np.bincount(key, weights=np.where(present, sums, 0.0), minlength=nkeys)
    seen = np.bincount(key, weights=np.where(present, counts, 0.0), minlength=nkeys)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(seen > 0, total / np.where(seen > 0, seen, 1.0), np.nan)


def group_max(key: np.ndarray, values: np.ndarray, nkeys: int) -> np.ndarray:
    """Maximum per key of the non-NaN values; NaN where none."""
    out = np.full(nkeys, -np.inf)
    np.fmax.at(out, key, np.where(np.isnan(values), -np.inf, values))
    return np.where(np.isneginf(out), np.nan, out)


def reduce_rows(
    rows: Sequence[Sequence[Any]],
    cols: Sequence[str],
    key: np.ndarray,
    nkeys: int,
    spec: Mapping[str, Sequence[str]],
    layouts: dict[int, tuple[float, ...]],
) -> Reduced:
    """Group ``rows`` (named by ``cols``) by ``key`` (ints in [0, nkeys)).

    ``spec`` lists column names per operation: ``sum``, ``avg`` (a ``<x>_sum`` column; result
    ``<x>_avg`` = Σ sums ÷ Σ ``n``), ``max`` and
    ``hist`` (a histogram name ``h`` reads columns ``h_layout`` and ``h_buckets``).
    """
    index = {c: i for i, c in enumerate(cols)}
    # all-numeric rows: one C-level conversion instead of a Python pass per column
    matrix = np.array(rows, dtype=np.float64) if rows and not any(c.endswith("_buckets") for c in cols) else None

    def col(i: int) -> np.ndarray:
        return matrix[:, i] if matrix is not None else column(rows, i)

    if set(spec) == {"hist"}:  # sample counts unused: skip a pass over the rows
        n = np.zeros(0)
        out = Reduced(n=np.full(nkeys, np.nan))
    else:
        n = col(index["n"]) if rows else np.zeros(0)
        out = Reduced(n=np.bincount(key, weights=n, minlength=nkeys) if rows else np.zeros(nkeys))
    for c in spec.get("sum", ()):
        out.sums[c] = group_sum(key, col(index[c]), nkeys) if rows else np.full(nkeys, np.nan)
    for c in spec.get("avg", ()):  # a ``<x>_sum`` column (sum over ``n`` samples) gives ``<x>_avg``
        name = c.removesuffix("_sum") + "_avg"
        out.avgs[name] = group_avg(key, col(index[c]), n, nkeys) if rows else np.full(nkeys, np.nan)
    for c in spec.get("max", ()):
        out.maxes[c] = group_max(key, col(index[c]), nkeys) if rows else np.full(nkeys, np.nan)
    for h in spec.get("hist", ()):
        out.hists[h] = hist_parts(rows, key, nkeys, index[f"{h}_layout"], index[f"{h}_buckets"], layouts)
    return out


def hist_parts(
    rows: Sequence[Sequence[Any]], key: np.ndarray, nkeys: int, li: int, bi: int, layouts: dict[int, tuple[float, ...]]
) -> list[tuple[np.ndarray, tuple[float, ...], np.ndarray]]:
    """Per-key bucket increases; keys are split by their newest layout (usually one part).

    Returns ``[(keys, bounds, counts[len(keys), buckets]), ...]``.
    """
    present = {r[li] for r in rows}
    present.discard(None)
    if len(present) == 1:  # the usual case: one layout, no per-key split needed
        bounds = layouts[present.pop()]
        pairs = [(k, r[bi]) for k, r in zip(key.tolist(), rows, strict=True) if r[bi]]
        counts = histo.sum_blobs(nkeys, len(bounds), [k for k, _ in pairs], [b for _, b in pairs])
        return [(np.arange(nkeys, dtype=np.int64), bounds, counts)]
    newest: dict[int, int] = {}
    for k, r in zip(key.tolist(), rows, strict=True):
        if r[li] is not None:
            newest[k] = r[li]
    parts = []
    for layout in sorted(set(newest.values())):
        keys = sorted(k for k, lid in newest.items() if lid == layout)
        pos = {k: i for i, k in enumerate(keys)}
        sel = [
            (pos[k], r[li], r[bi]) for k, r in zip(key.tolist(), rows, strict=True) if k in pos and r[li] is not None
        ]
        sel.append((0, layout, None))  # ensures the target layout is this part's layout
        acc = histo.accumulate(len(keys), sel, layouts)
        if acc is not None:
            parts.append((np.asarray(keys, dtype=np.int64), acc[0], acc[1]))
    return parts


def dense_hist(
    parts: list[tuple[np.ndarray, tuple[float, ...], np.ndarray]], nkeys: int
) -> tuple[tuple[float, ...], np.ndarray] | None:
    """All parts on the newest part's layout (see :mod:`db.histo` for the merge rule)."""
    if not parts:
        return None
    bounds = parts[-1][1]
    counts = np.zeros((nkeys, len(bounds)), dtype=np.int64)
    for keys, b, c in parts:
        if b != bounds:
            table = histo.remap_index(b, bounds)
            mapped = np.zeros((len(keys), len(bounds)), dtype=np.int64)
            for j, t in enumerate(table.tolist()):
                mapped[:, t] += c[:, j]
            c = mapped
        counts[keys] += c
    return bounds, counts
