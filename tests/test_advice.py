"""Advice from the reference deployment (app/advice.py): given as its experience, and only to a
target whose GPUs are like its own (V100 32 GB, by model name and memory size)."""

from __future__ import annotations

import dataclasses

import pytest

from app.advice import REFERENCE, has_reference_advice, like_reference, with_reference
from app.alerts.rules import DEFAULT_RULES, by_name
from db.results import GpuFigures

GIB = 2**30


def gpu(name: str | None, memory_gib: float | None) -> GpuFigures:
    return GpuFigures(uuid="GPU-0", index=0, name=name, host="h", memory_used_bytes=None,
                      memory_total_bytes=None if memory_gib is None else memory_gib * GIB, memory_busy_pct_avg=None,
                      dram_bw_util_pct_avg=None, dram_bw_gbps_avg=None, dram_bw_source=None, peak_bw_gbps=None,
                      peak_bw_source=None, power_w_avg=None, temperature_c_max=None)  # fmt: skip


@pytest.mark.parametrize(("gpus", "like"), [
    ([gpu("Tesla V100-SXM2-32GB", 32)] * 8, True),  # the reference: NVML's and DCGM's name, 32768 MiB
    ([gpu("Tesla V100-PCIE-32GB", 31.75)], True),  # 32510 MiB, as some drivers report it
    ([gpu("Tesla V100-SXM2-16GB", 16)], False),  # the same model with half the memory
    ([gpu("Tesla V100S-PCIE-32GB", 32)], False),  # another model
    ([gpu("NVIDIA H200", 141)], False),
    ([gpu("Tesla V100-SXM2-32GB", 32), gpu("NVIDIA A100-SXM4-80GB", 80)], False),  # every GPU must be like it
    ([gpu("Tesla V100-SXM2-32GB", None)], False),  # memory unknown
    ([gpu(None, 32)], False),  # name unknown
    ([], False),  # no GPU source: the generic advice
])  # fmt: skip
def test_like_the_reference_means_the_same_model_and_memory_size(gpus, like):
    assert like_reference(gpus) is like


def test_the_reference_advice_names_the_reference_and_is_added_only_where_the_gpus_are_like_it():
    generic = "lower --max-num-seqs."
    added = with_reference(generic, "preemptions", True)
    assert added.startswith(generic + " " + REFERENCE) and "6144" in added and "0.92" in added
    assert with_reference(generic, "preemptions", False) == generic
    assert with_reference(generic, "ttft_p95", True) == generic  # nothing learned on the reference for it


def test_a_rule_given_its_own_recommendation_keeps_it_as_written():
    preemptions = by_name(DEFAULT_RULES, "preemptions")
    assert preemptions is not None and has_reference_advice(preemptions)
    assert not has_reference_advice(dataclasses.replace(preemptions, recommendation="call the on-call"))
    assert not any(has_reference_advice(r) for r in DEFAULT_RULES if r.name in ("efficiency", "ttft_p95"))


@pytest.mark.parametrize("rule", DEFAULT_RULES, ids=lambda r: r.name)
def test_no_default_rule_gives_the_references_figures_as_generic_advice(rule):
    for figure in ("0.95", "0.92", "32 GB", "V100", "6144", "at most 32", "15-20"):
        assert figure not in rule.recommendation, f"{rule.name}: {figure!r} is the reference's, not generic"
