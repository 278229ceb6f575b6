"""Advice that comes from the reference deployment, given as its experience and only where it fits.

The numbers in DOMAIN.md §2 (``--max-num-seqs`` 32, ``--max-model-len`` 6144, ``--gpu-memory-utilization``
0.92 where 0.95 ran out of memory, ``--enforce-eager`` costing 15-20 %) were measured on one
deployment: 8× V100 SXM2 32 GB serving a 70B model in AWQ 4-bit. On other GPUs they are wrong (an
80 GB card has other headroom, an 8B model other limits). The default rules give generic advice; a
target whose GPUs are like the reference's also gets the reference's experience, named as such. The
GPUs are the target's stored ones (NVML or DCGM): an unknown GPU gets the generic advice only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from app.alerts.rules import DEFAULT_RULES, Rule
from app.formatting import GIB
from db.results import GpuFigures

REFERENCE = "On the reference deployment (8× V100 32 GB, a 70B model in AWQ 4-bit, TP 8)"
_REFERENCE_MODEL = re.compile(r"V100\b", re.IGNORECASE)  # V100-SXM2-32GB, V100-PCIE-32GB; not V100S
_REFERENCE_MEMORY_GIB = 32.0  # nvidia-smi and DCGM report a 32 GB V100 as 32768 MiB
_MEMORY_SLACK_GIB = 1.0  # some drivers report a little less (32510 MiB)

_KV_MEMORY = "--gpu-memory-utilization 0.95 ran out of memory at load, 0.92 works"
# rule name → what the reference deployment learned about it (DOMAIN.md §2); the rule's own text is generic
REFERENCE_ADVICE: dict[str, str] = {
    "not_serving": f"{REFERENCE}, --enforce-eager cost 15-20 % throughput.",
    "preemptions": f"{REFERENCE}, --max-num-seqs 32 and --max-model-len 6144 instead of 8192 ended the preemption "
    f"storm; {_KV_MEMORY}.",
    "kv_cache_critical": f"{REFERENCE}, {_KV_MEMORY}: do not raise it to make room.",
    "kv_cache": f"{REFERENCE}, {_KV_MEMORY}: do not raise it to make room.",
    "concurrency": f"{REFERENCE}, the knee was at 16 running requests and --max-num-seqs 32 kept the KV cache from "
    "preempting.",
}


def like_reference(gpus: Iterable[GpuFigures]) -> bool:
    """True when the target has GPUs and every one is a V100 with 32 GB (model name and memory size,
    as NVML or DCGM report them); False for any other GPU, or one whose name or memory is unknown."""
    seen = list(gpus)
    return bool(seen) and all(_like(g.name, g.memory_total_bytes) for g in seen)


def _like(name: str | None, memory_total_bytes: float | None) -> bool:
    if not name or not _REFERENCE_MODEL.search(name) or memory_total_bytes is None:
        return False
    return abs(memory_total_bytes / GIB - _REFERENCE_MEMORY_GIB) <= _MEMORY_SLACK_GIB


def has_reference_advice(rule: Rule) -> bool:
    """A default rule the reference has experience of, still giving its own recommendation (one
    written in ``[[alerts.rules]]`` is the user's, and stays as written)."""
    default = next((r for r in DEFAULT_RULES if r.name == rule.name), None)
    return rule.name in REFERENCE_ADVICE and default is not None and rule.recommendation == default.recommendation


def with_reference(text: str, rule: str, like: bool) -> str:
    """``text`` (a rule's generic recommendation), followed by the reference's experience for ``rule``
    when the target's GPUs are ``like`` the reference's."""
    extra = REFERENCE_ADVICE.get(rule) if like else None
    return f"{text} {extra}" if extra and text else text
