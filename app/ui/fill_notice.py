"""The line every page shows while the demo's simulated week fills in behind the dashboard: how far
it has come and about how long is left (app/history_fill.py). A line of its own above the page,
never a change to any verdict; the Overview's headroom trend, read from whole days of the week,
waits for the week rather than judging a part of it (:func:`filling_days`)."""

from __future__ import annotations

import streamlit as st

from app.ui import time_range
from db.queries import Reader

REFRESH_S = 3.0  # the day count moves every few seconds while it fills


def filling_days(reader: Reader, target: str) -> tuple[int, int] | None:
    """(days written, days in all) while ``target``'s history fills; None otherwise (or unreadable:
    the pages then show what they read, as before)."""
    try:
        progress = reader.history_fill(target)
    except Exception:  # noqa: BLE001 - a database before migration 0065, or busy: no notice, never a broken page
        return None
    return (progress.days_done, progress.days_total) if progress is not None and progress.filling else None


@st.fragment(run_every=REFRESH_S)
def show(reader: Reader, target: str) -> None:
    try:
        progress = reader.history_fill(target)
    except Exception:  # noqa: BLE001 - as in filling_days
        return
    if progress is not None and progress.filling:
        st.info(f"{progress.notice(time_range.now()).capitalize()}: the charts show the days written so far and the "
                "live minutes; the headroom trend waits for the whole week.",
                icon=":material/hourglass_top:")
