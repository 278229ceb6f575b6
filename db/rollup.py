"""Rollups (1 minute from raw rows, 1 hour from minute rollups) and retention.

Counters in rollups are exact sums of the stored per-scrape increases (themselves reset-aware, see
:mod:`db.writer`), not Prometheus' extrapolated ``increase()``: a window's tokens are the tokens the
scrapes inside it saw. Gauges keep avg (weighted by samples) and max; histograms keep summed bucket
increases in the same packed form as raw rows (newest layout of the period; :mod:`db.histo`).

:func:`rollup` is idempotent: ``rollup_marks`` records, per step, the time before which rollups are
complete; each run replaces the rollups of the periods it folds (delete + insert in one
transaction), so re-running it, or running it with ``since=`` to rebuild, gives the same rows.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, Table, delete, func, select, update
from sqlalchemy.exc import SQLAlchemyError

from core.limits import MAX_EPOCHS_PER_TARGET
from core.settings import Settings
from db import aggregate, histo, schema, sources
from db.errors import storage_error
from db.quantiles import quantile_matrix

CHUNK_S = 6 * 3600
GRACE_S = 30
_SHIFT = 1 << 34  # packs (id, period start) into one int64 for grouping


def written_text(written: dict[int, int]) -> str:
    """``rollup``'s counts as people read them: ``100,800 one-minute rows, 1,680 hourly rows``."""
    return f"{written.get(60, 0):,} one-minute rows, {written.get(3600, 0):,} hourly rows"


def rollup(engine: Engine, now: float, since: int | None = None) -> dict[int, int]:
    """Fold minutes and hours that ended at least ``GRACE_S`` before ``now``; rows written per step.

    ``since`` (unix s) rebuilds from that time instead of the stored mark.
    """
    written = {60: 0, 3600: 0}
    try:
        for step, source in ((60, sources.RAW), (3600, 60)):
            with engine.begin() as conn:
                lo = _start(conn, step, source, since)
                hi = _finished(conn, step, source, now)
                while lo is not None and lo < hi:
                    top = min(hi, lo + max(CHUNK_S, step))
                    written[step] += _fold(conn, step, source, lo, top)
                    lo = top
                if lo is not None:
                    _set_mark(conn, step, max(lo, hi))
    except SQLAlchemyError as exc:
        raise storage_error("rolling up", exc) from None
    return written


def _start(conn: Connection, step: int, source: int, since: int | None) -> int | None:
    if since is not None:
        return since // step * step
    mark = sources.marks(conn).get(step)
    if mark is not None:
        return mark
    table = schema.scrapes if source == sources.RAW else schema.target_rollups
    first = conn.execute(select(func.min(table.c.ts))).scalar()
    return None if first is None else int(first) // step * step


def _finished(conn: Connection, step: int, source: int, now: float) -> int:
    # A round is stamped when it starts and written when its scrapes return (up to the scrape
    # timeout later): a minute is folded only GRACE_S after it ends, so no late round is missed.
    hi = int(now - GRACE_S) // step * step
    if source != sources.RAW:  # hours only from minutes already rolled up
        hi = min(hi, sources.marks(conn).get(source, 0) // step * step)
    return hi


def _set_mark(conn: Connection, step: int, until: int) -> None:
    m = schema.rollup_marks
    if not conn.execute(update(m).where(m.c.step == step).values(until_ts=until)).rowcount:
        conn.execute(m.insert().values(step=step, until_ts=until))


def _keys(rows: list[Any], step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ids = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
    ts = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)) // step * step
    uniq, key = np.unique(ids * _SHIFT + ts, return_inverse=True)
    return uniq // _SHIFT, uniq % _SHIFT, key.reshape(-1)


def _fold(conn: Connection, step: int, source: int, lo: int, hi: int) -> int:
    layouts = sources.layouts(conn)
    by_bounds = {b: i for i, b in layouts.items()}
    count = 0
    for table, fetch, build in (
        (schema.target_rollups, _fetch_targets, _target_rows),
        (schema.model_rollups, _fetch_models, _model_rows),
        (schema.gpu_rollups, _fetch_gpus, _gpu_rows),
    ):
        rows = fetch(conn, source, lo, hi)
        conn.execute(delete(table).where(table.c.step == step, table.c.ts >= lo, table.c.ts < hi))
        if rows:
            out = build(rows, step, layouts, by_bounds)
            conn.execute(table.insert(), out)
            count += len(out)
    return count


def _all_ids(conn: Connection, table: Table) -> list[int]:
    return [int(i) for i in conn.execute(select(table.c.id)).scalars()]


def _fetch_targets(conn: Connection, source: int, lo: int, hi: int) -> list[Any]:
    return sources.fetch_targets(conn, source, _all_ids(conn, schema.targets), lo, hi)


def _fetch_models(conn: Connection, source: int, lo: int, hi: int) -> list[Any]:
    return sources.fetch_models(conn, source, _all_ids(conn, schema.models), lo, hi)


def _fetch_gpus(conn: Connection, source: int, lo: int, hi: int) -> list[Any]:
    return sources.fetch_gpus(conn, source, _all_ids(conn, schema.gpus), lo, hi)


def _v(x: Any) -> float | None:
    return None if x is None or math.isnan(x) else float(x)


_WAIT = schema.GATEWAY_WAIT


def _target_rows(
    rows: list[Any], step: int, layouts: dict[int, tuple[float, ...]], by_bounds: dict[tuple[float, ...], int]
) -> list[dict[str, Any]]:
    ids, starts, key = _keys(rows, step)
    nk = len(ids)
    spec = {"sum": ["up_scrapes", "queue_samples", "queue_depth_sum", f"{_WAIT}_count", f"{_WAIT}_sum"],
            "max": ["queue_depth_max"], "hist": [_WAIT]}  # fmt: skip
    red = aggregate.reduce_rows(rows, sources.TARGET_COLS, key, nk, spec, layouts)
    out = [
        {
            "target_id": int(ids[i]),
            "step": step,
            "ts": int(starts[i]),
            "scrapes": int(red.n[i]),
            "up_scrapes": int(np.nan_to_num(red.sums["up_scrapes"][i])),
            "queue_samples": int(np.nan_to_num(red.sums["queue_samples"][i])),
            "queue_depth_sum": _v(red.sums["queue_depth_sum"][i]),
            "queue_depth_max": _v(red.maxes["queue_depth_max"][i]),
            f"{_WAIT}_layout": None,
            f"{_WAIT}_count": _v(red.sums[f"{_WAIT}_count"][i]),
            f"{_WAIT}_sum": _v(red.sums[f"{_WAIT}_sum"][i]),
            f"{_WAIT}_buckets": None,
        }
        for i in range(nk)
    ]
    for keys, bounds, counts in red.hists[_WAIT]:  # the gateway's wait histogram, merged as a model's are
        for j, k in enumerate(keys.tolist()):
            out[k][f"{_WAIT}_layout"] = by_bounds[bounds]
            out[k][f"{_WAIT}_buckets"] = histo.encode(counts[j].tolist())
    return out


MODEL_SPEC: dict[str, list[str]] = {
    "sum": [
        *schema.COUNTERS,
        *[f"{g}_sum" for g in schema.GAUGES],
        *[f"{h}_{p}" for h in schema.HISTOGRAMS for p in ("count", "sum")],
        "covered_ms",
    ],
    "max": [f"{g}_max" for g in schema.GAUGES],
    "hist": list(schema.HISTOGRAMS),
}


def _model_rows(
    rows: list[Any], step: int, layouts: dict[int, tuple[float, ...]], by_bounds: dict[tuple[float, ...], int]
) -> list[dict[str, Any]]:
    ids, starts, key = _keys(rows, step)
    nk = len(ids)
    red = aggregate.reduce_rows(rows, sources.model_cols(), key, nk, MODEL_SPEC, layouts)
    out = []
    for i in range(nk):
        row: dict[str, Any] = {"model_id": int(ids[i]), "step": step, "ts": int(starts[i]), "samples": int(red.n[i])}
        for c in MODEL_SPEC["sum"]:
            row[c] = _v(red.sums[c][i])
        if row["covered_ms"] is not None:
            row["covered_ms"] = int(row["covered_ms"])  # an INTEGER column (PostgreSQL takes no float there)
        for c in MODEL_SPEC["max"]:
            row[c] = _v(red.maxes[c][i])
        for h in schema.HISTOGRAMS:
            row[f"{h}_layout"] = row[f"{h}_buckets"] = None
        out.append(row)
    for h in schema.HISTOGRAMS:
        for keys, bounds, counts in red.hists[h]:
            for j, k in enumerate(keys.tolist()):
                out[k][f"{h}_layout"] = by_bounds[bounds]
                out[k][f"{h}_buckets"] = histo.encode(counts[j].tolist())
    for row, value in zip(out, ttft_p95(red.hists["ttft"], nk), strict=True):
        row["ttft_p95_s"] = value
    return out


def ttft_p95(parts: list[tuple[np.ndarray, tuple[float, ...], np.ndarray]], nkeys: int) -> list[float | None]:
    """``model_rollups.ttft_p95_s`` per key from its merged TTFT buckets (None: no request)."""
    values = np.full(nkeys, np.nan)
    for keys, bounds, counts in parts:
        values[keys] = quantile_matrix(0.95, bounds, counts)[0]
    return [_v(v) for v in values.tolist()]


def _gpu_rows(rows: list[Any], step: int, *_: Any) -> list[dict[str, Any]]:
    ids, starts, key = _keys(rows, step)
    nk = len(ids)
    sums = [f"{f}_sum" for f in schema.GPU_FIELDS]
    red = aggregate.reduce_rows(rows, sources.GPU_COLS, key, nk, {"sum": sums, "max": ["temperature_c_max"]}, {})
    return [
        {
            "gpu_id": int(ids[i]),
            "step": step,
            "ts": int(starts[i]),
            "samples": int(red.n[i]),
            **{c: _v(red.sums[c][i]) for c in sums},
            "temperature_c_max": _v(red.maxes["temperature_c_max"][i]),
        }
        for i in range(nk)
    ]


def prune_epochs(conn: Connection, cut: int, keep: int = MAX_EPOCHS_PER_TARGET) -> int:
    """Delete configuration epochs that began before ``cut`` (the longest retention) but each
    target's latest (its configuration now), and past the newest ``keep`` of a target (a restart
    loop starts one a minute); rows deleted. One query per target over the bound, none otherwise."""
    e = schema.config_epochs
    latest = select(e.c.target_id, func.max(e.c.ts).label("ts")).group_by(e.c.target_id).subquery()
    old = conn.execute(select(e.c.target_id, e.c.ts).join(latest, latest.c.target_id == e.c.target_id)
                       .where(e.c.ts < cut, e.c.ts < latest.c.ts)).all()  # fmt: skip
    deleted = 0
    for target_id, ts in old:
        deleted += conn.execute(delete(e).where(e.c.target_id == target_id, e.c.ts == ts)).rowcount
    crowded = conn.execute(select(e.c.target_id).group_by(e.c.target_id).having(func.count() > keep)).scalars().all()
    for target_id in crowded:
        oldest_kept = conn.execute(select(e.c.ts).where(e.c.target_id == target_id).order_by(e.c.ts.desc())
                                   .offset(keep - 1).limit(1)).scalar()  # fmt: skip
        deleted += conn.execute(delete(e).where(e.c.target_id == target_id, e.c.ts < oldest_kept)).rowcount
    return deleted


def apply_retention(engine: Engine, now: float, settings: Settings) -> dict[str, int]:
    """Delete raw rows older than ``raw_retention_s`` (only once rolled up), minute rollups and the
    minutes' verdicts older than ``rollup_retention_s`` and hourly rollups older than
    ``hourly_retention_s``; rows deleted per table.

    The loader refuses retentions out of order; settings built otherwise are still read in order: a
    tier is kept at least as long as the one it is folded from, and raw rows at least a minute, so
    a bad raw retention never costs a rollup.
    """
    deleted: dict[str, int] = {}
    raw_keep = max(settings.raw_retention_s, 60.0)
    minute_keep = max(settings.rollup_retention_s, raw_keep)
    hour_keep = max(settings.hourly_retention_s, minute_keep)
    try:
        with engine.begin() as conn:
            rolled = sources.marks(conn).get(60, 0)
            raw_cut = int(min(now - raw_keep, rolled))
            for table in (schema.scrapes, schema.samples, schema.gpu_samples):
                deleted[table.name] = conn.execute(delete(table).where(table.c.ts < raw_cut)).rowcount
            for step, keep in ((60, minute_keep), (3600, hour_keep)):
                cut = int(now - keep)
                for table in (schema.target_rollups, schema.model_rollups, schema.gpu_rollups):
                    n = conn.execute(delete(table).where(table.c.step == step, table.c.ts < cut)).rowcount
                    deleted[f"{table.name}[{step}s]"] = n
            # the minutes' verdicts go with the minute rollups they judge
            verdicts = schema.verdicts
            deleted[verdicts.name] = conn.execute(delete(verdicts).where(verdicts.c.ts < int(now - minute_keep))).rowcount
            learned = schema.learned_sweet_spots  # and the learned sweet spots, learned from those minutes
            deleted[learned.name] = conn.execute(delete(learned).where(learned.c.learned_at < int(now - minute_keep))).rowcount
            deleted[schema.config_epochs.name] = prune_epochs(conn, int(now - hour_keep))
    except SQLAlchemyError as exc:
        raise storage_error("applying retention", exc) from None
    return deleted
