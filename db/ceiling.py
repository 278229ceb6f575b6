"""The report's ceiling of a stored target and where its inputs came from (docs/ceiling.md).

The ceiling bounds decode STEPS per second: bandwidth per GPU ÷ (weight_gb ÷ tensor_parallel)
(core/mbu.py). Only a target configured with weight_gb and tensor_parallel has one: nothing is
borrowed from the reference deployment. Bandwidth per GPU: the configured value ("config"), else the
lowest NVML peak stored for the target's GPUs ("nvml-formula": bus width × max memory clock × 2 ÷ 8,
wrong for some memory types, hence the config override), else none (no ceiling). KV bytes per token:
vLLM's ``cache_config_info`` (kv_cache_memory_bytes ÷ its blocks' tokens × TP), else the configured value.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sqlalchemy import Connection, func, select

from core.bandwidth import peak_bandwidth
from core.mbu import kv_bytes_per_token
from core.settings import ceiling_missing
from db import schema
from db.results import CeilingInfo


def compute_ceiling(
    weight_gb: float | None, tensor_parallel: int | None, bandwidth_gbps: float | None = None,
    nvml_peak_gbps: float | None = None, kv: tuple[float | None, str | None] = (None, None),
    compute: tuple[float | None, float | None, str | None] = (None, None, None), shape_source: str | None = None,
) -> CeilingInfo | None:  # fmt: skip
    """The ceiling in decode steps/s with its inputs; config bandwidth wins over NVML; None without
    weights, TP or any bandwidth. ``kv``: (KV bytes per token, its source); ``compute``: the compute
    roof's configured (active parameters in billions, peak TFLOP/s, precision)."""
    if weight_gb is None or not tensor_parallel or weight_gb <= 0:
        return None
    peak = peak_bandwidth(bandwidth_gbps, [nvml_peak_gbps])  # the one rule (core/bandwidth.py)
    if peak is None:
        return None
    bw, source = peak.gbps, peak.source
    per_gpu_gb = weight_gb / max(tensor_parallel, 1)
    return CeilingInfo(
        steps_per_s=bw / per_gpu_gb,
        weight_gb=weight_gb,
        tensor_parallel=tensor_parallel,
        bandwidth_gbps=bw,
        bandwidth_source=source,
        kv_bytes_per_token=kv[0],
        kv_source=kv[1],
        active_params_b=compute[0],
        peak_tflops=compute[1],
        compute_precision=compute[2],
        shape_source=shape_source,
    )


def _kv(cache_config: str | None, configured: float | None, tensor_parallel: int | None) -> tuple[float | None, str | None]:
    """KV bytes per token: the engine's cache_config_info labels first, else the configured value."""
    try:
        labels = json.loads(cache_config) if cache_config else {}
    except ValueError:
        labels = {}
    if isinstance(labels, dict) and tensor_parallel:
        blocks = _number(labels.get("num_gpu_blocks"))
        tokens = _number(labels.get("kv_cache_size_tokens"))
        found = kv_bytes_per_token(_number(labels.get("kv_cache_memory_bytes")),
                                   blocks if tokens is None else tokens,
                                   _number(labels.get("block_size")) if tokens is None else 1.0, tensor_parallel)  # fmt: skip
        if found is not None:
            return found, "cache_config_info"
    return (configured, "config") if configured is not None else (None, None)


def _number(text: object) -> float | None:
    try:
        return float(text) if isinstance(text, (str, int, float)) else None
    except ValueError:
        return None


def ceilings(conn: Connection, target_ids: Sequence[int] | None = None) -> dict[int, CeilingInfo | None]:
    """The stored targets' ceilings (``target_ids`` None: every target); None where inputs are missing."""
    t, g = schema.targets, schema.gpus
    # Only NVML's own figure counts here: a peak a GPU row carries from configuration is the
    # configured value, which the target row already holds. The slowest GPU bounds a
    # tensor-parallel step, hence the minimum.
    peaks_stmt = (select(g.c.target_id, func.min(g.c.peak_bw_gbps))
                  .where(g.c.peak_bw_gbps.is_not(None), g.c.peak_bw_source == "nvml-formula").group_by(g.c.target_id))  # fmt: skip
    rows_stmt = select(t.c.id, t.c.weight_gb, t.c.tensor_parallel, t.c.bandwidth_gbps, t.c.kv_bytes_per_token, t.c.cache_config,
                       t.c.active_params_b, t.c.peak_tflops, t.c.compute_precision, t.c.shape_source)
    if target_ids is not None:
        peaks_stmt = peaks_stmt.where(g.c.target_id.in_(list(target_ids)))
        rows_stmt = rows_stmt.where(t.c.id.in_(list(target_ids)))
    peaks = dict(conn.execute(peaks_stmt).all())
    return {
        row.id: compute_ceiling(row.weight_gb, row.tensor_parallel, row.bandwidth_gbps, peaks.get(row.id),
                                _kv(row.cache_config, row.kv_bytes_per_token, row.tensor_parallel),
                                (row.active_params_b, row.peak_tflops, row.compute_precision), row.shape_source)  # fmt: skip
        for row in conn.execute(rows_stmt)
    }


def ceiling_gaps(conn: Connection, target_ids: Sequence[int] | None = None) -> dict[int, str]:
    """Per stored target without a ceiling, what it lacks and the inputs it has (core.settings.ceiling_missing)."""
    t, found = schema.targets, ceilings(conn, target_ids)
    stmt = select(t.c.id, t.c.weight_gb, t.c.tensor_parallel, t.c.bandwidth_gbps, t.c.gpu_source)
    if target_ids is not None:
        stmt = stmt.where(t.c.id.in_(list(target_ids)))
    return {row.id: ceiling_missing(row.weight_gb, row.tensor_parallel, row.bandwidth_gbps, row.gpu_source)
            for row in conn.execute(stmt) if found.get(row.id) is None}


def configured_bandwidths(conn: Connection, target_ids: Sequence[int] | None = None) -> dict[int, float | None]:
    """Each stored target's configured peak bandwidth (targets[].ceiling.bandwidth_gbps; None: unset): an
    MBU route needs it for the engine's byte counters even where the target has no weights, so no ceiling."""
    t = schema.targets
    stmt = select(t.c.id, t.c.bandwidth_gbps)
    if target_ids is not None:
        stmt = stmt.where(t.c.id.in_(list(target_ids)))
    return {row.id: row.bandwidth_gbps for row in conn.execute(stmt)}


def target_ceiling_missing(conn: Connection, target_id: int) -> str:
    """What the stored target lacks for a ceiling ("" when it has one)."""
    return ceiling_gaps(conn, [target_id]).get(target_id, "")


def target_ceiling(conn: Connection, target_id: int) -> CeilingInfo | None:
    """The stored target's ceiling; None when its inputs were never given (or no bandwidth is known)."""
    return ceilings(conn, [target_id]).get(target_id)
