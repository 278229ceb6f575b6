"""The one writer: turns scrape rounds into rows (one transaction per round, or per batch).

Counters are stored as per-scrape *increases*, reset-aware: a decrease, a change of the counter's
``*_created`` timestamp or of ``process_start_time_s`` means vLLM restarted, and the increase is the
new value (never negative, never a spike). A histogram whose bucket layout changed gets no increase
for that scrape; the new layout is used from then on. The first observation of a series, or one after
a gap longer than ``max_gap_s``, is a baseline: its increase is unknown (NULL), so a collector that was
down for hours never dumps hours of tokens into one 5-second scrape. The cumulative values needed to
resume live in ``series_state``; a restarted collector continues from them.

A failed vLLM scrape stores a ``scrapes`` row with ``up = 0`` and the error, and nothing else for vLLM
(no zero-filled samples).
"""

from __future__ import annotations

import json
import logging
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

from sqlalchemy import Connection, Engine, bindparam, func, select, update
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

from app.settings import TargetSettings
from collectors.records import GpuReading, ModelFigures, ScrapeRound, VllmScrape
from db import histo, schema
from db.engine import is_sqlite, storage_error
from db.state import SeriesState, counter_increase, histogram_increase

log = logging.getLogger(__name__)
Row = dict[str, Any]
# rows to insert per table, each a sequence of values in _COLUMNS order
_Rows = dict[str, list[Sequence[Any]]]
BATCH_ROUNDS = 1000

# Statements built once: building and cache-keying one costs more than SQLite's insert.
_INSERTS = {
    "scrapes": schema.scrapes.insert(),
    "samples": schema.samples.insert(),
    "gpu_samples": schema.gpu_samples.insert(),
}
# Rows are built as tuples in these column orders (no dict per row, no key conversion per insert).
_COLUMNS = {
    "scrapes": ("target_id", "ts", "up", "error", "duration_ms", "queue_depth", "gateway_error", "gpu_error"),
    "samples": (
        "model_id", "ts", *schema.GAUGES, *schema.COUNTERS,
        *(f"{h}_{part}" for h in schema.HISTOGRAMS for part in ("layout", "count", "sum", "buckets")),
        "covered_ms",
    ),
    "gpu_samples": ("target_id", "ts", "gpu_id", *schema.GPU_FIELDS),
}
# one attrgetter call per GPU instead of a getattr per field: 8 GPUs × 6 fields every round
_GPU_VALUES = operator.attrgetter(*schema.GPU_FIELDS)
_STATE = schema.series_state
_STATE_UPDATE = (
    update(_STATE)
    .where(_STATE.c.model_id == bindparam("m"))
    .values(ts=bindparam("new_ts"), state=bindparam("new_state"))
)
_STATE_INSERT = _STATE.insert().values(model_id=bindparam("m"), ts=bindparam("new_ts"), state=bindparam("new_state"))


class _DriverStatements:
    """The per-round statements compiled once for this engine's driver, run on its DBAPI cursor.

    Through ``Connection.execute`` each statement of a round paid ~30-50 µs of SQLAlchemy bookkeeping
    (cache lookup, parameter processing, result set-up) for a SQLite insert of ~10 µs; a vLLM-only
    round runs four of them. The SQL is SQLAlchemy's own compilation for the dialect (casts included
    on PostgreSQL), so the rows stored are the same; none of these columns has a bind processor.
    """

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.errors: type[Exception] = dialect.loaded_dbapi.Error
        self._compiled: dict[tuple[int, tuple[str, ...]], tuple[str, Callable[[Any], Any] | None]] = {}

    def run(self, cursor: Any, stmt: ClauseElement, rows: Sequence[Row]) -> int:
        """Execute ``stmt`` once per row of named parameters (one executemany); returns the rowcount."""
        key = (id(stmt), tuple(rows[0]))
        entry = self._compiled.get(key)
        if entry is None:
            compiled = self._compile(stmt, None)
            getter: Callable[[Any], Any] | None = None
            if self.dialect.positional:  # SQLite's qmark: tuples in the compiled order
                getter = _getter(list(compiled.positiontup or []))
            entry = self._compiled[key] = (str(compiled), getter)
        return self._execute(cursor, entry, rows)

    def insert(self, cursor: Any, stmt: ClauseElement, columns: tuple[str, ...], rows: Sequence[Sequence[Any]]) -> None:
        """Insert ``rows``, each a sequence of values in ``columns`` order (one executemany).

        On SQLite the compiled order is the columns' own (the table's) order: the rows go to the
        driver as built. Elsewhere they are reordered, or named (psycopg's named parameters).
        """
        key = (id(stmt), columns)
        entry = self._compiled.get(key)
        if entry is None:
            # the columns given, as Connection.execute would compile them for rows with these keys
            compiled = self._compile(stmt, list(columns))
            getter: Callable[[Any], Any] | None
            if self.dialect.positional:
                order = list(compiled.positiontup or [])
                getter = None if order == list(columns) else _getter([columns.index(name) for name in order])
            else:
                getter = lambda row: dict(zip(columns, row, strict=True))  # noqa: E731
            entry = self._compiled[key] = (str(compiled), getter)
        self._execute(cursor, entry, rows)

    def _compile(self, stmt: ClauseElement, column_keys: list[str] | None) -> SQLCompiler:
        compiled = cast(SQLCompiler, stmt.compile(dialect=self.dialect, column_keys=column_keys))
        if compiled.escaped_bind_names:  # not the case for our plain names; keep the mapping simple
            raise AssertionError(f"unexpected escaped bind names in {compiled}")
        return compiled

    @staticmethod
    def _execute(cursor: Any, entry: tuple[str, Callable[[Any], Any] | None], rows: Sequence[Any]) -> int:
        sql, getter = entry
        params = [getter(r) for r in rows] if getter is not None else rows
        if len(params) == 1:
            cursor.execute(sql, params[0])
        else:
            cursor.executemany(sql, params)
        return int(cursor.rowcount)


def _getter(keys: list[Any]) -> Callable[[Any], tuple[Any, ...]]:
    """A row's values at ``keys`` (names or indices), as a tuple even for one key."""
    if len(keys) == 1:
        only = keys[0]
        return lambda row: (row[only],)
    return operator.itemgetter(*keys)


def gateway_source(target: TargetSettings) -> str:
    """A one-line description of where queue depth comes from (stored for the UI)."""
    g = target.gateway
    if g.kind == "none":
        return "none"
    what = g.metric if g.kind == "prometheus" else g.json_path
    return " ".join(x for x in (g.preset and f"[{g.preset}]", g.kind, g.url, what) if x)


class Writer:
    """The single writer of one database. Not thread-safe: one collector process owns it."""

    def __init__(self, engine: Engine, max_gap_s: float = 600.0) -> None:
        self.engine = engine
        self.max_gap_s = max_gap_s
        self._targets: dict[str, int] = {}
        self._models: dict[tuple[int, str], int] = {}
        self._gpus: dict[tuple[int, str], tuple[int, tuple]] = {}
        self._layouts: dict[tuple[float, ...], int] = {}
        self._states: dict[int, SeriesState] = {}
        self._target_meta: dict[int, tuple[Any, ...]] = {}  # (used, missing, cache_config, engine, lora)
        # target → (the last GPU readings written, their rows without target and ts): dcgm.parse_dcgm
        # hands out the same tuple while the exporter serves the same page (5 rounds out of 6)
        self._gpu_rows: dict[int, tuple[tuple[GpuReading, ...], list[tuple[Any, ...]]]] = {}
        self._dirty: set[int] = set()
        self._last_ts: dict[int, int] = {}
        # target → its last round that stored model rows: (row ts, the round's start as the clock
        # gave it, None when loaded from the database, which keeps whole seconds only)
        self._last_up: dict[int, tuple[int, float | None] | None] = {}
        self._too_wide_seen: set[tuple[int, str]] = set()  # (model, histogram) warned of once
        self._skipped: dict[int, int] = {}  # target → rounds skipped in a row (already stored)
        self._conn: Connection | None = None
        self._driver = _DriverStatements(engine.dialect)
        self._sqlite = is_sqlite(engine)

    def _connection(self) -> Connection:
        # One kept connection: checking one out of the pool per round cost ~0.2 ms of CPU.
        if self._conn is None or self._conn.closed:
            self._conn = self.engine.connect()
        return self._conn

    def close(self) -> None:
        """Release the writer's connection (the engine stays usable)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- public API -------------------------------------------------------------------------------
    def register_target(self, target: TargetSettings) -> int:
        """Insert or update a target's configuration row; returns its id."""
        values = {
            "vllm_url": target.vllm_url,
            "gateway_source": gateway_source(target),
            "gpu_source": target.gpu.source + (f" {target.gpu.url}" if target.gpu.url else ""),
            "weight_gb": target.ceiling.weight_gb,
            "tensor_parallel": target.ceiling.tensor_parallel,
            "bandwidth_gbps": target.ceiling.bandwidth_gbps,
        }
        try:
            conn = self._connection()
            with conn.begin():
                target_id = self._target_id(conn, target.name)
                conn.execute(update(schema.targets).where(schema.targets.c.id == target_id).values(**values))
        except SQLAlchemyError as exc:
            self._forget_caches()
            self.close()
            raise storage_error(f"registering target {target.name!r}", exc) from None
        return target_id

    def write_round(self, round_: ScrapeRound) -> None:
        """Write one round in one transaction (all of it or nothing)."""
        self.write_rounds((round_,))

    def write_rounds(self, rounds: Iterable[ScrapeRound], batch: int = BATCH_ROUNDS) -> int:
        """Write rounds in transactions of ``batch`` rounds (backfill); returns the rounds written."""
        written = 0
        pending: list[ScrapeRound] = []
        for round_ in rounds:
            pending.append(round_)
            if len(pending) >= batch:
                written += self._write_batch(pending)
                pending = []
        if pending:
            written += self._write_batch(pending)
        return written

    # -- batches ----------------------------------------------------------------------------------
    def _write_batch(self, rounds: list[ScrapeRound]) -> int:
        rows: _Rows = {"scrapes": [], "samples": [], "gpu_samples": []}
        try:
            conn = self._connection()
            if all(map(self._all_cached, rounds)):
                kept = self._write_on_driver(conn, rounds, rows)
            else:
                with conn.begin():
                    kept = sum(self._collect(conn, round_, rows) for round_ in rounds)
                    # The DBAPI cursor inside SQLAlchemy's transaction: same BEGIN, same commit.
                    cursor = conn.connection.cursor()
                    try:
                        self._insert_rows(cursor, rows)
                    finally:
                        cursor.close()
        except (SQLAlchemyError, self._driver.errors) as exc:
            self._rolled_back()
            raise storage_error("writing a scrape round", exc) from None
        except Exception:
            self._rolled_back()  # not the database's doing (a value its rows cannot hold), but rolled back all the same
            raise
        return kept

    def _rolled_back(self) -> None:
        """The transaction rolled back, series_state with it: forget the in-memory state so the next
        round reloads the last committed one (rare, so no per-round snapshot)."""
        self._states.clear()
        self._forget_caches()
        self.close()

    def _write_on_driver(self, conn: Connection, rounds: list[ScrapeRound], rows: _Rows) -> int:
        """The steady state (every id, layout and state cached): the transaction on the DBAPI connection.

        SQLAlchemy's begin/commit costs ~0.03 ms of CPU in a tight loop but ~0.27 ms in a real round,
        after the process slept through the scrape (cold caches), against ~0.10 ms for the driver's.
        _all_cached guarantees _collect issues no statement through SQLAlchemy here.
        """
        dbapi = conn.connection.dbapi_connection
        assert dbapi is not None
        cursor = dbapi.cursor()
        try:
            if self._sqlite:
                cursor.execute("BEGIN")  # as db/engine.py's begin hook does: the round is one transaction
            kept = sum(self._collect(conn, round_, rows) for round_ in rounds)
            self._insert_rows(cursor, rows)
            dbapi.commit()
        except BaseException:
            dbapi.rollback()
            raise
        finally:
            cursor.close()
        return kept

    def _insert_rows(self, cursor: Any, rows: _Rows) -> None:
        for name, stmt in _INSERTS.items():
            if rows[name]:
                self._driver.insert(cursor, stmt, _COLUMNS[name], rows[name])
        self._save_states(cursor)

    def _all_cached(self, round_: ScrapeRound) -> bool:
        """True when writing ``round_`` needs no look-up or update beyond its inserts (read-only check)."""
        target_id = self._targets.get(round_.target)
        if target_id is None or target_id not in self._last_ts:
            return False
        if round_.vllm_status.ok and round_.vllm is not None:
            scrape = round_.vllm
            if not _meta_unchanged(self._target_meta.get(target_id), scrape):
                return False
            layouts = self._layouts
            for name, figures in scrape.models.items():
                model_id = self._models.get((target_id, name))
                if model_id is None or model_id not in self._states:
                    return False
                histograms = figures.histograms
                for key in schema.HISTOGRAMS:
                    hist = histograms.get(key)
                    # (a histogram too wide to store has no layout, and needs none: see _sample_row)
                    if hist is not None and hist.bounds not in layouts and len(hist.bounds) <= histo.MAX_BUCKETS:
                        return False
        known = self._gpu_rows.get(target_id)
        if known is not None and known[0] is round_.gpus:
            return True  # the readings written last round: ids and meta checked then
        for gpu in round_.gpus:
            cached = self._gpus.get((target_id, gpu.uuid))
            if cached is None or cached[1] != _gpu_meta(gpu):
                return False
        return True

    def _forget_caches(self) -> None:
        self._targets.clear()
        self._models.clear()
        self._gpus.clear()
        self._layouts.clear()
        self._target_meta.clear()
        self._gpu_rows.clear()
        self._dirty.clear()
        self._last_ts.clear()
        self._last_up.clear()

    def _collect(self, conn: Connection, round_: ScrapeRound, rows: _Rows) -> bool:
        """Queue the round's rows; False (nothing queued) when the target already has a round at or after it.

        Rows are keyed by whole seconds: a second round in the same second (``collect --once`` run
        twice, a clock step back) is skipped with a warning rather than failing the batch. Its
        counter increases are not lost: the next stored round's increase covers them.
        """
        target_id = self._target_id(conn, round_.target)
        ts = int(round(round_.ts))
        if target_id not in self._last_ts:
            s, m = schema.scrapes, schema.models
            last = conn.execute(select(func.max(s.c.ts)).where(s.c.target_id == target_id)).scalar()
            its_models = select(m.c.id).where(m.c.target_id == target_id)
            last_rows = select(func.max(schema.samples.c.ts)).where(schema.samples.c.model_id.in_(its_models))
            last_up = conn.execute(last_rows).scalar()
            self._last_ts[target_id] = last or 0
            self._last_up[target_id] = None if last_up is None else (int(last_up), None)
        if ts <= self._last_ts[target_id]:
            # Said once per run of skipped rounds: a clock stepped back an hour skips 720 of them.
            skipped = self._skipped[target_id] = self._skipped.get(target_id, 0) + 1
            if skipped == 1:
                log.warning("%s: a round at %d is already stored (latest %d); this one is skipped, and so "
                            "will be any until the clock passes it", round_.target, ts, self._last_ts[target_id])
            return False
        if self._skipped.get(target_id):
            log.info("%s: storing rounds again after %d skipped", round_.target, self._skipped.pop(target_id))
        self._last_ts[target_id] = ts
        rows["scrapes"].append(_scrape_row(target_id, ts, round_))
        if round_.vllm_status.ok and round_.vllm is not None:
            scrape = round_.vllm
            self._update_target_meta(conn, target_id, scrape)
            # (a page without models stores no row: the next round's rows cover its time as well)
            shares = _shares(self._covered_ms(target_id, ts, round_.ts), len(scrape.models)) if scrape.models else []
            for (name, figures), share in zip(scrape.models.items(), shares, strict=True):
                model_id = self._model_id(conn, target_id, name)
                rows["samples"].append(self._sample_row(conn, model_id, ts, figures, scrape.process_start_time_s, share))
        rows["gpu_samples"] += [(target_id, ts, *tail) for tail in self._gpu_tails(conn, target_id, round_.gpus, ts)]
        return True

    def _covered_ms(self, target_id: int, ts: int, started: float) -> int | None:
        """Milliseconds from the target's previous round that stored model rows (its previous
        successful scrape, but for a page without models) to this one: the time this round's
        increases cover. None when they are unknown (none before, or a gap over max_gap_s, as the
        model states decide). From the clock's own times when this writer stored that
        scrape: rows are keyed by whole seconds, which would make a 5 s interval 4 or 6 s now and then."""
        last = self._last_up.get(target_id)
        self._last_up[target_id] = (ts, started)
        if last is None or ts - last[0] > self.max_gap_s:
            return None
        previous_ts, previous_start = last
        if previous_start is None:
            return (ts - previous_ts) * 1000
        return int(round((started - previous_start) * 1000))

    def _gpu_tails(self, conn: Connection, target_id: int, gpus: tuple[GpuReading, ...], ts: int) -> list[tuple[Any, ...]]:
        """Each GPU's row after its target and ts: (gpu id, *GPU_FIELDS); the same readings as the
        last round's (the very tuple) reuse that round's, their ids and meta checked then."""
        known = self._gpu_rows.get(target_id)
        if known is not None and known[0] is gpus:
            return known[1]
        tails = [(self._gpu_id(conn, target_id, gpu, ts), *_GPU_VALUES(gpu)) for gpu in gpus]
        self._gpu_rows[target_id] = (gpus, tails)
        return tails

    # -- samples and state ------------------------------------------------------------------------
    def _sample_row(
        self,
        conn: Connection,
        model_id: int,
        ts: int,
        figures: ModelFigures,
        process_start: float | None,
        covered_ms: int | None,
    ) -> list[Any]:
        """The model's ``samples`` row, in ``_COLUMNS["samples"]`` order; advances its state.

        ``covered_ms``: the model's share of the time the round's increases cover (see _shares)."""
        state = self._state(conn, model_id)
        fresh = state.ts is None or ts - state.ts > self.max_gap_s
        restarted = state.restarted(process_start)
        row: list[Any] = [model_id, ts, *map(figures.gauges.get, schema.GAUGES)]
        counters, created, histograms = figures.counters.get, figures.created.get, figures.histograms.get
        for key in schema.COUNTERS:
            row.append(counter_increase(state, key, counters(key), created(key), restarted, fresh))
        for key in schema.HISTOGRAMS:
            hist = histograms(key)
            if hist is not None and len(hist.bounds) > histo.MAX_BUCKETS:
                self._too_wide(model_id, key, len(hist.bounds))
                hist = None
            layout = self._layout_id(conn, hist.bounds) if hist is not None else None
            inc = histogram_increase(state, key, hist, layout, created(key), restarted, fresh)
            if inc is None:
                row += (layout, None, None, None)
            else:
                row += (layout, inc[0], inc[1], histo.pack(inc[2]))
        row.append(covered_ms)
        state.ts = ts
        state.process_start = process_start
        self._dirty.add(model_id)
        return row

    def _too_wide(self, model_id: int, key: str, buckets: int) -> None:
        """A histogram whose buckets the packing cannot index (8 bits): not stored, said once."""
        if (model_id, key) not in self._too_wide_seen:
            self._too_wide_seen.add((model_id, key))
            name = next((m for (_, m), i in self._models.items() if i == model_id), str(model_id))
            log.warning("model %s: the %s histogram has %d buckets, more than the %d that can be stored; "
                        "its increases are left unknown", name, key, buckets, histo.MAX_BUCKETS)

    def _state(self, conn: Connection, model_id: int) -> SeriesState:
        state = self._states.get(model_id)
        if state is None:
            text = conn.execute(
                select(schema.series_state.c.state).where(schema.series_state.c.model_id == model_id)
            ).scalar()
            state = SeriesState.from_text(text) if text else SeriesState()
            self._states[model_id] = state
        return state

    def _save_states(self, cursor: Any) -> None:
        for model_id in sorted(self._dirty):
            state = self._states[model_id]
            params = {"m": model_id, "new_ts": state.ts, "new_state": state.to_text()}
            if not self._driver.run(cursor, _STATE_UPDATE, (params,)):
                self._driver.run(cursor, _STATE_INSERT, (params,))
        self._dirty.clear()

    # -- id lookups (cached) ----------------------------------------------------------------------
    def _target_id(self, conn: Connection, name: str) -> int:
        if name not in self._targets:
            t = schema.targets
            found = conn.execute(select(t.c.id).where(t.c.name == name)).scalar()
            if found is None:
                found = _insert_id(conn, t.insert().values(name=name, vllm_url=""))
            self._targets[name] = int(found)
        return self._targets[name]

    def _model_id(self, conn: Connection, target_id: int, name: str) -> int:
        key = (target_id, name)
        if key not in self._models:
            m = schema.models
            found = conn.execute(select(m.c.id).where(m.c.target_id == target_id, m.c.name == name)).scalar()
            if found is None:
                found = _insert_id(conn, m.insert().values(target_id=target_id, name=name))
            self._models[key] = int(found)
        return self._models[key]

    def _layout_id(self, conn: Connection, bounds: tuple[float, ...]) -> int:
        cached = self._layouts.get(bounds)  # keyed by the tuple: no JSON per histogram per round
        if cached is None:
            key = histo.bounds_key(bounds)
            b = schema.bucket_layouts
            found = conn.execute(select(b.c.id).where(b.c.bounds == key)).scalar()
            if found is None:
                found = _insert_id(conn, b.insert().values(bounds=key))
            cached = self._layouts[bounds] = int(found)
        return cached

    def _gpu_id(self, conn: Connection, target_id: int, gpu: GpuReading, ts: int) -> int:
        meta = _gpu_meta(gpu)
        cached = self._gpus.get((target_id, gpu.uuid))
        if cached is not None and cached[1] == meta:
            return cached[0]
        g = schema.gpus
        values = dict(
            zip(("gpu_index", "name", "host", "peak_bw_gbps", "peak_bw_source", "dram_bw_source"), meta, strict=True)
        )
        found = conn.execute(select(g.c.id).where(g.c.target_id == target_id, g.c.uuid == gpu.uuid)).scalar()
        if found is None:
            found = _insert_id(conn, g.insert().values(target_id=target_id, uuid=gpu.uuid, last_seen=ts, **values))
        else:
            conn.execute(update(g).where(g.c.id == found).values(last_seen=ts, **values))
        self._gpus[(target_id, gpu.uuid)] = (int(found), meta)
        return int(found)

    def _update_target_meta(self, conn: Connection, target_id: int, scrape: VllmScrape) -> None:
        if _meta_unchanged(self._target_meta.get(target_id), scrape):
            return
        used, missing, cache = dict(scrape.metric_names_used), tuple(scrape.missing), dict(scrape.cache_config)
        t = schema.targets
        values = {
            "metric_names_used": json.dumps(used, sort_keys=True),
            "missing_metrics": json.dumps(list(missing)),
            "cache_config": json.dumps(cache, sort_keys=True),
            "engine": scrape.engine,
            "lora": json.dumps(dict(scrape.lora), sort_keys=True) if scrape.lora else None,
        }
        conn.execute(update(t).where(t.c.id == target_id).values(**values))
        self._target_meta[target_id] = (used, missing, cache, scrape.engine, dict(scrape.lora))


def _meta_unchanged(seen: tuple[Any, ...] | None, scrape: VllmScrape) -> bool:
    # mappings compared as mappings (order aside, as the JSON is sorted): this runs twice a round,
    # the JSON only when something changed
    return (
        seen is not None
        and seen[1] == tuple(scrape.missing)
        and seen[0] == scrape.metric_names_used
        and seen[2] == scrape.cache_config
        and seen[3] == scrape.engine
        and seen[4] == scrape.lora
    )


def _gpu_meta(gpu: GpuReading) -> tuple:
    return (gpu.index, gpu.name, gpu.host, gpu.peak_bw_gbps, gpu.peak_bw_source, gpu.dram_bw_source)


def _insert_id(conn: Connection, stmt: Any) -> int:
    key = conn.execute(stmt).inserted_primary_key
    assert key is not None
    return int(key[0])


def _shares(covered_ms: int | None, models: int) -> list[int | None]:
    """The time a round's increases cover, split among its models' rows so that the rows of any set
    of rounds add up to the time those rounds cover, whatever models they had (the first row takes
    the remainder): a target's rate is then its models' increases ÷ the sum over its rows, read from
    the model rows alone (docs/storage.md)."""
    if covered_ms is None or models == 0:
        return [None] * models
    each, rest = divmod(covered_ms, models)
    return [each + rest, *[each] * (models - 1)]


def _scrape_row(target_id: int, ts: int, round_: ScrapeRound) -> tuple[Any, ...]:
    """The round's ``scrapes`` row, in ``_COLUMNS["scrapes"]`` order."""
    gateway, gateway_status, gpu_status = round_.gateway, round_.gateway_status, round_.gpu_status
    gw_ok = gateway_status is None or gateway_status.ok
    return (
        target_id,
        ts,
        1 if round_.vllm_status.ok else 0,
        round_.vllm_status.error,
        int(round(round_.vllm_status.duration_s * 1000)),
        gateway.queue_depth if gateway is not None and gw_ok else None,
        gateway_status.error if gateway_status else None,
        gpu_status.error if gpu_status else None,
    )
