"""Alerts: what fires or waits now (since when, value against threshold, what to do), the state
history per rule, and silences (create, expire). Reads the states the collector's evaluator stored."""

from __future__ import annotations

import getpass

import streamlit as st

from app.alerts.model import SEVERITIES, Silence
from app.formatting import clock
from app.ui import alert_views, notification_log, page, time_range
from app.ui.guard import guard
from core.errors import SweetspotError
from core.text import markdown, markdown_code

ctx = page.context()
st.header("Alerts")
now = time_range.now()
data = guard("the alerts", ctx.reader.alert_board, now)
alerts = alert_views.held_back(data, ctx.settings.alerts.mute_windows)

st.subheader("Firing and pending now")
if not alerts:
    st.success("No alert is firing or pending.", icon=":material/check_circle:")
for row in alert_views.alert_rows(alerts, now):
    with st.container(border=True):
        held = f" · silenced by {row['silenced']}" if row["silenced"] else ""
        # names come from outside (model from /metrics, target and rule from the settings): plain text
        where = markdown(row["target"]) + (f" / model {markdown(row['model'])}" if row["model"] else "")
        st.markdown(f"**{row['state'].upper()}** · {row['severity']} · **{where}** · {markdown_code(row['rule'])} · "
                    f"since {row['since']}{held}")  # fmt: skip
        st.markdown(f"{markdown(row['what'], 1000)}  \n→ {markdown(row['recommendation'], 1000)}  \n"
                    f"[Open the Overview at that window]({row['overview']})")  # fmt: skip

rows = alert_views.timeline_rows(data.history, data.start, data.end)
if rows.empty:
    st.caption("No state change in the last 24 hours.")
else:
    st.altair_chart(alert_views.timeline_chart(rows, data.start, data.end), width="stretch")

st.subheader("Silences")
st.caption("A silence holds back notifications only: silenced alerts still change state and show here.")
for s in data.silences:
    left, right = st.columns([5, 1])
    # matchers, author and comment are typed by people: shown as the text they are, never as markup
    left.markdown(f"{markdown_code(s.matchers, 1000)} · {clock(s.starts_at)} → {clock(s.ends_at)} · "
                  f"{markdown(s.author)}: {markdown(s.comment, 1000)}")
    if right.button("Expire", key=f"expire-{s.id}") and s.id is not None:
        try:  # one row through the facade, never a migration: an older schema is refused, in one line
            ctx.reader.expire_silence(s.id, time_range.now())
        except SweetspotError as exc:
            st.error(exc.one_line())
        else:
            st.rerun()

rules = sorted({s.rule for s, _ in alerts} | {t.rule for t in data.history})
with st.form("new-silence", clear_on_submit=True):
    st.markdown("**New silence**")
    cols = st.columns(4)
    rule = cols[0].selectbox("Rule", ["any", *rules])
    target = cols[1].selectbox("Target", ["any", *[t.name for t in ctx.targets]])
    model = cols[2].selectbox("Model", ["any", *sorted({m for t in ctx.targets for m in t.models})])
    severity = cols[3].selectbox("Severity", ["any", *SEVERITIES])
    when = st.columns(2)  # a maintenance planned for tonight is silenced ahead of time
    after = when[0].number_input("Starts in (hours from now)", min_value=0.0, max_value=24 * 30.0, value=0.0, step=0.25)
    hours = when[1].number_input("Lasts (hours)", min_value=0.25, max_value=24 * 30.0, value=2.0, step=0.25)
    comment = st.text_input("Comment (why)")
    if st.form_submit_button("Silence"):
        given = (("rule", rule), ("target", target), ("model", model), ("severity", severity))
        matchers = {k: v for k, v in given if v != "any"}
        made, start = int(time_range.now()), int(time_range.now() + after * 3600)
        try:
            silence = Silence(matchers, start, start + int(hours * 3600), getpass.getuser(), comment or "-", made)
            sid = ctx.reader.add_silence(silence)
            st.success(f"Silence {sid} created: {clock(start)} → {clock(start + hours * 3600)}.")
        except SweetspotError as exc:
            st.error(exc.one_line())

notification_log.render(ctx, now)  # e-mail on or off, and the notification log (app/notify)
