"""The serving engines Sweetspot reads, in one table (shared/ENGINES.md, docs/metrics.md): each
engine's name, the prefix of its sample names, how it is shown, its word for a preemption and the
versions its names imply.

Detection (collectors/vllm.py), the settings' check of ``targets[].engine``, the Overview's tiles,
``status``, ``inspect`` and the simulator read this table; no code compares an engine's name with a
literal. The catalogue (collectors/catalogue.py) lists each metric's exposed names, every engine's
together, preferred first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

AUTO = "auto"  # targets[].engine: the page's names decide


@dataclass(frozen=True)
class Engine:
    """One engine: ``name`` is its ``targets[].engine`` value and what is stored for a target."""

    name: str
    prefix: str  # its sample names' namespace, e.g. "vllm:"
    display: str  # as people write it
    preemption: str  # its word for a preemption, plural ("retractions": SGLang)
    stable: str  # the versions a name not in ``versions`` implies
    # exposed name → the versions it implies (renames and additions checked against each release)
    versions: Mapping[str, str] = field(default_factory=dict)

    def owns(self, sample_name: str) -> bool:
        return sample_name.startswith(self.prefix)


_HIDDEN_0_11 = "vLLM ≤ 0.10.2 (hidden in 0.11, removed in 0.12)"

VLLM = Engine("vllm", "vllm:", "vLLM", "preemptions", "vLLM (all versions read)", {
    "vllm:gpu_cache_usage_perc": _HIDDEN_0_11,
    "vllm:gpu_prefix_cache_hits_total": _HIDDEN_0_11,
    "vllm:gpu_prefix_cache_queries_total": _HIDDEN_0_11,
    "vllm:kv_cache_usage_perc": "vLLM V1 ≥ 0.9.2",
    "vllm:prefix_cache_hits_total": "vLLM V1 (the name from 0.11 on)",
    "vllm:prefix_cache_queries_total": "vLLM V1 (the name from 0.11 on)",
    "vllm:time_per_output_token_seconds": "vLLM ≤ 0.11 (hidden in 0.12-0.14, removed in 0.15)",
    "vllm:inter_token_latency_seconds": "vLLM ≥ 0.10.2",
    "vllm:request_time_per_output_token_seconds": "vLLM ≥ 0.11",
    "vllm:num_requests_swapped": "vLLM V0 (≤ 0.10)",
    "vllm:admission_rejections_total": "vLLM ≥ 0.32",
    "vllm:num_requests_waiting_by_reason": "vLLM ≥ 0.32",
    "vllm:engine_sleep_state": "vLLM ≥ 0.32",
    "vllm:estimated_read_bytes_per_gpu_total": "vLLM ≥ 0.32 with --enable-mfu-metrics",
    "vllm:estimated_write_bytes_per_gpu_total": "vLLM ≥ 0.32 with --enable-mfu-metrics",
})  # fmt: skip
SGLANG = Engine("sglang", "sglang:", "SGLang", "retractions", "SGLang 0.5")

# The first is the default: what a page without any engine's names is read as.
ENGINES: tuple[Engine, ...] = (VLLM, SGLANG)
NAMES: tuple[str, ...] = tuple(e.name for e in ENGINES)
DEFAULT = ENGINES[0]


def engine_named(name: str | None) -> Engine | None:
    """The engine called ``name`` (a setting, a stored value); None for "auto", unknown or not yet known."""
    return next((e for e in ENGINES if e.name == name), None)


def detected(names_used: Iterable[str]) -> Engine:
    """Whose page it is, by the names read from it: the first engine other than the default whose
    prefix one of them carries, else the default."""
    used = tuple(names_used)
    return next((e for e in ENGINES[1:] if any(e.owns(n) for n in used)), DEFAULT)


def name_versions(sample_name: str) -> str:
    """The versions an exposed name implies (inspect, the Targets page)."""
    for engine in ENGINES:
        if engine.owns(sample_name):
            return engine.versions.get(sample_name, engine.stable)
    return DEFAULT.stable


def preemption_word(name: str | None) -> str:
    """The word for a preemption of the engine called ``name``, plural (the default's when not known)."""
    return (engine_named(name) or DEFAULT).preemption
