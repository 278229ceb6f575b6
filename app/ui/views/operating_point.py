"""Operating point: where the deployment runs on its concurrency/throughput/latency curve."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from app.operating_point import (
    NO_ROOFLINE,
    REFERENCE_LEVELS,
    at_mix,
    bench_text,
    concurrency_reach,
    context_per_request,
    per_request_text,
    request_speeds,
    roofline,
    roofline_text,
    served_shape,
    sweeps_of,
    target_roofline,
)
from app.sweet_spot import REFERENCE, OwnCurves, own_curves
from app.traffic_mix import traffic_mix
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
points = ctx.series(span.start, end, step, fields=("running_avg", "tokens_per_s", "ttft_p95_s", "itl_p95_s",
                                                   "decode_tok_s_per_request"))
sweeps, others = sweeps_of(ctx.target_info(), guard("the load sweeps", ctx.reader.sweep_runs, 20))
sweeps, benches = sweeps[:5], guard("the imported benchmarks", ctx.reader.bench_runs, 5, view.target)  # 5: a legend entry each
latest = sweeps[0] if sweeps else None
spot = ctx.sweet_spot(time_range.now())  # its own sweet spot and curve, with their sources (app/sweet_spot.py)
reference = spot.source == REFERENCE  # the demo: the report's knee and curve, labelled as the report's
if latest:
    levels: Sequence[tuple[int, float | None, float | None]] = [(lv.concurrency, lv.tokens_per_s, lv.ttft_p95_s) for lv in latest.levels]
elif reference:
    levels = REFERENCE_LEVELS
else:
    levels = [(lv.concurrency, lv.fitted, lv.ttft_p95_s) for lv in spot.learned.levels] if spot.learned else []
knee = spot.found  # the one knee rule's finding behind the sweet spot (None: configured or unknown)
marks = [(float(spot.value), f"sweet spot {spot.value} ({spot.source})")] if spot.value is not None else []
if knee and knee.knee is not None and knee.knee != spot.value:
    marks.append((float(knee.knee), f"knee {knee.knee}"))
curves: OwnCurves = own_curves(spot, charts.REFERENCE_TOKENS, charts.REFERENCE_TTFT_P95)
# The range's figures: the ceiling's inputs and the mean context of the requests that finished in it.
figures = ctx.range_window(span)
model = figures.ceiling.model() if figures.ceiling else None
info = ctx.target_info()
# both roofs: bandwidth at the range's context, compute at the one prompt:output mix every surface
# reads (the Plan page, `plan`), not the chosen range's
mix = guard("the prompt:output mix", traffic_mix, ctx.reader, view.target, time_range.now())
roofs = at_mix(target_roofline(figures, served_shape(figures, info.models if info else ())), mix.prompt_per_output)
roof = roofline(model, context_per_request(figures), points, concurrency_reach(points, levels, marks), roofs)
compute_roof = roofs.compute_tok_s if roofs else None
st.markdown(f"**Sweet spot**: {spot.line()}")
if knee:
    head = f"Knee at concurrency {knee.knee}" if knee.knee is not None else "No knee measured yet"
    st.markdown(f"**{head}** ({spot.source}: {markdown(spot.detail, limit=300)}): " + markdown(knee.reason, limit=2000))
st.caption(
    f"Dots: one per {format_duration(step)} over the chosen range (running = average), coloured by time. "
    f"Grey dashes: {curves.caption}."
    + (f" Diamonds: stored load sweeps of {view.target}'s server." if sweeps else "")
    + (" Squares: imported benchmarks (bench import): " + markdown(bench_text(benches), limit=2000) if benches else "")
    + (f" {len(others)} sweep(s) of other servers not shown: " + "; ".join(sorted({charts.sweep_source(r) for r in others})) + "." if others else "")
)
if roof:
    st.markdown(f"**Roofline**: {roof.text()}")
    st.markdown(f"**Both roofs**: {markdown(roofline_text(roofs, figures, mix.source), 2000)}.")  # a sentence, not a name: whole
    st.caption(roof.caption())
else:
    partial = figures.ceiling is None and figures.ceiling_missing != NO_CEILING  # say what is missing, not all
    st.info(f"No roofline: {figures.ceiling_missing.removeprefix('unknown: ')}." if partial else NO_ROOFLINE,
            icon=":material/info:")
curve = roof.curve if roof else []
left, right = st.columns(2)
for where, attr, label, drawn, slo, bound in (
    (left, "tokens_per_s", "output tok/s", curves.tokens, None, curve),
    (right, "ttft_p95_s", "TTFT P95 (s)", curves.ttft, rules.ttft_p95_slo_s, []),
):
    title = f"Concurrency vs {label}"
    chart_cache.show_chart(charts.operating_point_chart, points, attr, label, drawn, sweeps, marks, title, slo, bound,
                     curves.label, benches, compute_roof if bound else None, height=480, where=where)  # fmt: skip
speeds, single = request_speeds(points), roof.single_request_tokens_per_s if roof else None
st.markdown(f"**Decode speed per request**: {per_request_text(speeds, single)}")
chart_cache.show_chart(charts.per_request_chart, speeds, single, "Concurrency vs decode tok/s per request", height=420)
if not points:
    st.info("No measured steps in this range yet.", icon=":material/info:")
