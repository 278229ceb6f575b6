"""Optional password gate (``SWEETSPOT_UI_PASSWORD``); off when no password is set.

Guesses are limited per client address (:mod:`app.ui.guesses`), and signing in leads to the page
and URL parameters the visitor asked for. For single sign-on use Streamlit's OIDC login instead
(``st.login``; see docs/ui.md).
"""

from __future__ import annotations

import hmac
import math
from collections.abc import Iterable

import streamlit as st
from streamlit.navigation.page import StreamlitPage

from app.ui.guesses import FREE_GUESSES, Guesses, lock_s

_ASKED = "_asked"  # (page url path, query parameters) of the visit the form interrupted


@st.cache_resource
def _guesses() -> Guesses:
    return Guesses()  # one per dashboard process: a new session is no new allowance


def allowed(password: str) -> bool:
    """True when no password is configured or this session already gave it; else draws the form."""
    if not password or st.session_state.get("_signed_in"):
        return True
    # st.context.url: scheme, host and path, without the query (kept apart in st.query_params)
    path = "/" + (st.context.url or "").split("://", 1)[-1].partition("/")[2]
    st.session_state.setdefault(_ASKED, (path, st.query_params.to_dict()))
    st.title("Sweetspot")
    with st.form("sign-in", clear_on_submit=True):
        entered = st.text_input("Password", type="password", help="Set by SWEETSPOT_UI_PASSWORD on the server.")
        submitted = st.form_submit_button("Sign in")
    if submitted:
        _check(entered, password)
    return False


def _check(entered: str, password: str) -> None:
    guesses, client = _guesses(), st.context.ip_address or "localhost"
    tries = st.session_state["_tries"] = st.session_state.get("_tries", 0) + 1  # numbered: each answer is told apart
    wait = guesses.wait_s(client)
    if wait > 0:  # the password is not even compared: a guess costs its wait
        st.error(f"Too many wrong passwords from this address: try again in {math.ceil(wait)} s (try {tries}).")
        return
    # compare_digest: the comparison takes the same time whatever prefix matches.
    if hmac.compare_digest(entered.encode(), password.encode()):
        guesses.right(client)
        st.session_state["_signed_in"] = True
        st.rerun()
    guesses.wrong(client)
    after = lock_s(FREE_GUESSES)
    st.error(f"Wrong password (try {tries}). After {FREE_GUESSES} in a row, this address waits {after:g} s to try again.")


def return_to_asked(current: StreamlitPage, pages: Iterable[StreamlitPage]) -> None:
    """Once signed in, go to the page and URL parameters the interrupted visit asked for (once)."""
    if not st.session_state.get("_signed_in") or _ASKED not in st.session_state:
        return
    path, params = st.session_state.pop(_ASKED)
    segment = path.rstrip("/").rsplit("/", 1)[-1]  # the page's url_path ("" for the default page)
    page = next((p for p in pages if p.url_path and p.url_path == segment), current)
    if page.url_path != current.url_path or params != st.query_params.to_dict():
        st.switch_page(page, query_params=params)
