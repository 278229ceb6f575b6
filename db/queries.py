"""The query facade: the only thing the CLI, UI pages and alerts call. Read-only connections.

Source choice: a series picks the coarsest stored level its step allows (hourly rollups when
``step_s`` is a multiple of 3600, minute rollups for multiples of 60, raw rows otherwise), and reads
finer data for the part the rollups do not cover yet (the recent minutes, or a head not aligned to
the level). A window up to 6 h reads raw rows (exact edges); longer windows use minute rollups, and
hourly ones from 2 days. Steps are aligned to multiples of ``step_s`` in unix time.

Every figure is None when there is no data for it (no successful scrape, metric not exposed, no
request for a quantile): charts draw a gap, ``status`` prints null. Rates divide the increases by
the time they cover, the sum of the target's rows' ``covered_ms`` (each successful round's time
since the target's previous one, split among its models), not by the step or window length: a
step right after the collector was stopped for two minutes holds two minutes of tokens, and shows
their rate, not 25 times it; a window the collector saw only part of shows the rate over that part
(docs/storage.md).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import numpy as np
from sqlalchemy import Connection, Engine, bindparam, func, select
from sqlalchemy.exc import SQLAlchemyError

from core.engines import name_versions
from core.errors import StorageError
from core.settings import NO_CEILING
from db import mbu_figures, schema
from db.alerts import AlertBoard, Silence, board, end_silence, write_silence
from db.ceiling import configured_bandwidths, target_ceiling, target_ceiling_missing
from db.engine import open_reader
from db.errors import HINT, storage_error
from db.gpu_reads import as_figure, bw_gbps, gpu_figures_of, gpu_grid
from db.pipeline import (
    POINT_KEYS,
    SHARE_PART_KEYS,
    columns,
    empty_figures,
    figures,
    level_for_step,
    sleep_state_at,
    wait_metric_of,
    window_from,
    window_level,
)
from db.results import (
    BenchRun,
    ConfigEpoch,
    GpuFigures,
    GpuPoint,
    SeriesPoint,
    SweepRun,
    SweepSpan,
    TargetInfo,
    WindowFigures,
)
from db.sources import RAW

if TYPE_CHECKING:
    from db.delivery import StoredDelivery
    from db.fleet import FleetFigures
    from db.history_fill import FillProgress
    from db.notifications import NotificationEntry
    from db.peaks import DailyPeak
    from db.verdicts import StoredVerdict


def _make(cls: type, values: dict[str, Any]) -> Any:
    """Build a frozen result dataclass without its per-field ``object.__setattr__`` calls.

    A frozen dataclass' __init__ costs ~20 µs for 16 fields: 30 ms for a day of minutes. The values
    come from our own code with every field present, so skipping __init__ loses no check.
    """
    obj: Any = object.__new__(cls)
    obj.__dict__.update(values)
    return obj


P = ParamSpec("P")
T = TypeVar("T")


class Reader:
    """Read-only access to one database (``db_url`` as users write it)."""

    def __init__(self, db_url: str | None = None, engine: Engine | None = None) -> None:
        if engine is None and db_url is None:
            raise ValueError("Reader needs db_url or engine")
        self.db_url = db_url  # where the one write a page makes (a silence) goes
        self.engine = engine if engine is not None else open_reader(str(db_url))

    def _run(self, action: str, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(conn, *args)`` on a read-only connection; a storage failure is a StorageError naming ``action``.
        Typed from ``fn``: what each method returns is what its query function returns."""
        try:
            with self.engine.connect() as conn:
                return fn(conn, *args, **kwargs)
        except SQLAlchemyError as exc:
            raise storage_error(action, exc, self.engine.url) from None

    # -- catalogue --------------------------------------------------------------------------------
    def targets(self) -> list[TargetInfo]:
        """Every stored target with its latest health, metric names, models, GPUs and ceiling."""
        return self._run("listing targets", _targets)

    def models(self, target: str) -> list[str]:
        """Model names seen for ``target`` (empty when unknown)."""
        return self._run("listing models", _models, target)

    # -- figures ----------------------------------------------------------------------------------
    def window(
        self,
        target: str,
        end: float,
        window_s: float,
        model: str | None = None,
        *,
        level: int | None = None,
        gpus: bool = True,
        ttft_slo_s: float | None = None,
    ) -> WindowFigures:
        """Every ``status`` figure over (end − window_s, end] for ``model`` (None = all models summed):
        the rounds stamped in those whole seconds, one stamped exactly at ``end`` included (a series'
        step counts [ts, ts + step) instead: the window of exactly one step ends at ts + step − 1).

        ``level`` forces 0 (raw), 60 or 3600 as :meth:`series` does: a past range's figures from the
        rollups its charts read (its raw rows may be gone); ``up`` then comes from the rollups' rounds.
        ``gpus=False`` leaves ``gpus`` empty and skips their reads (and so the measured MBU).
        ``ttft_slo_s``: the SLO ``ttft_slo_attainment`` judges by (the target's effective
        ``ttft_p95_slo_s``, as ``status`` and the UI know it); None: the thresholds stored for it.
        """
        return self._run("reading a window", _window, target, end, window_s, model, level, gpus, ttft_slo_s)

    def series(
        self,
        target: str,
        start: float,
        end: float,
        step_s: float,
        model: str | None = None,
        *,
        fields: Sequence[str] | None = None,
        level: int | None = None,
    ) -> list[SeriesPoint]:
        """One point per step in [start, end) (steps aligned to multiples of ``step_s``).

        ``fields`` limits the work to these SeriesPoint figures (the others are None): a chart of
        one figure reads only its columns. ``level`` forces 0 (raw), 60 or 3600 (tests, benchmarks).
        """
        return self._run("reading a series", _series, target, (start, end, step_s), model, level, fields)

    def series_columns(
        self,
        target: str,
        start: float,
        end: float,
        step_s: float,
        model: str | None = None,
        *,
        fields: Sequence[str] | None = None,
        level: int | None = None,
        ttft_slo_s: float | None = None,
    ) -> dict[str, list[Any]]:
        """:meth:`series` as columns (``ts`` plus every SeriesPoint field → list), for charts and
        data frames; no per-point objects, so a day of minutes costs a few milliseconds. ``fields`` may
        name share parts (db/pipeline.py SHARE_PART_KEYS); ``ttft_slo_s``: the SLO the shares judge by
        (None: the target's stored one).
        """
        return self._run("reading a series", _series_columns, target, (start, end, step_s), model, level, fields,
                         ttft_slo_s)  # fmt: skip

    def daily_peaks(self, target: str, first_day: float, days: int) -> list[DailyPeak]:
        """``target``'s peak-hour demand (requests in the system) of each UTC day from ``first_day`` (a
        midnight), ``days`` of them, from the minute rollups (db/peaks.py: the rules; None: too little data)."""
        from db.peaks import DAY_S, FIELDS, STEP_S, daily_peaks

        cols = self.series_columns(target, first_day, first_day + days * DAY_S, STEP_S, fields=FIELDS, level=60)
        return daily_peaks(cols, first_day, days)

    def gpu_series(self, target: str, start: float, end: float, step_s: float) -> list[GpuPoint]:
        """One point per (step, GPU) with data in [start, end), ordered by time then UUID."""
        return self._run("reading GPU series", _gpu_series, target, start, end, step_s)

    def latest_gpus(self, target: str, window_s: float = 60.0) -> tuple[GpuFigures, ...]:
        """GPU figures over the last ``window_s`` before the target's latest GPU reading."""
        return self._run("reading GPUs", _latest_gpus, target, window_s)

    def fleet(self, end: float, window_s: float, series: tuple[float, float, float], fields: Sequence[str]) -> dict[str, FleetFigures]:
        """Every target's window and its ``fields`` per step over ``series`` = (start, end, step), read
        together (db/fleet.py): target name → FleetFigures."""
        from db.fleet import fleet_figures

        return fleet_figures(self.engine, end, window_s, series, fields)

    def verdicts(self, target: str, start: float, end: float) -> list[StoredVerdict]:
        """``target``'s sweet-spot verdicts of the minutes starting in [start, end), as the alert
        evaluator stored them (db/verdicts.py); a minute without one was not judged."""
        from db.verdicts import read

        return self._run("reading the verdicts", read, target, start, end)

    def live_since(self, target: str) -> dict[str, float]:
        """For the Overview's live banner: since when each firing (else pending) alert of ``target``
        holds (unix s), by rule, from the evaluator's stored states; as the Alerts page orders them."""
        return self._run("reading the alerts", _live_since, target)

    def alert_board(self, now: float, since_s: float = 86400.0) -> AlertBoard:
        """The Alerts page's read (db/alerts.py): alerts firing or pending now, the silences in force and
        not ended yet, and the transitions of the last ``since_s`` before ``now``, in one connection."""
        return self._run("reading the alerts", board, now, since_s)

    # -- the one write a page makes -----------------------------------------------------------------
    def add_silence(self, silence: Silence) -> int:
        """Store a silence (the Alerts page); its id. One row in a short write transaction on a
        connection of its own, never a migration: a schema older than this code is refused, naming
        ``python -m app collect`` / ``db migrate`` (db/alerts.py ``write_silence``)."""
        return write_silence(self._write_url(), silence)

    def expire_silence(self, silence_id: int, now: float) -> bool:
        """End a silence at ``now`` (the Alerts page), as :meth:`add_silence` writes; False when no
        silence has that id or it already ended."""
        return end_silence(self._write_url(), silence_id, now)

    def _write_url(self) -> str:
        if self.db_url is None:
            raise StorageError("this reader was opened on an engine, not a database URL: it cannot write a silence", HINT)
        return self.db_url

    def judged_by(self, target: str) -> dict[str, float | None]:
        """The sweet-spot thresholds ``target``'s newest stored verdict was judged by (the evaluator's
        settings, db/verdicts.py); empty when none was stored with them."""
        from db.verdicts import judged_by

        return self._run("reading the verdicts' thresholds", judged_by, target)

    def learned_sweet_spot(self, target: str, at: float) -> tuple[int, float, Any] | None:
        """``target``'s latest stored learned sweet spot at or before ``at`` (db/learned.py):
        (learned_at, the SLO it judged by, core.knee.Learned), or None."""
        from db.learned import latest

        return self._run("reading the learned sweet spot", latest, target, at)

    def sweep_runs(self, limit: int = 20) -> list[SweepRun]:
        """Stored load sweeps, newest first."""
        from db.sweeps import load_sweeps

        return self._run("reading sweeps", load_sweeps, limit)

    def sweeps_loading(self, at: float, after_s: float) -> list[SweepSpan]:
        """Stored sweeps whose load spans ``at`` or ended at most ``after_s`` before it (db/sweeps.py)."""
        from db.sweeps import loading

        return self._run("reading the sweeps in progress", loading, at, after_s)

    def history_fill(self, target: str) -> FillProgress | None:
        """How far the demo's simulated week has come (db/history_fill.py FillProgress), or None."""
        from db.history_fill import load

        return self._run("reading the history fill", load, target)

    def epochs(self, target: str, start: float | None = None, end: float | None = None) -> list[ConfigEpoch]:
        """``target``'s configuration epochs and restarts starting in [start, end), oldest first (db/epochs.py)."""
        from db.epochs import load_epochs

        return self._run("reading configuration epochs", load_epochs, target, start, end)

    def bench_runs(self, limit: int = 20, target: str | None = None) -> list[BenchRun]:
        """Imported benchmark files (``bench import``), the latest run first; of ``target`` when given."""
        from db.benches import load_benches

        return self._run("reading imported benchmarks", load_benches, limit, target)

    def delivery(self, now: float) -> StoredDelivery | None:
        """Where the collector's notifications go, as it stored it (db/delivery.py; None: none stored yet)."""
        from db.delivery import read

        return self._run("reading the collector's delivery", read, now)

    def notifications(self, since: float, limit: int = 200) -> list[NotificationEntry]:
        """The e-mail notification log since ``since``, newest first (db/notifications.py)."""
        from db.notifications import notification_log

        return self._run("reading the notification log", notification_log, since, limit)


# -- catalogue helpers -----------------------------------------------------------------------------
# Fixed statements built once (building and keying a SELECT per call costs ~0.1 ms each).
_T, _M = schema.targets, schema.models
_TARGET_BY_NAME = select(_T).where(_T.c.name == bindparam("name"))
_MODELS_OF = select(_M.c.id, _M.c.name).where(_M.c.target_id == bindparam("tid")).order_by(_M.c.id)
_MODEL_BY_NAME = _MODELS_OF.where(_M.c.name == bindparam("mname"))


def _target_row(conn: Connection, name: str) -> Any:
    return conn.execute(_TARGET_BY_NAME, {"name": name}).first()


def _model_ids(conn: Connection, target_id: int, model: str | None) -> list[tuple[int, str]]:
    if model is None:
        rows = conn.execute(_MODELS_OF, {"tid": target_id})
    else:
        rows = conn.execute(_MODEL_BY_NAME, {"tid": target_id, "mname": model})
    return [(int(i), str(n)) for i, n in rows]


def _everyone(conn: Connection, target_id: int, model: str | None) -> dict[int, list[int]] | None:
    """Every model of the target when the figures are for one ``model`` (None: they are for all)."""
    return None if model is None else {target_id: [i for i, _ in _model_ids(conn, target_id, None)]}


def _gpu_rows(conn: Connection, target_id: int) -> list[Any]:
    g = schema.gpus
    return list(conn.execute(select(g).where(g.c.target_id == target_id).order_by(g.c.gpu_index, g.c.uuid)))


def _last_scrape(conn: Connection, target_id: int, end: float | None = None) -> Any:
    s = schema.scrapes
    stmt = select(s.c.ts, s.c.up, s.c.error).where(s.c.target_id == target_id)
    if end is not None:
        stmt = stmt.where(s.c.ts <= end)
    return conn.execute(stmt.order_by(s.c.ts.desc()).limit(1)).first()


def _models(conn: Connection, target: str) -> list[str]:
    row = _target_row(conn, target)
    return [] if row is None else [n for _, n in _model_ids(conn, row.id, None)]


def _targets(conn: Connection) -> list[TargetInfo]:
    out = []
    # a target dropped from the lists (`targets drop --keep-history`) is in none: its rows stay for queries
    t = schema.targets
    for row in conn.execute(select(t).where(t.c.dropped_at.is_(None)).order_by(t.c.name)):
        last = _last_scrape(conn, row.id)
        out.append(
            TargetInfo(
                name=row.name,
                vllm_url=row.vllm_url,
                up=None if last is None else bool(last.up),
                last_scrape_at=None if last is None else float(last.ts),
                last_error=None if last is None else last.error,
                metric_names_used=json.loads(row.metric_names_used or "{}"),
                missing_metrics=tuple(json.loads(row.missing_metrics or "[]")),
                models=tuple(n for _, n in _model_ids(conn, row.id, None)),
                gpus=tuple(g.uuid for g in _gpu_rows(conn, row.id)),
                gpu_source=row.gpu_source,
                gateway_source=row.gateway_source,
                ceiling=target_ceiling(conn, row.id),
                ceiling_missing=target_ceiling_missing(conn, row.id) or NO_CEILING,
                engine=row.engine,
                metric_versions={k: name_versions(v) for k, v in json.loads(row.metric_names_used or "{}").items()},
                cache_config=json.loads(row.cache_config or "{}"),
                lora=json.loads(row.lora or "{}"),
                discovered_by=row.discovered_by,
                series_dropped=row.series_dropped or 0,
                series_limit=row.series_limit,
                stale_after_s=row.stale_after_s,
                retired_at=row.retired_at,
                max_num_seqs=row.max_num_seqs,
            )
        )
    return out


def _series_columns(
    conn: Connection,
    target: str,
    span: tuple[float, float, float],
    model: str | None,
    level: int | None,
    fields: Sequence[str] | None,
    ttft_slo_s: float | None = None,
) -> dict[str, list[Any]]:
    start, end, step_s = span
    step = max(1, int(step_s))
    lo, hi = int(start) // step * step, int(math.ceil(end))
    row = _target_row(conn, target)
    if row is None or hi <= lo:
        return {"ts": [], "mbu": [], "dram_bw_util": [], **{k: [] for k in (*POINT_KEYS, *(fields or ()))}}
    ids = [i for i, _ in _model_ids(conn, row.id, model)]
    with_mbu = fields is None or "mbu" in fields or "dram_bw_util" in fields
    want = None if fields is None else frozenset(fields) | (MBU_INPUTS if with_mbu else frozenset())
    level = level_for_step(step) if level is None else level
    slo = None if ttft_slo_s is None else {row.id: ttft_slo_s}
    f = figures(conn, {row.id: ids}, (lo, hi, step), level, want, _everyone(conn, row.id, model), slo)[row.id]
    cols: dict[str, list[Any]] = columns(f, [k for k in fields or () if k in SHARE_PART_KEYS])
    if with_mbu:
        cols["mbu"], cols["dram_bw_util"] = _series_mbu(conn, row.id, cols, (lo, hi, step), level)
    return {"ts": (np.arange(len(f["scrapes"]), dtype=np.float64) * step + lo).tolist(), **cols}


# the series figures a step's MBU reads (db/mbu_figures.py)
MBU_INPUTS = frozenset({"steps_per_s", "running_avg", "mean_context_tokens", "engine_read_bytes_per_s",
                        "engine_write_bytes_per_s", "kv_resident_tokens_avg", "engines_max"})  # fmt: skip


def _series_mbu(conn: Connection, target_id: int, cols: dict[str, list[Any]], span: tuple[int, int, int],
                level: int) -> tuple[list[float | None], list[float | None]]:  # fmt: skip
    """Each step's MBU (the engine's byte counters, else the step model) and the GPUs' DRAM
    bandwidth utilisation of the step."""
    lo, hi, step = span
    ceiling, gpus = target_ceiling(conn, target_id), _gpu_rows(conn, target_id)
    steps = len(cols["running_avg"])
    shares: list[float | None] = [None] * steps
    source = mbu_figures.DRAM_SOURCE_BY_NAME[{g.dram_bw_source for g in gpus} == {"dcgm"}]
    if gpus:
        red, groups = gpu_grid(conn, gpus, lo, hi, step, level)
        grid = red.avgs["dram_bw_util_pct_avg"].reshape(groups, len(gpus))
        for i in range(min(groups, steps)):
            read = grid[i][~np.isnan(grid[i])]
            shares[i] = float(read.mean()) if read.size else None
    peak = mbu_figures.peak_gbps(ceiling, gpus, configured_bandwidths(conn, [target_id]).get(target_id))
    out: list[float | None] = []
    for i in range(steps):
        point = {k: cols[k][i] for k in MBU_INPUTS}
        out.append(mbu_figures.mbu_of(point, ceiling, peak, shares[i], source)["mbu"])
    return out, [None if s is None else s / 100.0 for s in shares]


def _series(conn: Connection, *args: Any) -> list[SeriesPoint]:
    return points_from_columns(_series_columns(conn, *args))


def points_from_columns(cols: dict[str, list[Any]]) -> list[SeriesPoint]:
    """Series steps from columns (``ts`` and SeriesPoint fields → lists), as Reader.series_columns and
    Reader.fleet give them."""
    names = list(cols)
    return [_make(SeriesPoint, dict(zip(names, values, strict=True))) for values in zip(*cols.values(), strict=True)]


def _window(
    conn: Connection,
    target: str,
    end: float,
    window_s: float,
    model: str | None,
    level: int | None = None,
    with_gpus: bool = True,
    ttft_slo_s: float | None = None,
) -> WindowFigures:
    hi = int(math.floor(end)) + 1  # include a scrape stamped exactly at ``end``
    lo = hi - int(window_s)
    row = _target_row(conn, target)
    gpus: tuple[GpuFigures, ...] = ()
    last, ceiling, f = None, None, empty_figures()
    level = window_level(window_s) if level is None else level
    if row is not None:
        ids = [i for i, _ in _model_ids(conn, row.id, model)]
        slo = None if ttft_slo_s is None else {row.id: ttft_slo_s}
        f = figures(conn, {row.id: ids}, (lo, hi, hi - lo), level, covered_by=_everyone(conn, row.id, model), slo=slo)[row.id]
        last, ceiling = _last_scrape(conn, row.id, end), target_ceiling(conn, row.id)
        gpus = _gpu_figures(conn, row.id, lo, hi, level) if with_gpus else ()
    engine = None if row is None else row.engine
    sleep = None if row is None else sleep_state_at(conn, [i for i, _ in _model_ids(conn, row.id, model)], lo, hi)
    stale_after = None if row is None else row.stale_after_s
    wait_metric = "" if row is None else wait_metric_of(row.gateway_source)
    found = window_from(target, model, end, window_s, lo, f, last, ceiling, gpus, engine, sleep, stale_after, wait_metric,
                        None if row is None else row.bandwidth_gbps)  # fmt: skip
    gap = "" if row is None or ceiling is not None else target_ceiling_missing(conn, row.id)
    found = dataclasses.replace(found, ceiling_missing=gap) if gap else found
    return dataclasses.replace(found, retired_at=row.retired_at) if row is not None and row.retired_at is not None else found


# -- GPUs --------------------------------------------------------------------------------------------
def _gpu_figures(conn: Connection, target_id: int, lo: int, hi: int, level: int) -> tuple[GpuFigures, ...]:
    return gpu_figures_of(conn, _gpu_rows(conn, target_id), lo, hi, level).get(target_id, ())


def _gpu_series(conn: Connection, target: str, start: float, end: float, step_s: float) -> list[GpuPoint]:
    step = max(1, int(step_s))
    lo, hi = int(start) // step * step, int(math.ceil(end))
    row = _target_row(conn, target)
    gpus = _gpu_rows(conn, row.id) if row is not None else []
    if not gpus or hi <= lo:
        return []
    red, groups = gpu_grid(conn, gpus, lo, hi, step, level_for_step(step))
    out = []
    for gi in range(groups):
        for j, g in enumerate(gpus):
            k = gi * len(gpus) + j
            if red.n[k] == 0:
                continue
            avg = {f: as_figure(red.avgs[f"{f}_avg"][k]) for f in schema.GPU_FIELDS}
            out.append(
                GpuPoint(
                    ts=float(lo + gi * step),
                    uuid=g.uuid,
                    memory_used_bytes=avg["memory_used_bytes"],
                    memory_total_bytes=avg["memory_total_bytes"],
                    memory_busy_pct=avg["memory_busy_pct"],
                    dram_bw_util_pct=avg["dram_bw_util_pct"],
                    dram_bw_gbps=bw_gbps(avg["dram_bw_util_pct"], g.peak_bw_gbps),
                    power_w=avg["power_w"],
                    temperature_c=avg["temperature_c"],
                )
            )
    return out


def _latest_gpus(conn: Connection, target: str, window_s: float) -> tuple[GpuFigures, ...]:
    row = _target_row(conn, target)
    if row is None:
        return ()
    # The newest reading, not gpus.last_seen: the writer updates that only when a GPU's identity
    # or meta changes (not every round), so it can be hours old. One seek on the (target, ts) key.
    s = schema.gpu_samples
    last = conn.execute(select(func.max(s.c.ts)).where(s.c.target_id == row.id)).scalar()
    return _gpu_figures(conn, row.id, last + 1 - int(window_s), last + 1, RAW) if last else ()


# The evaluator's live states (app/alerts/model.py FIRING and PENDING; tests/test_live_since.py
# holds them in step).
LIVE_STATES = ("firing", "pending")


def _live_since(conn: Connection, target: str) -> dict[str, float]:
    t = schema.alert_states
    found = conn.execute(select(t.c.rule, t.c.model, t.c.state, t.c.severity, t.c.pending_since, t.c.firing_since)
                         .where(t.c.target == target, t.c.state.in_(LIVE_STATES))).all()  # fmt: skip
    # firing and critical first, then by rule and model: a later model's time wins for its rule
    rows = sorted(found, key=lambda r: (r.state != LIVE_STATES[0], r.severity != "critical", r.rule, r.model))
    held = ((r.rule, r.firing_since if r.state == LIVE_STATES[0] else r.pending_since) for r in rows)
    return {rule: float(at) for rule, at in held if at is not None}
