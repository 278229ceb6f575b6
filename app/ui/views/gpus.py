"""GPUs: memory, bandwidth (true GB/s where measured, else NVML's time-based busy %), power, temperature."""

from __future__ import annotations

import streamlit as st

from app.ui import charts, state, traffic, widgets
from core.durations import format_duration

ctx = state.context()
view = ctx.view
st.header(f"GPUs · {view.target}")


@st.fragment(run_every=ctx.settings.ui.refresh_s if view.live else None)
def live() -> None:
    span = view.span(state.now())
    gpus = state.guard("the GPUs", ctx.reader.latest_gpus, view.target)
    if not gpus:
        st.info(
            "No GPU figures for this target. Set `targets[].gpu.source` to `nvml` (GPUs of the collector's host) "
            "or `dcgm` with `targets[].gpu.url` (a dcgm-exporter).",
            icon=":material/memory:",
        )
        return
    st.table(widgets.gpu_rows(gpus), hide_index=True)
    st.caption(
        "Bandwidth: GB/s where a true figure exists (GPM or DCGM DRAM active × peak); otherwise NVML "
        "memory utilisation, which is the share of TIME the memory was busy, not a share of bandwidth."
    )
    figures = ctx.window(span.at)  # the engine's own estimate of the traffic, beside the measured one
    st.markdown(traffic.traffic_text(figures, gpus))
    st.caption(traffic.ceiling_check_text(figures))
    # GPU figures move slowly and may be read less often than vLLM: minute steps keep the lines whole.
    gpu_step = max(span.step_s, 60.0)
    points = state.guard("the GPU series", ctx.reader.gpu_series, view.target, span.start, span.end, gpu_step)
    frame = charts.Frame(span.start, span.end, gpu_step)
    names = {g.uuid: f"#{g.index}" if g.index is not None else g.uuid[:12] for g in gpus}
    true_bw = any(p.dram_bw_gbps is not None for p in points)
    engine = traffic.engine_points(ctx.series(span.start, span.end, gpu_step, fields=("engine_bw_gbps",)))
    names[traffic.ENGINE_UUID] = traffic.ENGINE_NAME
    step = format_duration(gpu_step)
    panels = [
        ("memory_used_bytes", "Memory used (GB)", "GB", 1e-9),
        ("dram_bw_gbps", "DRAM bandwidth (GB/s)", "GB/s", 1.0)
        if true_bw
        else ("memory_busy_pct", "NVML memory busy (% of time, not bandwidth)", "%", 1.0),
        ("power_w", "Power (W)", "W", 1.0),
        ("temperature_c", "Temperature (°C)", "°C", 1.0),
    ]
    if engine and true_bw:  # the estimate as one more line beside the measured GPUs
        panels[1] = ("dram_bw_gbps", "DRAM GB/s, measured and vLLM's estimate", "GB/s", 1.0)
    elif engine:
        panels.append(("dram_bw_gbps", "Engine-estimated memory traffic (GB/s per GPU)", "GB/s", 1.0))
    left, right = st.columns(2)
    for i, (field, title, unit, scale) in enumerate(panels):
        where = left if i % 2 == 0 else right
        drawn = [*points, *engine] if field == "dram_bw_gbps" else points
        state.show_chart(
            charts.gpu_chart, drawn, frame, field, f"{title}, per {step}", unit, names, scale, where=where
        )


live()
