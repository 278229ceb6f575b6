"""The result table (laid out like the field report's) and the JSON document of a sweep."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from db.results import SweepLevel, SweepRun
from sweep.engine import EngineLevel

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


def format_table(levels: list[SweepLevel] | tuple[SweepLevel, ...]) -> str:
    """A Markdown table, one row per level, units in the cells; ``n/a`` where a figure has no sample."""
    rows = [[header for header, _, _ in _COLUMNS]]
    rows += [[_cell(level, field, fmt) for _, field, fmt in _COLUMNS] for level in levels]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = ["| " + " | ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|")
    return "\n".join(lines)


def format_engine(engine: EngineLevel) -> str:
    """The engine's own figures of a level in one line, its TTFT P95 with the bucket that holds it."""
    tok = "n/a" if engine.tokens_per_s is None else f"{engine.tokens_per_s:.1f} tok/s"
    ttft = "n/a" if engine.ttft_p95_s is None else f"{engine.ttft_p95_s:.2f} s"
    if engine.ttft_p95_bucket is not None:
        lower, upper = engine.ttft_p95_bucket
        ttft += f" in ({lower:g}, {upper:g}]"
    return f"engine's /metrics over the same span: concurrency {engine.concurrency}, {tok}, TTFT P95 {ttft}"


# Why the table's TTFT P95 (the client's) and the engine's may differ, said once under the engine's lines.
CLIENT_VS_ENGINE = (
    "TTFT P95 above is the client's: each request timed from its send to its first streamed token, network and "
    "the client's own reading included. The engine's is histogram_quantile over its buckets: exact only to the "
    "bucket that holds it. Both are right; see docs/metrics.md, \"Server-side and client-side latency\"."
)


def engine_json(engine: EngineLevel) -> dict[str, Any]:
    """One level's engine figures as JSON (an upper bound of +Inf is written null)."""
    doc = dataclasses.asdict(engine)
    if engine.ttft_p95_bucket is not None:
        lower, upper = engine.ttft_p95_bucket
        doc["ttft_p95_bucket"] = [lower, None if math.isinf(upper) else upper]
    return doc


def format_verdict(recommendation: dict[str, Any], gateway: bool | None = True) -> str:
    """The verdict as a few lines of text. ``gateway``: whether a gateway stands in front of the
    engine (None: not known), so the limit is set where the target has one: the gateway's, else
    vLLM's own ``--max-num-seqs``."""
    sweet = recommendation.get("sweet_spot_concurrency")
    limit = recommendation.get("gateway_limit")
    if not sweet:
        head = "Sweet spot: none in the swept range"
    elif gateway:
        head = f"Sweet spot: concurrency {sweet}, gateway limit {limit}"
    elif gateway is None:
        head = (f"Sweet spot: concurrency {sweet}: set the gateway's concurrency limit to {limit}, or vLLM's "
                f"--max-num-seqs {limit} where no gateway stands in front")
    else:
        head = (f"Sweet spot: concurrency {sweet}: no gateway in front of this target, so cap the engine itself with "
                f"vLLM's --max-num-seqs {limit} (extra requests then wait in vLLM's queue); a gateway limited to "
                f"{limit} would hold them outside")
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
