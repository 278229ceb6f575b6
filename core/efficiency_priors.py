"""Measured priors for the step model's efficiencies on a GPU whose kernels today's fit does not cover
(core/efficiency_priors.json, written by bench/bench_plan_gpus.py --priors from tests/data/gpu/).

A prior gives [low, middle, high] for the bandwidth and compute efficiencies and the overhead a step
costs per layer, where it came from, and the error a transfer within its family was measured to make;
its members (every combination of low, middle and high) give a prediction's range. Pure: the table
is read once.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from core.step_model import Efficiency, Fit

TABLE = Path(__file__).with_name("efficiency_priors.json")


@dataclass(frozen=True)
class Prior:
    """Efficiencies for one GPU family: each a (low, middle, high) triple; the overhead per layer."""

    bandwidth: tuple[float, float, float]
    compute: tuple[float, float, float]
    overhead_s_per_layer: tuple[float, float, float]
    transfer_error: float
    source: str  # where the figures came from, in full
    label: str  # the same, short: a table row names it
    arch: str | None = None
    # a measured fit's own parameter sets (bandwidth, compute, overhead per layer), thinned: they move
    # together (a faster read leaves more time to the overhead), so their range is narrower than the
    # triples' every combination; None: the triples' combinations
    members: tuple[tuple[float, float, float], ...] | None = None

    def as_fit(self, layers: int | None) -> Fit:
        """The prior as a fit of no levels: the middle values best, every low/middle/high combination a
        member (``layers``: the model's, which the overhead scales with; None: one)."""
        per = layers or 1
        grid = self.members or tuple(itertools.product(self.bandwidth, self.compute, self.overhead_s_per_layer))
        members = tuple(Efficiency(b, c, o * per) for b, c, o in grid)
        best = Efficiency(self.bandwidth[1], self.compute[1], self.overhead_s_per_layer[1] * per)
        return Fit(best, members, float("nan"), float("nan"), (), self.source)


def _triple(values: list[float]) -> tuple[float, float, float]:
    low, middle, high = (float(x) for x in values)
    return low, middle, high


def _prior(row: dict[str, Any]) -> Prior:
    members = tuple(_triple(m) for m in row["members"]) if row.get("members") else None
    return Prior(_triple(row["bandwidth"]), _triple(row["compute"]), _triple(row["overhead_s_per_layer"]),
                 float(row.get("transfer_error", 0.0)), str(row["source"]), str(row["label"]), row.get("arch"), members)  # fmt: skip


@cache
def priors() -> tuple[tuple[Prior, ...], Prior]:
    """The measured families and the default."""
    doc = json.loads(TABLE.read_text())
    return tuple(_prior(r) for r in doc["families"]), _prior(doc["default"])


def prior_for(arch: str | None) -> Prior:
    """The measured prior of ``arch`` ("sm90"), else the default."""
    families, default = priors()
    return next((p for p in families if arch and p.arch == arch), default)


def family_transfer_error(arch: str | None) -> tuple[float, str]:
    """The error measured when a fit on one GPU of ``arch`` predicted another's, else the largest
    measured in any family (a transfer is never assumed exact); (0, "") where none was ever measured.
    The second item names where it was measured."""
    families, _ = priors()
    own = next((p for p in families if arch and p.arch == arch and p.transfer_error > 0), None)
    if own is not None:
        return own.transfer_error, f"measured within {own.arch}"
    measured = [p for p in families if p.transfer_error > 0]
    if not measured:
        return 0.0, ""
    worst = max(measured, key=lambda p: p.transfer_error)
    return worst.transfer_error, f"measured within {worst.arch}, none within {arch}"
