"""GPUs: memory, bandwidth (true GB/s where measured, else NVML's time-based busy %), power, temperature."""

from __future__ import annotations

import streamlit as st

from app.formatting import GIB
from app.ui import chart_cache, charts, page, time_range, traffic, url_params, widgets
from app.ui.guard import guard
from core.durations import format_duration
from core.text import markdown

ctx = page.context()
view = ctx.view
st.header(f"GPUs · {markdown(view.target)}")
TABLE_WINDOW_S = 60.0
# the gpu the URL asked for, read before the radio button resets a value it cannot show: the
# notice then stays through the fragment's refreshes, as the sidebar's notices do
WANTED_GPU = st.query_params.get("gpu")
LINE_NAMES = {"memory_used_bytes": "total memory"}  # the grey line of each panel: a peak, or for memory its total


@st.fragment(run_every=ctx.settings.ui.refresh_s if view.live else None)
def live() -> None:
    span = view.span(time_range.now())
    gpus = guard("the GPUs", ctx.reader.latest_gpus, view.target, TABLE_WINDOW_S)
    if not gpus:
        st.info(
            "No GPU figures for this target. Set `targets[].gpu.source` to `nvml` (GPUs of the collector's host) "
            "or `dcgm` with `targets[].gpu.url` (a dcgm-exporter).",
            icon=":material/memory:",
        )
        return
    st.table(widgets.gpu_rows(gpus), hide_index=True)
    st.caption(
        f"Table: averages over the {format_duration(TABLE_WINDOW_S)} up to the target's latest GPU reading "
        f"{'' if view.live else '(the latest, whatever the range: the charts cover the range) '}"
        "(temperature: the maximum). Memory in GiB (2³⁰ bytes, as nvidia-smi: a \"32 GB\" card holds 32 GiB); "
        "bandwidth in GB/s (10⁹ bytes a second, as NVIDIA's datasheets). Bandwidth: GB/s where a true figure "
        "exists (GPM or DCGM DRAM active × peak); otherwise NVML memory utilisation, which is the share of TIME "
        "the memory was busy, not a share of bandwidth."
    )
    figures = ctx.window(span.at)  # the engine's own estimate of the traffic, beside the measured one
    st.markdown(traffic.traffic_text(figures, gpus))
    st.caption(traffic.ceiling_check_text(figures))
    names = {g.uuid: f"#{g.index}" if g.index is not None else g.uuid[:12] for g in gpus}
    if WANTED_GPU is not None and (notice := url_params.choice_notice("gpu", WANTED_GPU, [charts.ALL_GPUS, *names.values()])):
        st.warning(notice, icon=":material/link_off:")
    label = st.radio("GPU", [charts.ALL_GPUS, *names.values()], horizontal=True, key="gpu", bind="query-params")
    pick = next((u for u, n in names.items() if n == label), None)
    # GPU figures move slowly and may be read less often than vLLM: minute steps keep the lines whole.
    gpu_step = max(span.step_s, 60.0)
    points = guard("the GPU series", ctx.reader.gpu_series, view.target, span.start, span.end, gpu_step)
    frame = charts.Frame(span.start, span.end, gpu_step)
    true_bw = any(p.dram_bw_gbps is not None for p in points)
    peak_bw = max((g.peak_bw_gbps for g in gpus if g.peak_bw_gbps), default=None)
    memory_total = max((g.memory_total_bytes for g in gpus if g.memory_total_bytes), default=None)
    engine = traffic.engine_points(ctx.series(span.start, span.end, gpu_step, fields=("engine_bw_gbps",)))
    names[charts.ENGINE_UUID] = charts.ENGINE_NAME
    step = format_duration(gpu_step)
    panels = [
        ("memory_used_bytes", "Memory used (GiB; grey: total memory)", "GiB", 1 / GIB, memory_total and memory_total / GIB),
        ("dram_bw_gbps", "DRAM bandwidth (GB/s; grey: peak)", "GB/s", 1.0, peak_bw)
        if true_bw
        else ("memory_busy_pct", "NVML memory busy (% of time, not bandwidth)", "%", 1.0, 100.0),
        ("power_w", "Power (W)", "W", 1.0, None),
        ("temperature_c", "Temperature (°C)", "°C", 1.0, None),
    ]
    if engine and true_bw:  # the estimate as one more line beside the measured GPUs
        panels[1] = ("dram_bw_gbps", "DRAM GB/s: measured and vLLM's estimate", "GB/s", 1.0, peak_bw)
    elif engine:
        panels.append(("dram_bw_gbps", "Engine-estimated memory traffic (GB/s per GPU)", "GB/s", 1.0, peak_bw))
    left, right = st.columns(2)
    epochs = guard("the configuration epochs", ctx.reader.epochs, view.target)  # marked on each chart
    for i, (field, title, unit, scale, peak) in enumerate(panels):
        drawn = [*points, *engine] if field == "dram_bw_gbps" else points
        chart_cache.show_chart(
            charts.gpu_chart, drawn, frame, field, f"{title}, per {step}", unit, names, scale, pick, peak,
            LINE_NAMES.get(field, "peak"), epochs, where=left if i % 2 == 0 else right,
        )  # fmt: skip


live()
