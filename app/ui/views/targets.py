"""Targets: health and configuration of every watched deployment, as stored by the collector."""

from __future__ import annotations

import streamlit as st

from app.fleet import names_form
from app.formatting import series_limit_warning
from app.ui import page, time_range, widgets
from core.text import markdown, markdown_code

ctx = page.context()
st.header("Targets")
now = time_range.now()

for info in ctx.targets:
    with st.container(border=True):
        st.subheader(markdown(info.name))
        st.markdown(widgets.health_text(info, now))
        if info.last_error:
            st.error(f"Last error: {markdown(info.last_error, 500)}", icon=":material/error:")
        if breach := ctx.target_window(info.name, now).step_bound_breach:  # the ceiling's inputs are wrong
            widgets.show_breach(breach)
        if over := series_limit_warning(info.series_dropped, info.series_limit):
            st.warning(over, icon=":material/content_cut:")
        if info.discovered_by:
            form = names_form(info)
            st.caption(f"Discovered through Prometheus {markdown(info.discovered_by)}"
                       + (f" · vLLM names stored there as {markdown_code(form)}" if form else ""))
        left, right = st.columns(2)
        left.markdown(
            f"- metrics endpoint: {markdown_code(info.vllm_url or 'built-in simulator')}\n"
            f"- models: {', '.join(markdown(m) for m in info.models) or '—'}\n"
            f"- gateway queue source: {markdown_code(info.gateway_source)}\n"
            f"- GPU source: {markdown_code(info.gpu_source)} · GPUs seen: {len(info.gpus)}"
        )
        right.markdown(f"{widgets.ceiling_text(info)}\n\n{widgets.engine_text(info)}")
        rows = widgets.metric_rows(info)
        if rows:
            st.table(rows, hide_index=True)
        if info.gpus:
            st.caption("GPU UUIDs: " + ", ".join(markdown(g) for g in info.gpus))
