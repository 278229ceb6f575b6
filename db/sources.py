"""The SQL of the query layer: uniform row shapes over raw rows and rollups.

Each fetch returns tuples whose columns are named by ``*_COLS`` (whatever the level), so grouping
code never cares where a row came from. Level ``0`` = raw rows, ``60``/``3600`` = rollups. Only
fixed statements built with SQLAlchemy Core reach the database; nothing from users.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Table, and_, literal, select

from db import schema

RAW = 0
QUERY_HISTS = ("ttft", "itl", "e2e")


def fetch_all(conn: Connection, stmt: Any) -> list[Any]:
    """Run a Core SELECT (through SQLAlchemy's compiled-statement cache) and fetch the DBAPI
    tuples directly: SQLAlchemy's row objects cost ~2 ms per thousand wide rows, more than SQLite's
    own work, and these columns need no type conversion.
    """
    result = conn.execute(stmt)
    try:
        return list(result.cursor.fetchall()) if result.cursor is not None else []
    finally:
        result.close()


HIST_PARTS = ("count", "sum", "layout", "buckets")
QUANTILE_PARTS = ("layout", "buckets")  # all a quantile needs (and what the covering index holds)


def hist_cols(hists: Sequence[str], parts: Sequence[str] = HIST_PARTS) -> list[str]:
    return [f"{h}_{p}" for h in hists for p in parts]


TARGET_COLS = ["ts", "id", "n", "up_scrapes", "queue_samples", "queue_depth_sum", "queue_depth_max"]
GAUGE_COLS = [f"{g}_{a}" for g in schema.GAUGES for a in ("sum", "max")]
GPU_COLS = ["ts", "id", "n", *[f"{f}_sum" for f in schema.GPU_FIELDS], "temperature_c_max"]


def model_cols(
    hists: Sequence[str] = schema.HISTOGRAMS, scalars: Sequence[str] | None = None, parts: Sequence[str] = HIST_PARTS
) -> list[str]:
    """Column names of :func:`fetch_models` rows (``scalars`` None = every gauge and counter)."""
    chosen = [*GAUGE_COLS, *schema.COUNTERS] if scalars is None else list(scalars)
    return ["ts", "id", "n", *chosen, *hist_cols(hists, parts)]


def _range(table: Table, id_col: str, ids: Sequence[int], lo: int, hi: int, step: int | None) -> Any:
    cond = [table.c[id_col].in_(list(ids)), table.c.ts >= lo, table.c.ts < hi]
    if step is not None:
        cond.append(table.c.step == step)
    return and_(*cond)


def fetch_targets(conn: Connection, level: int, ids: Sequence[int], lo: int, hi: int) -> list[Any]:
    """Scrape health and gateway queue depth rows in [lo, hi)."""
    if level == RAW:
        s = schema.scrapes
        q = s.c.queue_depth
        stmt = select(s.c.ts, s.c.target_id, literal(1), s.c.up, (q.is_not(None)).cast(schema.Integer), q, q).where(
            _range(s, "target_id", ids, lo, hi, None)
        )
    else:
        r = schema.target_rollups
        stmt = select(
            r.c.ts,
            r.c.target_id,
            r.c.scrapes,
            r.c.up_scrapes,
            r.c.queue_samples,
            r.c.queue_depth_sum,
            r.c.queue_depth_max,
        ).where(_range(r, "target_id", ids, lo, hi, level))
    return fetch_all(conn, stmt.order_by("ts"))


def fetch_models(
    conn: Connection,
    level: int,
    ids: Sequence[int],
    lo: int,
    hi: int,
    hists: Sequence[str] = schema.HISTOGRAMS,
    scalars: Sequence[str] | None = None,
    parts: Sequence[str] = HIST_PARTS,
) -> list[Any]:
    """Per-model rows in [lo, hi) named by :func:`model_cols` (fetch only what a query needs)."""
    names = model_cols(hists, scalars, parts)[3:]
    if level == RAW:
        s = schema.samples
        # raw rows stand for one sample: a gauge's sum and max are the value itself
        cols = [s.c[c.rsplit("_", 1)[0]] if c in GAUGE_COLS else s.c[c] for c in names]
        stmt = select(s.c.ts, s.c.model_id, literal(1), *cols).where(_range(s, "model_id", ids, lo, hi, None))
    else:
        r = schema.model_rollups
        stmt = select(r.c.ts, r.c.model_id, r.c.samples, *[r.c[c] for c in names]).where(
            _range(r, "model_id", ids, lo, hi, level)
        )
    return fetch_all(conn, stmt.order_by("ts"))


def fetch_gpus(conn: Connection, level: int, ids: Sequence[int], lo: int, hi: int) -> list[Any]:
    """Per-GPU rows in [lo, hi) with columns ``GPU_COLS``."""
    if level == RAW:
        s = schema.gpu_samples
        stmt = select(s.c.ts, s.c.gpu_id, literal(1), *[s.c[f] for f in schema.GPU_FIELDS], s.c.temperature_c).where(
            _range(s, "gpu_id", ids, lo, hi, None)
        )
    else:
        r = schema.gpu_rollups
        stmt = select(
            r.c.ts, r.c.gpu_id, r.c.samples, *[r.c[f"{f}_sum"] for f in schema.GPU_FIELDS], r.c.temperature_c_max
        ).where(_range(r, "gpu_id", ids, lo, hi, level))
    return fetch_all(conn, stmt.order_by("ts"))


def layouts(conn: Connection) -> dict[int, tuple[float, ...]]:
    """Every bucket layout by id (a handful of rows)."""
    from db.histo import bounds_from_key

    b = schema.bucket_layouts
    return {int(i): bounds_from_key(t) for i, t in conn.execute(select(b.c.id, b.c.bounds))}


def marks(conn: Connection) -> dict[int, int]:
    """Per rollup step, the time before which rollups are complete."""
    m = schema.rollup_marks
    return {int(s): int(u) for s, u in conn.execute(select(m.c.step, m.c.until_ts))}
