"""Fleet: every target at once, worst first; a row opens that target's Overview (docs/fleet.md)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from app.fleet import STATE_LABELS, FleetRow, by_model, overview_link
from app.formatting import clock, counted, number, percent, with_unit
from app.ui import page, time_range, widgets
from core.text import markdown

# Words, not emoji: Debian's Chromium has no emoji font and drew the circles as boxes.
ctx = page.context()
window_s = ctx.view.window_s
st.header(f"Fleet · {counted(len(ctx.targets), 'target')}")


def _table(rows: list[FleetRow]) -> dict[str, list[Any]]:
    """The judgement, one row a target: what an operator scans first. Narrow enough for a 1280-px page:
    the reasons are listed under it and the bandwidth figures have a table of their own (issue 30: the
    one wide table hid its columns after "% of step bound" and clipped the reasons)."""
    f = [r.figures for r in rows]
    return {
        "state": [STATE_LABELS[r.state.state] for r in rows],
        "target": [r.name for r in rows],
        "overview": [overview_link(r.name, len(ctx.targets)) for r in rows],
        # spelled here, as every other page spells them: a missing figure reads "—", never "None"
        "running": [number(x.running_avg) for x in f],
        "sweet spot": [r.spot.text if r.spot else "unknown" for r in rows],
        "headroom": [r.headroom.cell() if r.headroom else "—" for r in rows],
        # the figure the verdict judged: as clients see it behind a gateway (the engine's where none)
        "TTFT P95 (clients)": [with_unit(x.client_ttft_p95_s, "s") for x in f],
        "tok/s": [number(x.tokens_per_s) for x in f],
        "last hour tok/s": [widgets.sparkline_svg(r.sparkline) for r in rows],  # a missing minute is a gap
    }


def _figures(rows: list[FleetRow]) -> dict[str, list[Any]]:
    """Bandwidth, cache and queues, one row a target, in the judgement table's order."""
    f = [r.figures for r in rows]
    return {
        "target": [r.name for r in rows],
        "MBU": [percent(x.mbu) for x in f],
        "DRAM": [percent(x.dram_bw_util) for x in f],
        "% of step bound": [percent(x.ceiling_share) for x in f],
        "preemptions": [number(x.preemptions) for x in f],
        "queue": [number(x.queue_depth_max) for x in f],
        "KV": [percent(x.kv_cache_usage_max) for x in f],
    }


def _reasons(rows: list[FleetRow]) -> list[str]:
    """A Markdown line per target with reasons (why it is outside, down or stale), the text escaped."""
    return [f"- **{markdown(r.name)}** ({STATE_LABELS[r.state.state]}): {markdown('; '.join(r.state.reasons), 600)}"
            for r in rows if r.state.reasons]


@st.fragment(run_every=ctx.settings.ui.refresh_s if ctx.view.live else None)
def live() -> None:
    now = time_range.now()
    rows = ctx.fleet(now)
    st.caption(f"Over the {window_s / 60:g} min up to {clock(now)}, worst first. Running: average against each "
               "target's own sweet spot (configured, its sweep, learned from its traffic, or unknown). "
               "A row's Overview link opens that target.")  # fmt: skip
    col = st.column_config
    st.dataframe(_table(rows), hide_index=True, width="stretch", column_config={
        "overview": col.LinkColumn("Overview", display_text="open ↗"),
        "running": col.TextColumn(help="average running requests"),
        "sweet spot": col.TextColumn(help="the target's own sweet-spot concurrency and where it came from"),
        "headroom": col.TextColumn(help="days until, at its growth, the peak-hour demand (running + queued) leaves the "
                                   "sweet spot, with the 80 % range; no trend, past, or how much history is missing "
                                   "(docs/ui.md#headroom)"),
        "last hour tok/s": col.ImageColumn(help="output tok/s per minute over the last hour, from 0; a gap: no data"),
    })  # fmt: skip
    reasons = _reasons(rows)
    if reasons:
        st.markdown("**Why**\n" + "\n".join(reasons))
    st.subheader("Bandwidth, cache and queues")
    st.dataframe(_figures(rows), hide_index=True, width="stretch", column_config={
        "MBU": col.TextColumn(help="model bandwidth utilisation: the model's bytes (vLLM's byte counters, else the step model)"),
        "DRAM": col.TextColumn(help="DRAM bandwidth utilisation the GPUs read (NVML GPM or DCGM): every byte moved, not MBU"),
        "% of step bound": col.TextColumn(help="output tok/s ÷ the most decode steps/s the bandwidth allows "
                                           "(bandwidth per GPU ÷ weights per GPU; the report's % of ceiling on the "
                                           "reference deployment): past 100 % as soon as requests are batched, not "
                                           "an efficiency"),
    })  # fmt: skip
    st.subheader("Per model")
    st.dataframe([{
        "model": m.model, "targets": m.targets, "outside or down": m.outside, "tok/s": number(m.tokens_per_s),
        "lowest MBU": percent(m.mbu_lowest), "worst TTFT P95 (clients)": with_unit(m.ttft_p95_s_worst, "s"),
        "preemptions": number(m.preemptions), "running": number(m.running),
    } for m in by_model(rows)], hide_index=True, width="stretch")  # fmt: skip


live()
