"""The GPUs' figures over a window or per step, read once for one target or many (the query facade's
GPU part, db/queries.py, and the Fleet's, db/fleet.py, both read through here). Values are None
where there is no data (docs/storage.md)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sqlalchemy import Connection

from db import aggregate, schema, sources
from db.pipeline import plan, step_of
from db.results import GpuFigures


def as_figure(x: Any) -> float | None:
    """A stored or reduced value as a figure: None for NULL and NaN (no data)."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def gpu_grid(conn: Connection, gpus: list[Any], lo: int, hi: int, step: int, level: int) -> tuple[Any, int]:
    ids = [int(g.id) for g in gpus]
    rows = [r for lv, a, b in plan(lo, hi, level, sources.marks(conn)) for r in sources.fetch_gpus(conn, lv, ids, a, b)]
    groups = max(1, -(-(hi - lo) // step))
    pos = {gid: i for i, gid in enumerate(ids)}
    key = step_of(rows, lo, step) * len(ids) + np.fromiter((pos[r[1]] for r in rows), dtype=np.int64, count=len(rows))
    spec = {"avg": [f"{f}_sum" for f in schema.GPU_FIELDS], "max": ["temperature_c_max"]}
    return aggregate.reduce_rows(rows, sources.GPU_COLS, key, groups * len(ids), spec, {}), groups


def bw_gbps(pct: float | None, peak: float | None) -> float | None:
    return None if pct is None or peak is None else pct / 100.0 * peak


def gpu_figures_of(conn: Connection, gpus: list[Any], lo: int, hi: int, level: int) -> dict[int, tuple[GpuFigures, ...]]:
    """The window's figures of ``gpus`` (rows of ``gpus``, of one target or many: one read), by target id."""
    if not gpus:
        return {}
    red, _ = gpu_grid(conn, gpus, lo, hi, hi - lo, level)
    out: dict[int, list[GpuFigures]] = {}
    for i, g in enumerate(gpus):
        if red.n[i] == 0:
            continue
        avg = {f: as_figure(red.avgs[f"{f}_avg"][i]) for f in schema.GPU_FIELDS}
        out.setdefault(g.target_id, []).append(
            GpuFigures(
                uuid=g.uuid,
                index=g.gpu_index,
                name=g.name,
                host=g.host,
                memory_used_bytes=avg["memory_used_bytes"],
                memory_total_bytes=avg["memory_total_bytes"],
                memory_busy_pct_avg=avg["memory_busy_pct"],
                dram_bw_util_pct_avg=avg["dram_bw_util_pct"],
                dram_bw_gbps_avg=bw_gbps(avg["dram_bw_util_pct"], g.peak_bw_gbps),
                dram_bw_source=g.dram_bw_source,
                peak_bw_gbps=g.peak_bw_gbps,
                peak_bw_source=g.peak_bw_source,
                power_w_avg=avg["power_w"],
                temperature_c_max=as_figure(red.maxes["temperature_c_max"][i]),
            )
        )
    return {tid: tuple(figs) for tid, figs in out.items()}
