"""Plan: how many replicas of today's deployment hold a demand inside the sweet spot, and what another GPU
or tensor-parallel size would give (app/plan.py, docs/plan.md "Capacity what-if")."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from app.formatting import number
from app.plan import CANDIDATES, Plan, replicas_text, tok_s_text
from app.ui import page, reads, time_range
from app.ui.guard import guard
from core import roofline as roofs
from core.errors import UsageError
from core.text import markdown

ctx = page.context()
target = ctx.view.target or ""
st.header(f"Plan · {markdown(target)}")
st.caption("Capacity what-if: a step model with both phases (decode: bytes ÷ bandwidth or FLOPs ÷ compute, plus a "
           "fixed overhead; prefill at this target's mix) whose efficiencies are fitted on this target's own levels "
           "(its production minutes, else its latest load sweep, else its imported benchmarks). "
           "`python -m app plan` prints the same.")  # fmt: skip

demand_col, gpu_col, gpus_col, tp_col = st.columns([3, 3, 1, 1])
kind = demand_col.radio("Demand", ("peak hour of the last 7 days", "requests/s", "output tok/s"), horizontal=True)
value = None if kind.startswith("peak") else demand_col.number_input(f"{kind} to hold", min_value=0.0, value=1.0, step=0.5)
names = ["the usual candidates", *(s.name for s in roofs.gpu_specs() if s.memory_gbps)]
gpu = gpu_col.selectbox("Another deployment", names, help=f"the usual candidates: {', '.join(CANDIDATES)}, each at "
                        "the smallest TP that fits")  # fmt: skip
asked = None if gpu == names[0] else gpu
gpus = int(gpus_col.number_input("GPUs", min_value=1, max_value=64, value=1, disabled=asked is None))
tp = int(tp_col.number_input("TP", min_value=1, max_value=64, value=1, disabled=asked is None))

rps = value if kind == "requests/s" else None
tps = value if kind == "output tok/s" else None


def _plan() -> Plan | UsageError:
    try:
        return reads.plan(ctx.settings, target, reads.floor(time_range.now(), 600.0), rps, tps, asked,
                          gpus if asked else None, tp if asked else None)  # fmt: skip
    except UsageError as refused:  # a missing input: the refusal names its fix (any other failure: the guard's line)
        return refused


plan = guard("the plan", _plan)
if isinstance(plan, UsageError):
    st.info(markdown(plan.one_line(), 1000), icon=":material/info:")
    st.stop()
    raise AssertionError("unreachable")

today = plan.today
st.markdown(f"**Demand**: {markdown(plan.demand.text(), 1000)}.")
st.markdown(f"**Sweet spot**: {markdown(plan.sweet_spot, 1000)} · TTFT P95 SLO {number(plan.slo_s)} s"
            + (f", measured {number(plan.ttft_at_knee_s)} s there" if plan.ttft_at_knee_s is not None else "")
            + f" · running limit {markdown(plan.running_limit)}.")  # fmt: skip
left, middle, right = st.columns(3)
left.metric("Replicas of today's deployment", "—" if today.replicas is None else replicas_text(today),
            help="the demand ÷ what one replica holds at its sweet spot, rounded up; the range from its range")  # fmt: skip
middle.metric("tok/s a replica holds", tok_s_text(today.predicted),
              help="its own curve at the sweet spot where measured, else the fitted step model; the range: the fit's")  # fmt: skip
right.metric("Compute roof (prefill counted)", "unknown" if today.compute_tok_s is None else f"{number(today.compute_tok_s)} tok/s",
             help="each output token's decode FLOPs and its share of the prompts' prefill FLOPs, at peak")  # fmt: skip
st.markdown(f"**Roofs**: {markdown(plan.roofs_text, 2000)}.")
st.markdown(f"**Another deployment**: {markdown(plan.answer(), 2000)}.")
st.caption(markdown(plan.uncertainty(), 2000))

rows = [{"deployment": o.label, "steps/s bound": number(o.steps_bound_per_s),
         "compute roof tok/s": "unknown" if o.compute_tok_s is None else number(o.compute_tok_s),
         "knee (running)": number(o.knee), "tok/s at knee": tok_s_text(o.predicted),
         "replicas": o.memory_note if o.replicas is None else replicas_text(o), "efficiencies from": o.evidence}
        for o in (today, *plan.others)]  # fmt: skip
st.table(pd.DataFrame(rows).set_index("deployment"))
for o in plan.others:
    st.caption(markdown(f"{o.label}: knee = {o.knee_note}; assumes {o.assumes}", 2000))

curve = pd.DataFrame([{"running": c, "predicted": p.tokens_per_s, "low": p.low, "high": p.high} for c, p in plan.curve])
base = alt.Chart(curve).encode(x=alt.X("running:Q", scale=alt.Scale(type="log", base=2), title="running requests an engine"))
band = base.mark_area(opacity=0.25).encode(y=alt.Y("low:Q", title="output tok/s an engine"), y2="high:Q")
line = base.mark_line(point=True).encode(y="predicted:Q", tooltip=["running", "predicted", "low", "high"])
seen = pd.DataFrame([{"running": lv.concurrency, "measured": lv.tokens_per_s} for lv in plan.calibration.levels])
dots = alt.Chart(seen).mark_point(shape="diamond", size=80, filled=True, color="#d6336c").encode(
    x="running:Q", y="measured:Q", tooltip=["running", "measured"])
st.altair_chart((band + line + dots).properties(title="Today's deployment: the fitted step model and its range", height=320),
                width="stretch")  # fmt: skip
st.caption(f"Line and band: the step model fitted on {markdown(plan.calibration.source)} and its range. Diamonds: the "
           "median measured tok/s at each level it was fitted on: "
           + ", ".join(f"{lv.concurrency} running: {number(lv.tokens_per_s)} ({lv.error * 100:+.0f} %)" for lv in plan.calibration.levels)
           + ".")  # fmt: skip
