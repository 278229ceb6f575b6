"""The guard around a read: a failed read becomes one line with the next step, and the page stops."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import streamlit as st

from core.errors import SweetspotError
from core.redact import masked
from core.text import markdown

T = TypeVar("T")


def guard(what: str, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a facade query; on failure show one line with the next step and stop this page."""
    try:
        return call(*args, **kwargs)
    except SweetspotError as exc:
        # an error may quote a name from outside: plain text
        st.error(f"Could not read {what}: {markdown(exc.one_line(), 1000)}", icon=":material/error:")
    except Exception as exc:  # noqa: BLE001 - the page must show one line, never a traceback
        settings = st.session_state.get("_settings")
        url = masked(settings.db_url) if settings else "db_url"
        st.error(
            f"Could not read {what}: {type(exc).__name__}: {markdown(masked(str(exc)), 1000)}. Check that the database at {url} exists "
            "and the collector has written to it (python -m app run), or set db_url / SWEETSPOT_DB_URL.",
            icon=":material/error:",
        )
    st.stop()
    raise AssertionError("unreachable")  # st.stop() raises; this keeps type checkers honest
