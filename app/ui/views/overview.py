"""Overview: is the target in its sweet spot, and since when did which figure break."""

from __future__ import annotations

import streamlit as st

from app.durations import format_duration
from app.formatting import clock
from app.ui import charts, state, widgets
from app.verdict import evaluate

ctx = state.context()
view, rules = ctx.view, ctx.settings.sweetspot
st.header(f"Overview · {view.target}" + (f" · {view.model}" if view.model else ""))


@st.fragment(run_every=ctx.settings.ui.refresh_s if view.live else None)
def live() -> None:
    span = view.span(state.now())
    figures = state.guard(
        "the window figures", ctx.reader.window, view.target, span.at, view.window_s, model=view.model
    )
    # The queue-growth rule needs the last minutes step by step, not one window figure.
    recent_start = span.at - rules.queue_growth_s - 30
    recent = state.guard("recent steps", ctx.reader.series, view.target, recent_start, span.at, 30.0, model=view.model)
    verdict = evaluate(figures, rules, recent)
    widgets.show_banner(verdict)
    widgets.show_tiles(widgets.kpi_tiles(figures, rules))
    points = state.guard(
        "the series", ctx.reader.series, view.target, span.start, span.end, span.step_s, model=view.model
    )
    frame = charts.Frame(span.start, span.end, span.step_s)
    st.caption(
        f"Tiles and verdict: the {format_duration(view.window_s)} up to {clock(span.at)}. Charts: "
        f"{clock(span.start)} → {clock(span.end)}, one point per {format_duration(span.step_s)}."
    )
    for chart in (
        charts.ttft_chart(points, frame, rules.ttft_p95_slo_s),
        charts.throughput_chart(points, frame, figures.ceiling),
        charts.preemption_chart(points, frame),
        charts.concurrency_chart(points, frame, rules.concurrency),
        charts.kv_chart(points, frame, rules.kv_warning, rules.kv_critical),
    ):
        st.altair_chart(chart, width="stretch")


live()
