"""Overview: is the target in its sweet spot, and if not, which figure broke and since when."""

from __future__ import annotations

import streamlit as st

from app.epochs import comparisons
from app.formatting import clock
from app.headroom import line as headroom_line
from app.ui import alert_views, chart_cache, charts, fill_notice, page, time_range, widgets
from app.ui.guard import guard
from app.verdict import broken_since, evaluate, last_up, slo_note
from core.text import markdown

QUEUE = ("queue_depth_max",)
# Quantiles and request counts over 5 s hold one or two requests: noise. These steps are at least a minute.
TTFT = charts.overview_fields(coarse=True)
# The other panels' lines (charts.PANELS), each step's scrape success (the no-data banner) and two figures the CSV keeps.
OTHERS = (*charts.overview_fields(coarse=False), "preemptions", "running_max", "up_ratio")

ctx = page.context()
view, sweetspot = ctx.view, ctx.sweetspot
st.header(f"Overview · {markdown(view.target)}" + (f" · {markdown(view.model)}" if view.model else ""))


@st.fragment(run_every=ctx.settings.ui.refresh_s if view.live else None)
def live() -> None:
    span, now = view.span(time_range.now()), time_range.now()
    figures = ctx.verdict_window(span)
    # The queue-growth rule needs the last minutes step by step, not one window figure.
    recent = ctx.series(span.at - sweetspot.queue_growth_s - 30, span.at, 30.0, fields=QUEUE)
    step = max(span.step_s, time_range.nice_step(span.end - span.start, time_range.OVERVIEW_POINTS))
    points, frame = ctx.series_drawn(span, OTHERS, minimum=step)
    ttft, ttft_frame = ctx.series_drawn(span, TTFT, minimum=max(step, 60.0))
    spot = ctx.sweet_spot(now)  # its own sweet spot and curve, with their sources (app/sweet_spot.py)
    thresholds = spot.thresholds(sweetspot)
    verdict = evaluate(figures, sweetspot, recent, ctx.alert_rules, spot)
    history = ctx.verdicts(span)  # the minutes as the alert evaluator judged them: since when each clause holds
    since = {c.name: broken_since(c.name, history, view.window_s) for c in verdict.clauses}
    if view.live:  # the live banner's "since" comes from the evaluator's stored states, as on the Alerts page
        since.update(guard("the alerts", alert_views.banner_since, ctx.reader, view.target))
    # The first step of the range is the earliest the series can see: a spell starting there is older.
    first = points[0].ts if points else span.start
    over = time_range.over_text(span, view.window_s)
    widgets.show_banner(verdict, {**since, "no_data": last_up(points)}, now, first, over, widgets.load_note(figures, thresholds))
    if figures.step_bound_breach:  # the measured step rate is above the ceiling's bound: its inputs are wrong
        widgets.show_breach(figures.step_bound_breach)
    info = ctx.target_info()
    tiles = widgets.kpi_tiles(figures, thresholds, spot, info.gateway_source if info else None)
    widgets.show_tiles(widgets.marked_stale(tiles, figures, last_up(points)))  # a down target's figures: as of then
    if warning := slo_note(figures, verdict):  # the P95 and the SLO share a bucket: in the verdict's own words
        st.caption(warning)
    st.caption(widgets.history_text(history, span.start, span.end))
    # the trend of the peak hour against the sweet spot, from whole days (app/headroom.py)
    filling = fill_notice.filling_days(ctx.reader, str(view.target))  # no trend judged on a part of the week
    headroom = (f"waits for the week's history ({filling[0]} of {filling[1]} days written)" if filling
                else headroom_line(ctx.reader, ctx.settings, str(view.target), now))
    st.caption(f"Headroom: {markdown(headroom, 1000)}")
    if engine := widgets.engine_note(figures):  # waiting by reason, speculative decoding, LoRA, sleep
        st.caption(engine)
    st.caption(
        f"Tiles (hover one for what it measures) and verdict: {over.removeprefix('over ')}"
        f"{f' up to {clock(span.at)}' if span.live else ''}. Charts: {clock(span.start)} → {clock(span.end)}, "
        f"{widgets.step_text(points, frame, step, OTHERS)} (TTFT and finished requests: {widgets.step_text(ttft, ttft_frame, max(step, 60.0), TTFT)}). "
        "Drag to pan, scroll to zoom, double-click to reset."
    )
    epochs = guard("the configuration epochs", ctx.reader.epochs, view.target)
    chart_cache.show_chart(charts.overview_chart, points, frame, ttft, ttft_frame, thresholds, figures.ceiling,
                     figures.mbu_source or "", spot.source or "", epochs, info.prefix_caching if info else None,
                     height="content")
    widgets.chart_downloads(points, ttft, OTHERS, TTFT)
    shown = [c for c in guard("the epochs' figures", comparisons, ctx.reader, view.target, epochs, 3600.0, now)
             if span.start <= c.epoch.ts <= span.end]  # fmt: skip
    if shown:  # what each dotted line changed, and the figures an hour before against an hour after
        st.markdown("**Configuration changes and restarts** (dotted lines; an hour at most each side):\n"
                    + "\n".join(f"- {clock(c.epoch.ts)}: {markdown(c.text(), limit=1000)}" for c in shown))

live()
