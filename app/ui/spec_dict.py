"""An Altair chart's Vega-Lite dict, as ``chart.to_dict(validate=False)`` makes it, without Altair's copies.

Altair serialises a layer or concatenation by first copying it through its constructor, which
deep-copies every sub-chart to lift their parameters and data, and a nested layer is copied again by
each level above it: ~0.3 s of the Overview's spec on a new visit under load (issue 39 item 9). This
module's charts carry nothing left to lift once built (app/ui/charts.py lifts the zoom itself), so
walking the objects as they are gives the same dict (tests/test_ui_charts.py compares both ways).
"""

from __future__ import annotations

from typing import Any

import altair as alt
import narwhals.stable.v1 as nw
import numpy as np
import pandas as pd
from altair.utils import update_nested
from altair.utils.schemapi import SchemaBase, Undefined, _todict
from altair.vegalite.v6.api import _prepare_data

_COMPOUND = (alt.LayerChart, alt.VConcatChart, alt.HConcatChart, alt.ConcatChart)


def vega_lite(chart: alt.TopLevelMixin) -> dict[str, Any]:
    """``chart.to_dict(validate=False)``: its named datasets at the top, Altair's theme applied."""
    context: dict[str, Any] = {"datasets": {}, "top_level": False}
    spec = _compound(chart, context) if isinstance(chart, _COMPOUND) else chart.to_dict(validate=False, context=context)
    spec.setdefault("$schema", alt.SCHEMA_URL)
    if theme := alt.theme.get():
        spec = dict(update_nested(theme(), spec, copy=True))
    if context["datasets"]:
        spec.setdefault("datasets", {}).update(context["datasets"])
    return spec


def _compound(chart: Any, context: dict[str, Any]) -> dict[str, Any]:
    # what TopLevelMixin.to_dict does on its copy: its own data named in the shared datasets, and
    # handed down to the sub-charts (a Chart without data reads its parent's)
    context = dict(context)  # the datasets dict stays shared, as in Altair
    kwds = {key: value for key, value in chart._kwds.items() if value is not Undefined}
    if "data" in kwds:
        try:
            data = nw.from_native(kwds["data"], eager_or_interchange_only=True)
        except TypeError:  # a dict or Altair's own data object, as Altair passes it on
            data = kwds["data"]
        kwds["data"] = _prepare_data(data, context)
        context["data"] = data
    return {key: _value(value, context) for key, value in kwds.items()}


def _value(value: Any, context: dict[str, Any]) -> Any:
    if isinstance(value, _COMPOUND):
        return _compound(value, context)
    if isinstance(value, SchemaBase):  # a Chart (its copy is cheap), an encoding, a parameter…
        return value.to_dict(validate=False, context=context)
    if isinstance(value, list | tuple):
        return [_value(v, context) for v in value]
    if isinstance(value, dict):
        return {k: _value(v, context) for k, v in value.items() if v is not Undefined}
    return _todict(value, context, np, pd)  # numpy numbers, timestamps, dates as Altair writes them
