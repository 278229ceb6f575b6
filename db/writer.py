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
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, Engine, func, insert, select, update
from sqlalchemy.exc import SQLAlchemyError

from collectors.records import GpuReading, ModelFigures, ScrapeRound, VllmScrape
from core.redact import masked
from core.settings import TargetSettings
from core.text import named
from db import histo, schema
from db.engine import write_transaction
from db.epochs import EpochTracker
from db.errors import storage_error
from db.future import STEP_BACK_S, move_future
from db.state import SeriesState, counter_increase, histogram_increase

log = logging.getLogger(__name__)
Row = dict[str, Any]
_Rows = dict[str, list[Row]]  # rows to insert, by table name
BATCH_ROUNDS = 1000
_TABLES = {"scrapes": schema.scrapes, "samples": schema.samples, "gpu_samples": schema.gpu_samples}
_GPU_META = ("gpu_index", "name", "host", "peak_bw_gbps", "peak_bw_source", "dram_bw_source")


def gateway_source(target: TargetSettings) -> str:
    """A one-line description of where queue depth comes from (stored for the UI), the URL's password masked."""
    g = target.gateway
    if g.kind == "none":
        return "none"
    what = g.metric if g.kind == "prometheus" else g.json_path
    wait = g.wait_metric.strip() if g.kind == "prometheus" and g.wait_metric.strip() not in ("", "none") else ""
    return " ".join(x for x in (g.preset and f"[{g.preset}]", g.kind, masked(g.url), what, wait and f"wait={wait}") if x)


class Writer:
    """The single writer of one database. Not thread-safe: one collector process owns it.

    Ids of targets, models, GPUs and bucket layouts are kept by name once looked up, and each model's
    counter state between rounds; all of it is forgotten when a transaction rolls back.
    """

    def __init__(self, engine: Engine, max_gap_s: float = 600.0, history: bool = False,
                 clock: Callable[[], float] = time.time) -> None:
        self.engine = engine
        self.clock = clock  # the rounds' clock: rows stored ahead of it mean it stepped back (db/future.py)
        self.max_gap_s = max_gap_s
        # History mode (app/history_fill.py: the demo's week written beside the live rounds): rounds
        # older than what the database holds, in a span nothing else writes. Nothing stored before is
        # this writer's past (its latest round, counter states and epoch start afresh), and it saves no
        # counter state (series_state is the live writer's, to resume from after a restart).
        self.history = history
        self._targets: dict[str, int] = {}
        self._models: dict[tuple[int, str], int] = {}
        self._gpus: dict[tuple[int, str], tuple[int, tuple[Any, ...]]] = {}  # (target, uuid) → (id, meta stored)
        self._layouts: dict[tuple[float, ...], int] = {}
        self._states: dict[int, SeriesState] = {}
        self._target_meta: dict[int, tuple[Any, ...]] = {}  # (used, missing, cache_config, engine, lora, series)
        # setting name → what the user used instead (``targets[].vllm_url`` → ``--vllm-url``): stored
        # errors name what they can change (core.text.named); empty: the settings' own names
        self.names: dict[str, str] = {}
        self._dirty: set[int] = set()
        self._last_ts: dict[int, int] = {}
        # target → its last round that stored model rows: (row ts, the round's start as the clock
        # gave it, None when loaded from the database, which keeps whole seconds only)
        self._last_up: dict[int, tuple[int, float | None] | None] = {}
        self._too_wide_seen: set[tuple[int, str]] = set()  # (model, histogram) warned of once
        self.rows_written = dict.fromkeys(_TABLES, 0)  # rows committed per table since start (the collector's /metrics)
        self._skipped: dict[int, int] = {}  # target → rounds skipped in a row (already stored)
        self._epochs = EpochTracker(stored=not history)
        # target → the cumulative values of its gateway's wait histogram, last read (kept in memory: the
        # first read after a start is a baseline, as a model's after a gap)
        self._gateway_states: dict[int, SeriesState] = {}

    def close(self) -> None:
        """Nothing to release: each write checks a connection out of the engine's pool."""

    # -- public API -------------------------------------------------------------------------------
    def register_target(self, target: TargetSettings, stale_after_s: float | None = None,
                        shape_source: str | None = None) -> int:
        """Insert or update a target's configuration row; returns its id. ``stale_after_s``: how long
        after its last scrape readers call it stale (the collector's 2 × interval + scrape timeout);
        ``shape_source``: where ceiling inputs the settings left unset were read (app/model_shapes.py)."""
        values = {
            "stale_after_s": stale_after_s,
            "vllm_url": masked(target.vllm_url),
            "gateway_source": gateway_source(target),
            "gpu_source": target.gpu.source + (f" {masked(target.gpu.url)}" if target.gpu.url else ""),
            "weight_gb": target.ceiling.weight_gb,
            "tensor_parallel": target.ceiling.tensor_parallel,
            "bandwidth_gbps": target.ceiling.bandwidth_gbps,
            "kv_bytes_per_token": target.ceiling.kv_bytes_per_token,
            "active_params_b": target.ceiling.active_params_b,
            "peak_tflops": target.gpu.peak_tflops,
            "compute_precision": target.gpu.precision,
            "shape_source": shape_source,
            "retired_at": None,  # configured (again): listed as any other
            "dropped_at": None,
            "max_num_seqs": target.max_num_seqs,
        }
        try:
            with write_transaction(self.engine) as conn:  # reads first: a second collector starts beside the writer
                target_id = self._target_id(conn, target.name)
                conn.execute(update(schema.targets).where(schema.targets.c.id == target_id).values(**values))
        except SQLAlchemyError as exc:
            self._forget()
            raise storage_error(f"registering target {target.name!r}", exc) from None
        return target_id

    def retire_unconfigured(self, configured: Sequence[str], now: float) -> list[str]:
        """Mark the stored targets this collector is not configured with (and no ``[[prometheus]]``
        source found) as retired at ``now``: they read "not configured any more", never "down", and
        leave the lists after ``retired_shown_s``. Returns the names newly retired."""
        t = schema.targets
        unconfigured = (t.c.name.not_in(list(configured)), t.c.discovered_by.is_(None), t.c.retired_at.is_(None))
        try:
            with write_transaction(self.engine) as conn:
                names = list(conn.execute(select(t.c.name).where(*unconfigured)).scalars())
                if names:
                    conn.execute(update(t).where(t.c.name.in_(names)).values(retired_at=int(now)))
        except SQLAlchemyError as exc:
            raise storage_error("marking the targets no longer configured", exc) from None
        return names

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
        rows: _Rows = {name: [] for name in _TABLES}
        try:
            with write_transaction(self.engine) as conn:  # reads the stored state first (after a start or a failure)
                kept = sum(self._collect(conn, round_, rows) for round_ in rounds)
                for name, table in _TABLES.items():
                    if rows[name]:
                        conn.execute(insert(table), rows[name])
                self._save_states(conn)
            for name, written in rows.items():
                self.rows_written[name] += len(written)
        except SQLAlchemyError as exc:
            self._forget()
            raise storage_error("writing a scrape round", exc) from None
        except Exception:
            self._forget()  # not the database's doing (a value its rows cannot hold), but rolled back all the same
            raise
        return kept

    def _forget(self) -> None:
        """The transaction rolled back, series_state with it: forget what was read or written in it,
        so that the next round reads the last committed state (rare, so no per-round snapshot)."""
        for kept in (self._states, self._targets, self._models, self._gpus, self._layouts, self._target_meta,
                     self._last_ts, self._last_up, self._gateway_states):
            kept.clear()
        self._dirty.clear()
        self._epochs.forget()

    def _collect(self, conn: Connection, round_: ScrapeRound, rows: _Rows) -> bool:
        """Queue the round's rows; False (nothing queued) when the target already has a round at or after it.

        Rows are keyed by whole seconds: a second round in the same second (``collect --once`` run
        twice, a clock step back, two scrapes of a Prometheus less than a second apart) is skipped
        with a warning rather than failing the batch. Its increases are not lost: it moves its
        models' states on, and the next stored rows carry them (a reset after it is measured from its values).
        """
        target_id = self._target_id(conn, round_.target)
        ts = int(round(round_.ts))
        if target_id not in self._last_ts and self.history:
            self._last_ts[target_id], self._last_up[target_id] = 0, None
        if target_id not in self._last_ts:
            s, m = schema.scrapes, schema.models
            last = conn.execute(select(func.max(s.c.ts)).where(s.c.target_id == target_id)).scalar()
            its_models = select(m.c.id).where(m.c.target_id == target_id)
            last_rows = select(func.max(schema.samples.c.ts)).where(schema.samples.c.model_id.in_(its_models))
            last_up = conn.execute(last_rows).scalar()
            self._last_ts[target_id] = last or 0
            self._last_up[target_id] = None if last_up is None else (int(last_up), None)
        if ts <= self._last_ts[target_id] and self._stepped_back(round_, target_id):
            self._move_future(conn, target_id, round_.target, ts)
        if ts <= self._last_ts[target_id]:
            # A second round in one second (collect --once run twice, a Prometheus sample read twice)
            skipped = self._skipped[target_id] = self._skipped.get(target_id, 0) + 1
            if skipped == 1:
                log.warning("%s: a round at %d is already stored (latest %d); this one is skipped",
                            round_.target, ts, self._last_ts[target_id])
            self._model_rows(conn, target_id, ts, round_, skipped=True)
            return False
        if self._skipped.get(target_id):
            log.info("%s: storing rounds again after %d skipped", round_.target, self._skipped.pop(target_id))
        self._last_ts[target_id] = ts
        row = _scrape_row(target_id, ts, round_)
        if self.names and row["error"]:  # a target given as flags: its stored error names the flag
            row["error"] = named(row["error"], self.names)
        rows["scrapes"].append({**row, **self._gateway_wait(conn, target_id, ts, round_)})
        if round_.vllm_status.ok and round_.vllm is not None:
            self._update_target_meta(conn, target_id, round_.vllm)
            self._epochs.observe(conn, target_id, ts, round_.vllm)  # a changed configuration or a restart (db/epochs.py)
            rows["samples"] += self._model_rows(conn, target_id, ts, round_)
        for gpu in round_.gpus:
            gpu_row = {f: getattr(gpu, f) for f in schema.GPU_FIELDS}
            rows["gpu_samples"].append({"target_id": target_id, "ts": ts, "gpu_id": self._gpu_id(conn, target_id, gpu, ts),
                                        **gpu_row})
        return True

    def _stepped_back(self, round_: ScrapeRound, target_id: int) -> bool:
        """Whether the target's latest stored round is ahead of the clock that dates this one (it
        stepped back), not a round stored twice: this round is dated now by the clock, the stored
        one later than now. A Prometheus sample dated ahead of this machine is not the clock's."""
        if self.history:
            return False
        now = self.clock()
        return abs(round_.ts - now) <= STEP_BACK_S and self._last_ts[target_id] > now + STEP_BACK_S

    def _move_future(self, conn: Connection, target_id: int, target: str, ts: int) -> None:
        """The clock stepped back: the target's rows dated at or after ``ts`` go to ``future_rows``
        (db/future.py) and this round is stored, rather than every round skipped until the clock
        passes them. The next increases cover unknown time (the previous row's time was the wrong clock's)."""
        ahead = self._last_ts[target_id]
        moved = move_future(conn, target_id, target, ts, int(self.clock()))
        last = conn.execute(select(func.max(schema.scrapes.c.ts)).where(schema.scrapes.c.target_id == target_id)).scalar()
        self._last_ts[target_id], self._last_up[target_id] = last or 0, None
        self._epochs.forget()  # its latest epoch may have been one of them
        self._skipped.pop(target_id, None)
        log.warning("%s: the clock stepped back %d s (the latest stored round is dated %d, this one %d): %d rows "
                    "dated at or after it moved to future_rows, and storage goes on from this round",
                    target, ahead - ts, ahead, ts, moved)

    def _model_rows(self, conn: Connection, target_id: int, ts: int, round_: ScrapeRound, skipped: bool = False) -> list[Row]:
        """The round's ``samples`` rows; a ``skipped`` round's only move the states on (not stored)."""
        scrape = round_.vllm
        if not round_.vllm_status.ok or scrape is None or not scrape.models:
            return []  # (a page without models stores no row: the next round's rows cover its time as well)
        started = round_.ts if round_.vllm_at is None else round_.vllm_at
        covered = None if skipped else self._covered_ms(target_id, ts, started)
        if covered is not None and scrape.process_start_time_s is not None:
            covered = self._since_restart(conn, target_id, scrape, started, covered)
        shares = [None] * len(scrape.models) if skipped else _shares(covered, len(scrape.models))
        return [self._sample_row(conn, self._model_id(conn, target_id, name), ts, figures, scrape.process_start_time_s, share, skipped)
                for (name, figures), share in zip(scrape.models.items(), shares, strict=True)]

    def _since_restart(self, conn: Connection, target_id: int, scrape: VllmScrape, started: float, covered: int) -> int:
        """After a restart the increases count from the new process's start, not from the old process's
        last scrape: the time they cover is at most the time since that start. Counting from the last
        scrape read a dip at every restart (the demo's backfill→live seam: 91 tokens over 35 s, 2.6 tok/s
        for ~27). A start time ahead of ``started`` (the two hosts' clocks disagree) changes nothing."""
        process_start = scrape.process_start_time_s
        assert process_start is not None
        name = next(iter(scrape.models))
        if not self._state(conn, self._model_id(conn, target_id, name)).restarted(process_start):
            return covered
        since = int(round((started - process_start) * 1000))
        return min(covered, since) if since > 0 else covered

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

    # -- samples and state ------------------------------------------------------------------------
    def _sample_row(
        self,
        conn: Connection,
        model_id: int,
        ts: int,
        figures: ModelFigures,
        process_start: float | None,
        covered_ms: int | None,
        skipped: bool = False,
    ) -> Row:
        """The model's ``samples`` row; advances its state.

        ``covered_ms``: the model's share of the time the round's increases cover (see _shares).
        ``skipped``: the row is not stored; its increases are carried in the state instead, whose
        time stays that of the last stored row (the gap to the next one is measured from it)."""
        state = self._state(conn, model_id)
        fresh = state.ts is None or ts - state.ts > self.max_gap_s
        restarted = state.restarted(process_start)
        row: Row = {"model_id": model_id, "ts": ts, "covered_ms": covered_ms}
        row.update({key: figures.gauges.get(key) for key in schema.GAUGES})
        for key in schema.COUNTERS:
            value, created = figures.counters.get(key), figures.created.get(key)
            row[key] = counter_increase(state, _state_key(state.counters, key, figures, value), value, created,
                                        restarted, fresh, skipped)
        for key in schema.HISTOGRAMS:
            hist = figures.histograms.get(key)
            if hist is not None and len(hist.bounds) > histo.MAX_BUCKETS:
                self._too_wide(model_id, key, len(hist.bounds))
                hist = None
            layout = self._layout_id(conn, hist.bounds) if hist is not None else None
            inc = histogram_increase(state, _state_key(state.hists, key, figures, hist), hist, layout,
                                     figures.created.get(key), restarted, fresh, skipped)
            count, total, buckets = (None, None, None) if inc is None else (inc[0], inc[1], histo.pack(inc[2]))
            row.update({f"{key}_layout": layout, f"{key}_count": count, f"{key}_sum": total, f"{key}_buckets": buckets})
        if not skipped:
            state.ts = ts
        state.process_start = process_start
        self._dirty.add(model_id)
        return row

    def _gateway_wait(self, conn: Connection, target_id: int, ts: int, round_: ScrapeRound) -> Row:
        """The scrapes row's columns of the gateway's wait histogram: its increase since the last read
        (reset-aware, as a model's histograms: a count that fell counts from zero), None where
        unknown (not read this round, the first read, a changed layout, a gap over max_gap_s). A
        round whose gateway read failed leaves the state as it was: the next read's increase covers both."""
        h = schema.GATEWAY_WAIT
        gateway, status = round_.gateway, round_.gateway_status
        hist = None if gateway is None or (status is not None and not status.ok) else gateway.wait
        if hist is not None and len(hist.bounds) > histo.MAX_BUCKETS:
            self._too_wide(-target_id, h, len(hist.bounds))
            hist = None
        row: Row = {f"{h}_{part}": None for part in ("layout", "count", "sum", "buckets")}  # every row: one executemany
        if hist is None:
            return row
        state = self._gateway_states.setdefault(target_id, SeriesState())
        fresh = state.ts is None or ts - state.ts > self.max_gap_s
        layout = self._layout_id(conn, hist.bounds)
        inc = histogram_increase(state, h, hist, layout, None, False, fresh)
        state.ts = ts
        row[f"{h}_layout"] = layout
        if inc is not None:
            row.update({f"{h}_count": inc[0], f"{h}_sum": inc[1], f"{h}_buckets": histo.pack(inc[2])})
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
        if state is None and self.history:
            state = self._states[model_id] = SeriesState()
        if state is None:
            text = conn.execute(
                select(schema.series_state.c.state).where(schema.series_state.c.model_id == model_id)
            ).scalar()
            state = SeriesState.from_json(text) if text else SeriesState()
            self._states[model_id] = state
        return state

    def _save_states(self, conn: Connection) -> None:
        if self.history:
            self._dirty.clear()
            return
        st = schema.series_state
        for model_id in sorted(self._dirty):
            state = self._states[model_id]
            values = {"ts": state.ts, "state": state.to_json()}
            if not conn.execute(update(st).where(st.c.model_id == model_id).values(**values)).rowcount:
                conn.execute(insert(st).values(model_id=model_id, **values))
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
        cached = self._layouts.get(bounds)
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
        values = dict(zip(_GPU_META, meta, strict=True))
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
            "series_dropped": scrape.series_dropped,
            "series_limit": scrape.series_limit,
        }
        conn.execute(update(t).where(t.c.id == target_id).values(**values))
        self._target_meta[target_id] = (used, missing, cache, scrape.engine, dict(scrape.lora), _series(scrape))


def _meta_unchanged(seen: tuple[Any, ...] | None, scrape: VllmScrape) -> bool:
    # mappings compared as mappings (order aside, as the JSON is sorted): the UPDATE only on a change
    return (
        seen is not None
        and seen[1] == tuple(scrape.missing)
        and seen[0] == scrape.metric_names_used
        and seen[2] == scrape.cache_config
        and seen[3] == scrape.engine
        and seen[4] == scrape.lora
        and seen[5] == _series(scrape)
    )


def _series(scrape: VllmScrape) -> tuple[int, int | None]:
    return scrape.series_dropped, scrape.series_limit


def _gpu_meta(gpu: GpuReading) -> tuple[Any, ...]:
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


def _scrape_row(target_id: int, ts: int, round_: ScrapeRound) -> Row:
    """The round's ``scrapes`` row."""
    gateway, gateway_status, gpu_status = round_.gateway, round_.gateway_status, round_.gpu_status
    gw_ok = gateway_status is None or gateway_status.ok
    return {
        "target_id": target_id,
        "ts": ts,
        "up": 1 if round_.vllm_status.ok else 0,
        "error": round_.vllm_status.error,
        "duration_ms": int(round(round_.vllm_status.duration_s * 1000)),
        "queue_depth": gateway.queue_depth if gateway is not None and gw_ok else None,
        "gateway_error": gateway_status.error if gateway_status else None,
        "gpu_error": gpu_status.error if gpu_status else None,
    }


def _state_key(kept: dict[str, Any], key: str, figures: ModelFigures, value: object) -> str:
    """The state key of ``key`` this round: its own, or ``key~engines`` while those engines are left
    out of the sum (their value was NaN, infinite or negative). The other spellings' states are
    dropped, so a sum over another set of engines starts a baseline instead of reading as a reset
    (whose increase would be a whole counter: a spike)."""
    left_out = figures.partial.get(key, "")
    own = f"{key}~{left_out}" if left_out else key
    if value is not None:
        for stale in [k for k in kept if k != own and k.split("~", 1)[0] == key]:
            del kept[stale]
    return own
