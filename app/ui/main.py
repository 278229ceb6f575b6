"""Entry point of the dashboard (``python -m app ui`` runs ``streamlit run app/ui/main.py``).

Settings are loaded once from the environment the launcher passes (SWEETSPOT_CONFIG,
SWEETSPOT_DB_URL, SWEETSPOT_UI_PASSWORD); pages receive them through :func:`page.context`.
"""

from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from app.fleet import LANDING_TARGETS
from app.ui import auth, fill_notice, page, reads, time_range, url_params, welcome
from app.ui.guard import guard
from core.redact import masked

# A file of our own, sent inline as a data: URL: a ":material/…:" page icon makes every visitor's browser
# fetch the favicon from fonts.gstatic.com (docs/security.md: no page asks any other host for anything).
ICON = Path(__file__).parent / "assets" / "icon.svg"
st.set_page_config(page_title="Sweetspot", page_icon=str(ICON), layout="wide")
settings = page.load(os.environ)  # the UI process's entry point: the one place that reads the environment

if not auth.allowed(settings.ui_password):
    st.stop()


def _missing_sqlite_file(db_url: str) -> bool:
    # A database the collector never created is "empty", not an error.
    prefix = "sqlite:///"
    return db_url.startswith(prefix) and not Path(db_url[len(prefix) :]).exists()


if _missing_sqlite_file(settings.db_url):
    welcome.render(settings, "the database does not exist yet")
    st.stop()

reader = guard("the database", reads.reader, settings.db_url)
# configured targets first; one not configured any more stays listed retired_shown_s (docs/fleet.md)
targets = sorted((t for t in guard("the targets", reader.targets) if t.listed(time_range.now(), settings.retired_shown_s)),
                 key=lambda t: t.retired_at is not None)  # fmt: skip
if not targets:
    welcome.render(settings, "no target has been scraped into this database")
    st.stop()

PAGES = {
    "Serving": [
        st.Page("views/fleet.py", title="Fleet", icon=":material/view_list:", default=len(targets) > LANDING_TARGETS),
        st.Page("views/overview.py", title="Overview", icon=":material/speed:", default=len(targets) <= LANDING_TARGETS),
        st.Page("views/gpus.py", title="GPUs", icon=":material/memory:", url_path="gpus"),
        st.Page("views/operating_point.py", title="Operating point", icon=":material/scatter_plot:"),
        st.Page("views/plan.py", title="Plan", icon=":material/trending_up:", url_path="plan"),
    ],
    "Alerting": [st.Page("views/alerts.py", title="Alerts", icon=":material/notifications:", url_path="alerts")],
    "History": [st.Page("views/query.py", title="Query", icon=":material/database:", url_path="query")],
    "Setup": [st.Page("views/targets.py", title="Targets", icon=":material/dns:")],
}
navigation = st.navigation(PAGES)
auth.return_to_asked(navigation, [p for section in PAGES.values() for p in section])
view = url_params.sidebar(targets, time_range.now(), (settings.raw_retention_s, settings.rollup_retention_s))
st.sidebar.caption(f"Refreshes every {settings.ui.refresh_s:g} s on live ranges · database {masked(settings.db_url)}")
page.publish(page.Context(settings, reader, targets, view))
fill_notice.show(reader, str(view.target))  # the demo's week filling in behind the dashboard (a line of its own)
navigation.run()
