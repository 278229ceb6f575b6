"""Operating point: where the deployment runs on its concurrency/throughput/latency curve."""

from __future__ import annotations

import streamlit as st

from app.operating_point import (
    NO_ROOFLINE,
    REFERENCE_LEVELS,
    concurrency_reach,
    find_knee,
    per_request_text,
    request_speeds,
    roofline,
    sweeps_of,
)
from app.ui import chart_cache, charts, page, time_range
from app.ui.guard import guard
from core.durations import format_duration
from core.settings import NO_CEILING
from core.text import markdown

ctx = page.context()
view, rules = ctx.view, ctx.sweetspot
st.header(f"Operating point · {markdown(view.target)}")

span = view.span(time_range.now())
# 1-minute points as the issue asks; longer ranges coarsen so a scatter stays under ~5,000 dots.
step = max(60.0, time_range.nice_step(span.end - span.start, max_points=5000))
end = span.end - span.end % step  # complete steps only, as the charts (app/ui/time_range.py:resolve)
points = ctx.series(span.start, end, step, fields=("running_avg", "tokens_per_s", "ttft_p95_s", "itl_p95_s"))
sweeps, others = sweeps_of(ctx.target_info(), guard("the load sweeps", ctx.reader.sweep_runs, 20))
sweeps = sweeps[:5]

latest = sweeps[0] if sweeps else None
levels = [(lv.concurrency, lv.tokens_per_s, lv.ttft_p95_s) for lv in latest.levels] if latest else REFERENCE_LEVELS
knee = find_knee(levels, rules.ttft_p95_slo_s)
source = f"the latest load sweep ({charts.sweep_source(latest)})" if latest else "the reference report (8× V100, 70B AWQ, TP 8)"
marks = [(float(rules.concurrency), f"sweet spot {rules.concurrency} (configured)")]
if knee and knee.concurrency != rules.concurrency:
    marks.append((float(knee.concurrency), f"knee {knee.concurrency}"))

# The range's figures: the ceiling's inputs and the mean context of the requests that finished in it.
figures = ctx.range_window(span)
model = figures.ceiling.model() if figures.ceiling else None
roof = roofline(model, figures.mean_context_tokens, points, concurrency_reach(points, levels, marks))
if knee:
    st.markdown(f"**Knee at concurrency {knee.concurrency}** from {source}: " + "; ".join(knee.reasons) + ".")
st.caption(
    f"Dots: one per {format_duration(step)} over the chosen range (running = average), coloured by time. "
    "Grey dashes: the report's reference curve."
    + (f" Diamonds: stored load sweeps of {view.target}'s server." if sweeps else "")
    + (f" {len(others)} sweep(s) of other servers not shown: " + "; ".join(sorted({charts.sweep_source(r) for r in others})) + "." if others else "")
)
if roof:
    st.markdown(f"**Roofline**: {roof.text()}")
    st.caption(roof.caption())
else:
    partial = figures.ceiling is None and figures.ceiling_missing != NO_CEILING  # say what is missing, not all
    st.info(f"No roofline: {figures.ceiling_missing.removeprefix('unknown: ')}." if partial else NO_ROOFLINE,
            icon=":material/info:")
curve = roof.curve if roof else []
left, right = st.columns(2)
for where, attr, label, reference, slo, bound in (
    (left, "tokens_per_s", "output tok/s", charts.REFERENCE_TOKENS, None, curve),
    (right, "ttft_p95_s", "TTFT P95 (s)", charts.REFERENCE_TTFT_P95, rules.ttft_p95_slo_s, []),
):
    title = f"Concurrency vs {label}"
    chart_cache.show_chart(charts.operating_point_chart, points, attr, label, reference, sweeps, marks, title, slo, bound,
                     height=480, where=where)  # fmt: skip
speeds, single = request_speeds(points), roof.single_request_tokens_per_s if roof else None
st.markdown(f"**Decode speed per request**: {per_request_text(speeds, single)}")
chart_cache.show_chart(charts.per_request_chart, speeds, single, "Concurrency vs decode tok/s per request", height=420)
if not points:
    st.info("No measured steps in this range yet: only the reference curve is shown.", icon=":material/info:")
