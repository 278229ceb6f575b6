"""The bandwidth ceiling (DOMAIN.md §1) and where its bandwidth figure came from.

ceiling_tok_s = bandwidth_gbps ÷ (weight_gb ÷ tensor_parallel): every decode step reads each GPU's
share of the weights once. Bandwidth per GPU: the configured value ("config"), else the lowest NVML
peak stored for the target's GPUs ("nvml-formula": bus width × max memory clock × 2 ÷ 8, wrong for
some memory types, hence the config override), else 900 GB/s ("default (V100 reference)").
Reference: 40 GB, TP 8, 900 GB/s → 180 tok/s.
"""

from __future__ import annotations

from sqlalchemy import Connection, func, select

from db import schema
from db.results import CeilingInfo

DEFAULT_BANDWIDTH_GBPS = 900.0
DEFAULT_SOURCE = "default (V100 reference)"


def compute_ceiling(
    weight_gb: float, tensor_parallel: int, bandwidth_gbps: float | None = None, nvml_peak_gbps: float | None = None
) -> CeilingInfo:
    """The ceiling in output tokens/s with its inputs; config bandwidth wins over NVML, NVML over 900."""
    if bandwidth_gbps is not None:
        bw, source = bandwidth_gbps, "config"
    elif nvml_peak_gbps is not None:
        bw, source = nvml_peak_gbps, "nvml-formula"
    else:
        bw, source = DEFAULT_BANDWIDTH_GBPS, DEFAULT_SOURCE
    per_gpu_gb = weight_gb / max(tensor_parallel, 1)
    return CeilingInfo(
        tokens_per_s=bw / per_gpu_gb,
        weight_gb=weight_gb,
        tensor_parallel=tensor_parallel,
        bandwidth_gbps=bw,
        bandwidth_source=source,
    )


def target_ceiling(conn: Connection, target_id: int) -> CeilingInfo | None:
    """The stored target's ceiling; None when its ceiling inputs were never registered."""
    t = schema.targets
    row = conn.execute(
        select(t.c.weight_gb, t.c.tensor_parallel, t.c.bandwidth_gbps).where(t.c.id == target_id)
    ).first()
    if row is None or row.weight_gb is None or not row.tensor_parallel:
        return None
    g = schema.gpus
    # Only NVML's own figure counts here: a peak a GPU row carries from configuration is the
    # configured value, which the row above already holds.
    # The slowest GPU bounds a tensor-parallel step, hence the minimum.
    peak = conn.execute(
        select(func.min(g.c.peak_bw_gbps)).where(
            g.c.target_id == target_id, g.c.peak_bw_gbps.is_not(None), g.c.peak_bw_source == "nvml-formula"
        )
    ).scalar()
    return compute_ceiling(row.weight_gb, row.tensor_parallel, row.bandwidth_gbps, peak)
