"""The SQL of the query layer: uniform row shapes over raw rows and rollups.

Each fetch returns tuples whose columns are named by ``*_COLS`` (whatever the level), so grouping
code never cares where a row came from. Level ``0`` = raw rows, ``60``/``3600`` = rollups. Only
fixed statements built with SQLAlchemy Core reach the database; nothing from users.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    Connection,
    Integer,
    LargeBinary,
    Table,
    and_,
    bindparam,
    cast,
    func,
    literal,
    literal_column,
    select,
)

from db import schema

RAW = 0
ONE: Any = literal_column("1")  # a raw row stands for one sample


def fetch_all(conn: Connection, stmt: Any, params: dict[str, Any] | None = None) -> list[Any]:
    """Run a Core SELECT (through SQLAlchemy's compiled-statement cache) and fetch the DBAPI
    tuples directly: SQLAlchemy's row objects cost ~2 ms per thousand wide rows, more than SQLite's
    own work, and these columns need no type conversion.
    """
    result = conn.execute(stmt, params or {})
    try:
        return list(result.cursor.fetchall()) if result.cursor is not None else []
    finally:
        result.close()


HIST_PARTS = ("count", "sum", "layout", "buckets")


def hist_cols(hists: Sequence[str], parts: Sequence[str] = HIST_PARTS) -> list[str]:
    return [f"{h}_{p}" for h in hists for p in parts]


TARGET_COLS = ["ts", "id", "n", "up_scrapes", "queue_samples", "queue_depth_sum", "queue_depth_max",
               *hist_cols((schema.GATEWAY_WAIT,))]  # the gateway's own wait histogram (0032_gateway_wait)
GAUGE_COLS = [f"{g}_{a}" for g in schema.GAUGES for a in ("sum", "max")]
GPU_COLS = ["ts", "id", "n", *[f"{f}_sum" for f in schema.GPU_FIELDS], "temperature_c_max"]


def model_cols(
    hists: Sequence[str] = schema.HISTOGRAMS, scalars: Sequence[str] | None = None, parts: Sequence[str] = HIST_PARTS
) -> list[str]:
    """Column names of :func:`fetch_models` rows (``scalars`` None = every gauge and counter, and
    the time the increases cover)."""
    chosen = [*GAUGE_COLS, *schema.COUNTERS, "covered_ms"] if scalars is None else list(scalars)
    return ["ts", "id", "n", *chosen, *hist_cols(hists, parts)]


def _range(table: Table, id_col: str, level: int | None) -> Any:
    cond = [
        table.c[id_col].in_(bindparam("ids", expanding=True)),
        table.c.ts >= bindparam("lo"),
        table.c.ts < bindparam("hi"),
    ]
    if level is not None:
        cond.append(table.c.step == level)  # a literal per cached statement: the index prefix
    return and_(*cond)


def _run(conn: Connection, stmt: Any, ids: Sequence[int], lo: int, hi: int) -> list[Any]:
    return fetch_all(conn, stmt, {"ids": list(ids), "lo": lo, "hi": hi})


@lru_cache(maxsize=64)
def _targets_stmt(level: int) -> Any:
    # Statements are built once per shape and reused: building and keying a SELECT costs more
    # than SQLite's work for a day of minutes.
    if level == RAW:
        s = schema.scrapes
        q = s.c.queue_depth
        cols = [s.c.ts, s.c.target_id, ONE, s.c.up, (q.is_not(None)).cast(Integer), q, q,
                *[s.c[c] for c in TARGET_COLS[7:]]]
        return select(*cols).where(_range(s, "target_id", None)).order_by(s.c.ts)
    r = schema.target_rollups
    cols = [
        r.c.ts,
        r.c.target_id,
        r.c.scrapes,
        r.c.up_scrapes,
        r.c.queue_samples,
        r.c.queue_depth_sum,
        r.c.queue_depth_max,
        *[r.c[c] for c in TARGET_COLS[7:]],
    ]
    return select(*cols).where(_range(r, "target_id", level)).order_by(r.c.ts)


def fetch_targets(conn: Connection, level: int, ids: Sequence[int], lo: int, hi: int) -> list[Any]:
    """Scrape health and gateway queue depth rows in [lo, hi)."""
    return _run(conn, _targets_stmt(level), ids, lo, hi)


@lru_cache(maxsize=256)
def _models_stmt(level: int, names: tuple[str, ...]) -> Any:
    if level == RAW:
        s = schema.samples
        # raw rows stand for one sample: a gauge's sum and max are the value itself
        cols = [s.c[c.rsplit("_", 1)[0]] if c in GAUGE_COLS else s.c[c] for c in names]
        return select(s.c.ts, s.c.model_id, ONE, *cols).where(_range(s, "model_id", None)).order_by(s.c.ts)
    r = schema.model_rollups
    cols = [r.c[c] for c in names]
    return select(r.c.ts, r.c.model_id, r.c.samples, *cols).where(_range(r, "model_id", level)).order_by(r.c.ts)


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
    names = tuple(model_cols(hists, scalars, parts)[3:])
    return _run(conn, _models_stmt(level, names), ids, lo, hi)


@lru_cache(maxsize=16)
def _gpus_stmt(level: int) -> Any:
    if level == RAW:
        s, g = schema.gpu_samples, schema.gpus
        cols = [s.c.ts, s.c.gpu_id, ONE, *[s.c[f] for f in schema.GPU_FIELDS], s.c.temperature_c]
        # raw rows are keyed (target_id, ts, gpu_id): naming the GPUs' targets makes the read one
        # range scan per target, already in ts order
        owners = select(g.c.target_id).where(g.c.id.in_(bindparam("ids", expanding=True)))
        return select(*cols).where(s.c.target_id.in_(owners), _range(s, "gpu_id", None)).order_by(s.c.ts)
    r = schema.gpu_rollups
    cols = [r.c.ts, r.c.gpu_id, r.c.samples, *[r.c[f"{f}_sum"] for f in schema.GPU_FIELDS], r.c.temperature_c_max]
    return select(*cols).where(_range(r, "gpu_id", level)).order_by(r.c.ts)


def fetch_gpus(conn: Connection, level: int, ids: Sequence[int], lo: int, hi: int) -> list[Any]:
    """Per-GPU rows in [lo, hi) with columns ``GPU_COLS``."""
    return _run(conn, _gpus_stmt(level), ids, lo, hi)


@lru_cache(maxsize=64)
def _hist_stmt(level: int, hist: str, dialect: str, by_model: bool) -> Any:
    table = schema.samples if level == RAW else schema.model_rollups
    blob, layout = table.c[f"{hist}_buckets"], table.c[f"{hist}_layout"]
    group = (table.c.ts - bindparam("start")) // bindparam("step")
    if dialect == "postgresql":
        joined = func.string_agg(blob, literal(b"", LargeBinary))
    else:  # SQLite: group_concat keeps every byte of a blob; the cast returns it as a blob
        joined = func.group_concat(blob, "")
    where = and_(_range(table, "model_id", None if level == RAW else level), blob.is_not(None))
    keys = (table.c.model_id, group, layout) if by_model else (group, layout)
    return select(*keys, cast(joined, LargeBinary)).where(where).group_by(*keys)


def fetch_hist_grouped(
    conn: Connection, level: int, ids: Sequence[int], span: tuple[int, int, int, int], hist: str, by_model: bool = False
) -> list[Any]:
    """``(step index, layout id, concatenated packed blobs)`` per step and layout in [lo, hi);
    ``by_model``: per model too, ``(model id, step index, layout id, blobs)`` (several targets).

    ``span`` = (lo, hi, start, step). The database concatenates the blobs of each step (they add
    up, see :mod:`db.histo`), so a week of minutes reaches Python as one row per step.
    """
    lo, hi, start, step = span
    stmt = _hist_stmt(level, hist, conn.dialect.name, by_model)
    return fetch_all(conn, stmt, {"ids": list(ids), "lo": lo, "hi": hi, "start": start, "step": step})


def layouts(conn: Connection) -> dict[int, tuple[float, ...]]:
    """Every bucket layout by id (a handful of rows)."""
    from db.histo import bounds_from_key

    b = schema.bucket_layouts
    return {int(i): bounds_from_key(t) for i, t in conn.execute(select(b.c.id, b.c.bounds))}


def marks(conn: Connection) -> dict[int, int]:
    """Per rollup step, the time before which rollups are complete."""
    m = schema.rollup_marks
    return {int(s): int(u) for s, u in conn.execute(select(m.c.step, m.c.until_ts))}


def latest_sample(conn: Connection, ids: Sequence[int], lo: int, hi: int, columns: Sequence[str]) -> Any:
    """The named columns of the newest raw row of these models in [lo, hi) (None when there is none).

    Raw rows only: a state (sleep) is read as it last was, which a rollup's max would not say; a
    window older than raw retention has no such row, and its state is unknown.
    """
    if not ids:
        return None
    s = schema.samples
    stmt = (select(*[s.c[c] for c in columns]).where(_range(s, "model_id", None))
            .order_by(s.c.ts.desc()).limit(1))
    rows = fetch_all(conn, stmt, {"ids": list(ids), "lo": lo, "hi": hi})
    return rows[0] if rows else None
