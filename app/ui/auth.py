"""Optional password gate (``SWEETSPOT_UI_PASSWORD``); off when no password is set.

For single sign-on use Streamlit's OIDC login instead (``st.login``; see docs/ui.md).
"""

from __future__ import annotations

import hmac

import streamlit as st


def allowed(password: str) -> bool:
    """True when no password is configured or this session already gave it; else draws the form."""
    if not password or st.session_state.get("_signed_in"):
        return True
    st.title("Sweetspot")
    with st.form("sign-in"):
        entered = st.text_input("Password", type="password", help="Set by SWEETSPOT_UI_PASSWORD on the server.")
        submitted = st.form_submit_button("Sign in")
    # compare_digest: the comparison takes the same time whatever prefix matches.
    if submitted and hmac.compare_digest(entered.encode(), password.encode()):
        st.session_state["_signed_in"] = True
        st.rerun()
    if submitted:
        st.error("Wrong password.")
    return False
