"""The prompt:output mix a target's compute roof is drawn at (docs/ceiling.md "Both roofs"): one read over
one stated range, so the Plan page, the Operating point page and ``python -m app plan`` print one roof.

The compute roof counts each output token's share of the prompts' prefill FLOPs, so it moves with the
ratio of prompt tokens to output tokens: read over two ranges (the Operating point page's chosen range,
the plan's week of hours) one target's roof read two figures on two pages. The range is fixed here: the
last 7 days (the plan's history) to the last whole 10 minutes, from the minute rollups, so every surface
asked within the same 10 minutes reads the same minutes. Where those hold no prompt count, the latest
load sweep of the target that measured tok/s gives its mix's ratio (a lower bound: see :func:`mix_ratio`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from app.operating_point import prompt_per_output, sweeps_of
from core.errors import UsageError
from db.queries import Reader
from db.results import SweepRun

SPAN_S = 7 * 86400.0  # the plan's history: the last 7 days
GRAIN_S = 600.0  # the range ends at a whole 10 minutes (the Plan page's clock, app/ui/views/plan.py)
LEVEL_S = 60  # the minute rollups: 7 days of them are kept, and they hold the last partial hour


@dataclass(frozen=True)
class Mix:
    """Prompt tokens prefilled per output token (None: unknown) and where it was read, in words."""

    prompt_per_output: float | None
    start: float
    end: float
    source: str  # "the 7 days to 2026-12-07 22:50", or the sweep's mix where those hold no prompt count


def range_end(now: float) -> float:
    """The last whole 10 minutes at ``now``: where the plan's history and the mix end on every surface."""
    return math.floor(now / GRAIN_S) * GRAIN_S


def mix_range(now: float) -> tuple[float, float]:
    """The range every surface reads the mix over at ``now``: 7 days to the last whole 10 minutes."""
    end = range_end(now)
    return end - SPAN_S, end


def traffic_mix(reader: Reader, target: str, now: float) -> Mix:
    """``target``'s prompt tokens per output token over :func:`mix_range` (``now``), all models summed;
    else its latest measured sweep's mix; else None."""
    start, end = mix_range(now)
    days = f"the {round(SPAN_S / 86400.0)} days to {time.strftime('%Y-%m-%d %H:%M', time.localtime(end))}"
    ratio = prompt_per_output(reader.window(target, end, end - start, level=LEVEL_S, gpus=False))
    if ratio is not None:
        return Mix(ratio, start, end, days)
    sweep = latest_sweep(reader, target)
    ratio = mix_ratio(sweep.mix) if sweep is not None else None
    if ratio is None or sweep is None:
        return Mix(None, start, end, f"no prompt count stored in {days}")
    return Mix(ratio, start, end, f"its sweep's mix {sweep.mix}: no prompt count stored in {days}")


def latest_sweep(reader: Reader, target: str) -> SweepRun | None:
    """The latest stored load sweep of ``target``'s server that measured tok/s (None: none)."""
    info = next((t for t in reader.targets() if t.name == target), None)
    mine, _ = sweeps_of(info, reader.sweep_runs(20))
    return next((run for run in mine if any(lv.tokens_per_s for lv in run.levels)), None)


def mix_context(mix: str) -> float | None:
    """The context a running request of a sweep's mix holds on average: each class's prompt plus half its
    output, weighted by its share × its output (a request runs as long as it decodes)."""
    classes = _classes(mix)
    if classes is None:
        return None
    weights = [(share * sum(c.max_tokens) / 2, sum(c.input_tokens) / 2 + sum(c.max_tokens) / 4) for c, share in classes]
    total = sum(w for w, _ in weights)
    return sum(w * ctx for w, ctx in weights) / total if total else None


def mix_ratio(mix: str) -> float | None:
    """Prompt tokens per output token of a sweep's mix: the mean prompt ÷ the mean ``max_tokens`` (a
    request that stops early prefills more per output token: a lower bound)."""
    classes = _classes(mix)
    if not classes:
        return None
    prompt = sum(share * sum(c.input_tokens) / 2 for c, share in classes)
    output = sum(share * sum(c.max_tokens) / 2 for c, share in classes)
    return prompt / output if output else None


def _classes(mix: str) -> Any:
    from sweep.workload import parse_mix

    try:
        return parse_mix(mix)
    except UsageError:
        return None

