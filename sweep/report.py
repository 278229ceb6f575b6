"""The result table (laid out like the field report's) and the JSON document of a sweep."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from db.results import SweepLevel, SweepRun

# (header, field, format): the report's columns first, then the rest.
_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("concurrency", "concurrency", "{:d}"),
    ("output tok/s", "tokens_per_s", "{:.1f}"),
    ("TTFT P95", "ttft_p95_s", "{:.2f} s"),
    ("E2E mean", "e2e_mean_s", "{:.2f} s"),
    ("QPS", "qps", "{:.2f}"),
    ("TTFT P50", "ttft_p50_s", "{:.2f} s"),
    ("TTFT P99", "ttft_p99_s", "{:.2f} s"),
    ("ITL P95", "itl_p95_s", "{:.3f} s"),
    ("E2E P95", "e2e_p95_s", "{:.2f} s"),
    ("requests", "requests", "{:d}"),
    ("errors", "error_rate", "{:.1%}"),
)


def _cell(level: SweepLevel, field: str, fmt: str) -> str:
    value = getattr(level, field)
    return "n/a" if value is None else fmt.format(value)


ENGINE_HEADER = "engine TTFT P95"
# Under the table whenever the engine's column is there: the two TTFT P95s answer different questions.
ENGINE_NOTE = (
    "TTFT P95 is timed at this client (request sent → first text chunk, through HTTP, tokenisation and "
    "any gateway queue); engine TTFT P95 is the engine's own histogram over the same window (arrival at "
    "the engine → first token), interpolated inside the bucket shown, which is all its histogram knows. "
    "The two differ (by up to 64 % in the runs docs/metrics.md records, under 'Server-side and client-side latency')."
)


def format_table(levels: list[SweepLevel] | tuple[SweepLevel, ...], engine: Mapping[int, str] | None = None) -> str:
    """A Markdown table, one row per level, units in the cells; ``n/a`` where a figure has no sample.
    ``engine`` (concurrency → cell): the engine's own TTFT P95 and its bucket, beside the client's."""
    rows = [[header for header, _, _ in _COLUMNS]]
    rows += [[_cell(level, field, fmt) for _, field, fmt in _COLUMNS] for level in levels]
    if engine is not None:
        at = 1 + next(i for i, (_, field, _) in enumerate(_COLUMNS) if field == "ttft_p95_s")
        for row, level in zip(rows, [None, *levels], strict=True):
            row.insert(at, ENGINE_HEADER if level is None else engine.get(level.concurrency, "n/a"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|")
    return "\n".join(lines) + (f"\n\n{ENGINE_NOTE}" if engine is not None else "")


def format_verdict(recommendation: dict[str, Any]) -> str:
    """The verdict as a few lines of text."""
    sweet = recommendation.get("sweet_spot_concurrency")
    head = (
        f"Sweet spot: concurrency {sweet}, gateway limit {recommendation.get('gateway_limit')}"
        if sweet
        else ("Sweet spot: none in the swept range")
    )
    return f"{head}\n{recommendation.get('reason', '')}"


def to_json(run: SweepRun) -> dict[str, Any]:
    """The JSON document: ``{"levels": [...], "recommendation": {...}}`` plus the run's inputs.
    Level keys are SweepLevel's fields (the same names as ``sim --calibrate``)."""
    return {
        "started_at": run.started_at,
        "url": run.url,
        "model": run.model,
        "mix": run.mix,
        "ttft_slo_s": run.ttft_slo_s,
        "levels": [dataclasses.asdict(level) for level in run.levels],
        "recommendation": run.recommendation,
    }
