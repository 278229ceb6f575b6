"""The fleet at a glance: every target's state and figures, worst first (Fleet page, ``status --all``)."""

from __future__ import annotations

from collectors.prometheus import COLON_FORM, UNDERSCORE_FORM
from db.results import TargetInfo


def names_form(info: TargetInfo) -> str | None:
    """Which form of the vLLM names the target's last page had: ``vllm:x`` or ``vllm_x`` (None: no page yet)."""
    names = list(info.metric_names_used.values())
    if not names:
        return None
    return UNDERSCORE_FORM if any(n.startswith("vllm_") for n in names) else COLON_FORM
