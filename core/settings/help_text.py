"""Sentences the settings show people, apart from each setting's own ``help``: what a target
without a ceiling lacks (status, the hints) and why a setting no longer read is refused."""

from __future__ import annotations

# What a figure needing the ceiling says when the target's inputs are missing (status, the hints).
NO_CEILING = "unknown: set targets[].ceiling.weight_gb and tensor_parallel"


def ceiling_missing(weight_gb: float | None, tensor_parallel: int | None, bandwidth_gbps: float | None,
                    gpu_source: str) -> str:  # fmt: skip
    """What a target without a ceiling lacks, naming only the missing inputs and showing those set:
    ``unknown: no bandwidth per GPU: set targets[].ceiling.bandwidth_gbps, or targets[].gpu.source = "nvml"
    (set: weight_gb 40 GB, tensor_parallel 8; GPU source: none)``. NO_CEILING when nothing is set."""
    given = [f"weight_gb {weight_gb:g} GB" if weight_gb is not None else "",
             f"tensor_parallel {tensor_parallel}" if tensor_parallel is not None else "",
             f"bandwidth_gbps {bandwidth_gbps:g} GB/s" if bandwidth_gbps is not None else ""]
    given_text = ", ".join(g for g in given if g)
    if not given_text:
        return NO_CEILING
    if weight_gb is None or tensor_parallel is None:
        lacking = "weight_gb" if weight_gb is None else "tensor_parallel"
        return f"unknown: set targets[].ceiling.{lacking} (set: {given_text})"
    source = gpu_source or "none"
    why = {"nvml": "NVML has not reported the GPUs' peak yet", "dcgm": "dcgm-exporter does not report peak bandwidth"}
    lack = why.get(source, "no GPU source reads it")
    return (f"unknown: no bandwidth per GPU ({lack}): set targets[].ceiling.bandwidth_gbps"
            + ("" if source in ("nvml", "dcgm") else ', or targets[].gpu.source = "nvml" on the GPUs\' host')
            + f" (set: {given_text}; GPU source: {source})")


# Settings no longer read: key → the one line that says what replaced it.
MIN_EFFICIENCY_REMOVED = ("no longer read: it judged output tok/s against the ceiling, a bound on decode steps/s; no default "
                   "rule has an efficiency floor now (under_delivering judges tok/s against the target's own curve, "
                   "docs/alerts.md); remove it, or write a rule over mbu and {prefix}min_mbu")
