"""The cached reads of the query facade: one reader per database, results shared for a few seconds.

Every cached read is an ``st.cache_data`` function whose arguments are the plain values that
decide its result (database URL, target, model, start/end/step in seconds, field names, the SLO,
the settings by value), so two sessions asking the same thing share one query and a different
question can never get another's answer. Pages call these through ``Context`` and ``guard``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import streamlit as st

from app import plan as what_if
from app.fleet import FleetRow, fleet
from app.sweet_spot import SweetSpot, resolve
from core.settings import Settings
from db.results import SeriesPoint, WindowFigures
from db.verdicts import StoredVerdict

if TYPE_CHECKING:
    from db.queries import Reader

# Results are shared by every session for a few seconds: several viewers, page switches and the
# live refresh then cost one query. Coarse steps (≥ 5 min) change slowly, so they live longer;
# that delays the newest partial step of a 7- or 30-day chart by up to a minute.
FINE_TTL_S = 5.0
COARSE_TTL_S = 60.0
COARSE_STEP_S = 300.0


def floor(ts: float, step: float) -> float:
    """``ts`` down to a whole ``step``: reads a few seconds apart then ask the same question."""
    return math.floor(ts / step) * step


@st.cache_resource(show_spinner=False)
def reader(db_url: str) -> Reader:
    """One read-only facade per database URL, shared by every session (a connection pool, not a cache
    of results: those are the ``st.cache_data`` functions below)."""
    from db.queries import Reader  # imported here so a missing facade is a guarded one-line error

    return Reader(db_url)


@st.cache_data(ttl=FINE_TTL_S, max_entries=256, show_spinner=False)
def window(url: str, target: str, end: float, window_s: float, model: str | None, level: int | None,
           ttft_slo_s: float | None = None) -> WindowFigures:  # fmt: skip
    """A target's figures over ``window_s`` ending at ``end``; ``level``: raw rows (0), minute or hour rollups."""
    # the target's effective SLO (its overrides on [sweetspot]): the tile judges by the banner's numbers
    return reader(url).window(target, end, window_s, model=model, level=level, ttft_slo_s=ttft_slo_s)


@st.cache_data(ttl=FINE_TTL_S, max_entries=64, show_spinner=False)
def verdicts(url: str, target: str, start: float, end: float) -> list[StoredVerdict]:
    """A target's stored minute verdicts in [start, end) (db/verdicts.py)."""
    return reader(url).verdicts(target, start, end)


@st.cache_data(ttl=FINE_TTL_S, max_entries=64, show_spinner=False)
def judged_by(url: str, target: str) -> dict[str, float | None]:
    """The thresholds the evaluator judged ``target``'s newest stored minute by (db/verdicts.py)."""
    return reader(url).judged_by(target)


def _series(url: str, target: str, start: float, end: float, step_s: float, model: str | None,
            fields: tuple[str, ...]) -> list[SeriesPoint]:  # fmt: skip
    return reader(url).series(target, start, end, step_s, model=model, fields=fields or None)


_series_fine = st.cache_data(ttl=FINE_TTL_S, max_entries=256, show_spinner=False)(_series)
_series_coarse = st.cache_data(ttl=COARSE_TTL_S, max_entries=64, show_spinner=False)(_series)


def series(url: str, target: str, start: float, end: float, step_s: float, model: str | None,
           fields: tuple[str, ...]) -> list[SeriesPoint]:  # fmt: skip
    """A target's series (``fields`` only; () = all), kept longer when its step is coarse."""
    cached = _series_coarse if step_s >= COARSE_STEP_S else _series_fine
    return cached(url, target, start, end, step_s, model, fields)


@st.cache_data(ttl=FINE_TTL_S, max_entries=16, show_spinner=False)
def fleet_rows(settings: Settings, end: float, window_s: float) -> list[FleetRow]:
    """Every target's row of the Fleet page; ``settings`` is part of the key by value (Streamlit
    hashes a dataclass by its fields): each target is judged by its effective rules."""
    return fleet(reader(settings.db_url), settings.sweetspot, end, window_s, settings, headroom=True)


@st.cache_data(ttl=600, max_entries=64, show_spinner=False)
def sweet_spot(settings: Settings, target: str, end: float) -> SweetSpot:
    """The target's sweet spot and own curve (app/sweet_spot.py), as the evaluator resolves them; the
    learner reads a week of minutes, so ``end`` is floored to 10 minutes by the caller."""
    return resolve(reader(settings.db_url), settings, target, end)


@st.cache_data(ttl=600, max_entries=64, show_spinner=False)
def plan(settings: Settings, target: str, end: float, rps: float | None, tps: float | None,
         gpu: str | None, gpus: int | None, tp: int | None) -> what_if.Plan:  # fmt: skip
    """The capacity what-if of ``target`` (app/plan.py), as ``python -m app plan`` computes it; it reads
    a week of minutes to ``end``'s last whole 10 minutes, as the command does. A missing input raises the
    UsageError that names its fix (not cached: the page shows it)."""
    asked = [what_if.deployment(what_if.find_gpu(gpu), gpus, tp)] if gpu else []
    return what_if.plan(reader(settings.db_url), settings, target, end, rps=rps, tps=tps, asked=asked)
