"""What an empty dashboard shows: how to feed it, never a traceback."""

from __future__ import annotations

import streamlit as st

from core.redact import masked
from core.settings import Settings

EXAMPLE = """\
[[targets]]
name = "prod"
vllm_url = "http://10.0.0.5:8000/metrics"
gpu = { source = "nvml" }              # or { source = "dcgm", url = "http://10.0.0.5:9400/metrics" }
gateway = { preset = "litellm", url = "http://10.0.0.5:4000/metrics" }
ceiling = { weight_gb = 40, tensor_parallel = 8, bandwidth_gbps = 900 }
"""


def render(settings: Settings, reason: str) -> None:
    st.title("Sweetspot")
    st.info(f"Nothing to show yet: {reason}.", icon=":material/hourglass_empty:")
    st.markdown(
        f"This dashboard reads the database at `{masked(settings.db_url)}`. The collector fills it; start it "
        "in another terminal, then reload this page."
    )
    st.subheader("See it with the demo")
    st.markdown(
        "With no target configured, the collector starts the built-in simulator (a vLLM stand-in "
        "calibrated on the 8× V100 reference deployment) and watches it:"
    )
    st.code("python -m app run", language="bash")
    st.subheader("Point it at your vLLM")
    st.markdown("Write a settings file with one `[[targets]]` table per deployment:")
    st.code(EXAMPLE, language="toml")
    st.code("python -m app run --config sweetspot.toml\npython -m app ui --config sweetspot.toml", language="bash")
    st.caption("Every setting: python -m app config --describe (docs/configuration.md).")
