"""The chart cache: an Altair chart's Vega-Lite spec, built once per distinct input and drawn full width."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import streamlit as st
from streamlit import dataframe_util

from app.ui import spec_dict
from app.ui.charts import PANEL_HEIGHT


@st.cache_data(max_entries=128, show_spinner=False)
def _spec(call: bytes, _builder: Callable[..., Any], _args: tuple[Any, ...]) -> dict[str, Any]:
    # ``call`` is the key: the pickled builder and arguments, i.e. their values (a pickle names a
    # function by its module and name and writes out every field of a record). Equal bytes are an
    # equal call, so a hit is always the right chart; Streamlit hashes bytes fast, where it walks
    # 1,000 dataclasses slowly. ``_builder`` and ``_args`` (not hashed) are that call's objects.
    # Altair's schema validation and deep copies cost ~0.1 s a chart here; the tests validate every
    # builder's output (tests/test_ui_charts.py), so the running app serialises without them
    # (app/ui/spec_dict.py: the same dict as to_dict(validate=False)).
    spec: dict[str, Any] = spec_dict.vega_lite(_builder(*_args))
    # st.vega_lite_chart sends named datasets as Arrow and converts rows (records → pandas → Arrow)
    # on every call, ~40 ms a 2,000-row chart; it passes bytes through as they are, so the cache
    # keeps the Arrow bytes (same conversion, once) and hands back a copy that unpickles fast.
    datasets = spec.get("datasets", {})
    spec["datasets"] = {name: dataframe_util.convert_anything_to_arrow_bytes(rows) for name, rows in datasets.items()}
    return spec


def spec(builder: Callable[..., Any], *args: Any) -> dict[str, Any]:
    """``builder(*args)`` (an Altair chart) as a Vega-Lite spec with Arrow datasets, cached by value."""
    return _spec(pickle.dumps((builder, args), protocol=pickle.HIGHEST_PROTOCOL), builder, args)


def show_chart(builder: Callable[..., Any], *args: Any, height: int | str = PANEL_HEIGHT, where: Any = None) -> None:
    """Draw ``builder(*args)`` full width; the spec is cached by its inputs (:func:`spec`).

    ``height``: pixels for one chart, "content" for a stack of panels that sizes itself.
    """
    (where or st).vega_lite_chart(spec(builder, *args), width="stretch", height=height)
