"""Before and after a configuration epoch: the sweet-spot figures of the window before it against the
window after it ("since gpu_memory_utilization 0.92 → 0.95: preemptions −100 %, TTFT P95 −0.4 s").

Each side is at most ``window_s`` long and never crosses the epochs on either side: the window before
runs from the previous epoch (or ``window_s`` earlier) to the epoch, the window after from the epoch to
the next one (or ``window_s`` later, or now). Rates compare as relative changes, latencies and shares
as differences in their unit; a figure missing on either side is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.formatting import number
from db.queries import Reader
from db.results import ConfigEpoch, WindowFigures

MINUS = "−"


@dataclass(frozen=True)
class Compared:
    """One figure before and after: its label, both values, and the change in words (``−100 %``, ``−0.4 s``)."""

    label: str
    before: float
    after: float
    change: str


# (label, how it is read from a window, relative change or unit of a difference)
_FIGURES: tuple[tuple[str, str, str], ...] = (
    ("output tok/s", "tokens_per_s", "%"),
    ("requests/s", "requests_per_s", "%"),
    ("preemptions/h", "preemptions_per_h", "%"),
    ("TTFT P95", "ttft_p95_s", "s"),
    ("ITL P95", "itl_p95_s", "s"),
    ("running", "running_avg", ""),
    ("KV usage max", "kv_cache_usage_max", "pts"),
)


def _value(figures: WindowFigures, attr: str) -> float | None:
    if attr == "preemptions_per_h":
        return None if figures.preemptions is None else figures.preemptions * 3600 / figures.window_s
    value = getattr(figures, attr)
    return None if value is None else (value * 100 if attr == "kv_cache_usage_max" else value)


def compare(before: WindowFigures, after: WindowFigures) -> list[Compared]:
    """Each figure both windows have, with its change."""
    out = []
    for label, attr, unit in _FIGURES:
        b, a = _value(before, attr), _value(after, attr)
        if b is None or a is None:
            continue
        if unit == "%":
            if b == 0:
                change = "unchanged (0)" if a == 0 else f"from 0 to {number(a)}"
            else:
                change = _signed((a - b) / b * 100, " %")
        else:
            change = _signed(round(a - b, _DIGITS[unit]), f" {unit}" if unit else "")
        out.append(Compared(label, b, a, change))
    return out


_DIGITS = {"s": 3, "pts": 1, "": 2}  # a difference finer than these is no difference (ms, 0.1 point)


def _signed(value: float, unit: str) -> str:
    text = number(abs(value))
    return f"±0{unit}" if text == "0" else f"{'+' if value > 0 else MINUS}{text}{unit}"


@dataclass(frozen=True)
class EpochComparison:
    """An epoch with the windows around it and what changed across it."""

    epoch: ConfigEpoch
    before: tuple[float, float]  # (start, end) unix s
    after: tuple[float, float]
    figures: tuple[Compared, ...]

    def text(self) -> str:
        """``since gpu_memory_utilization 0.92 → 0.95 (restart): preemptions/h −100 %, TTFT P95 −0.4 s``."""
        head = f"since {self.epoch.text()}"
        if not self.figures:
            return f"{head}: no figure on both sides (no traffic before or after)"
        return f"{head}: " + ", ".join(f"{c.label} {c.change}" for c in self.figures)


def comparisons(reader: Reader, target: str, epochs: Sequence[ConfigEpoch], window_s: float,
                now: float) -> list[EpochComparison]:  # fmt: skip
    """Every epoch but the first seen, compared across (``epochs`` oldest first, as the facade gives them)."""
    out = []
    for i, epoch in enumerate(epochs):
        if epoch.kind == "first":
            continue
        start = max(epoch.ts - window_s, epochs[i - 1].ts if i > 0 else epoch.ts - window_s)
        end = min(epoch.ts + window_s, epochs[i + 1].ts if i + 1 < len(epochs) else now, now)
        if end <= epoch.ts or epoch.ts - 1 - start < 1:  # no second on a side: nothing to compare
            continue
        # whole seconds: the window before ends a second before the epoch's round, the one after holds it
        before = reader.window(target, epoch.ts - 1, epoch.ts - 1 - start, gpus=False)
        after = reader.window(target, end, end - epoch.ts + 1, gpus=False)
        out.append(EpochComparison(epoch, (start, epoch.ts), (epoch.ts, end), tuple(compare(before, after))))
    return out
