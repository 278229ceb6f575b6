"""The GPU page's memory-traffic comparison: the engine's own estimate beside the measured bandwidth
and the peak, and what it says about the ceiling's assumption. Pure functions (tested without Streamlit).

vLLM 0.33 with ``--enable-mfu-metrics`` estimates the bytes each GPU reads and writes; (rate(read) +
rate(write)) ÷ 1e9 is GB/s per GPU. The ceiling (DOMAIN.md §1) assumes a decode step reads each GPU's
share of the weights once: at ``t`` tok/s and batch ``b`` that is weights ÷ TP × t ÷ b bytes a second,
plus the KV the attention reads. The engine's bytes per output token per GPU, set beside the weights'
share, tells whether the traffic the ceiling is about is the traffic the engine does.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.formatting import MISSING, bound_name, number, with_unit
from app.ui.charts import ENGINE_UUID
from db.results import GpuFigures, GpuPoint, SeriesPoint, WindowFigures

MFU_HINT = "start vLLM ≥ 0.33 with --enable-mfu-metrics to compare"


def measured_gbps(gpus: Sequence[GpuFigures]) -> float | None:
    """The average measured GB/s per GPU (GPM or DCGM × peak); None when no GPU has a true figure."""
    values = [g.dram_bw_gbps_avg for g in gpus if g.dram_bw_gbps_avg is not None]
    return sum(values) / len(values) if values else None


def peak_gbps(gpus: Sequence[GpuFigures]) -> float | None:
    peaks = [g.peak_bw_gbps for g in gpus if g.peak_bw_gbps is not None]
    return min(peaks) if peaks else None


def traffic_text(f: WindowFigures, gpus: Sequence[GpuFigures]) -> str:
    """One line: engine estimate · measured · peak, GB/s per GPU, each with where it came from."""
    measured, peak = measured_gbps(gpus), peak_gbps(gpus)
    source = next((g.dram_bw_source for g in gpus if g.dram_bw_gbps_avg is not None), None)
    engine = with_unit(f.engine_bw_gbps, "GB/s") if f.engine_bw_gbps is not None else f"{MISSING} ({MFU_HINT})"
    parts = [
        f"**Memory traffic per GPU** over the last {number(f.window_s / 60)} min: engine-side {engine} (vLLM's estimate)",
        f"measured {with_unit(measured, 'GB/s')}" + (f" ({source}, average of {len(gpus)} GPUs)" if source else
                                                    " (no true bandwidth figure: NVML busy % is time, not bytes)"),
        f"peak {with_unit(peak, 'GB/s')}",
    ]
    if f.engine_bw_gbps is not None and measured:
        parts.append(f"the engine's estimate is {number(100 * f.engine_bw_gbps / measured)} % of the measured traffic")
    return " · ".join(parts)


def ceiling_check_text(f: WindowFigures) -> str:
    """The ceiling's provenance with the engine's own traffic: does "weights once per step" hold?"""
    c = f.ceiling
    if c is None:
        return f"No ceiling: {f.ceiling_missing}."
    share = c.weight_gb / max(c.tensor_parallel, 1)
    head = (f"{bound_name(c).capitalize()}, at most {number(c.steps_per_s)} decode steps/s = {number(c.bandwidth_gbps)} GB/s per GPU ({c.bandwidth_source}) "
            f"÷ {number(share)} GB of weights per GPU: it assumes each decode step reads that share once.")
    if f.engine_bw_gbps is None:
        return f"{head} Engine-side traffic: {MISSING} ({MFU_HINT})."
    text = (f"{head} The engine estimates {with_unit(f.engine_bw_gbps, 'GB/s')} per GPU, "
            f"{number(100 * f.engine_bw_gbps / c.bandwidth_gbps)} % of that bandwidth")
    if f.tokens_per_s:
        per_token = f.engine_bw_gbps / f.tokens_per_s
        text += (f", {number(per_token)} GB per output token per GPU against the weights' {number(share)} GB "
                 "(less: batching shares a step's read among its tokens; more: KV reads weigh in)")
    return text + "."


def engine_points(series: Sequence[SeriesPoint]) -> list[GpuPoint]:
    """The engine's GB/s per GPU as one more line of the bandwidth chart (named ENGINE_NAME)."""
    return [
        GpuPoint(p.ts, ENGINE_UUID, None, None, None, None, p.engine_bw_gbps, None, None)
        for p in series
        if p.engine_bw_gbps is not None
    ]
