"""Headroom: when, at its growth, a target's peak-hour demand leaves its sweet spot (issue 33 item 2).

The input is each whole UTC day's peak-hour demand (db/peaks.py: requests running + waiting + queued
in the second-busiest hour, the partial current day excluded) over the last ``SPAN_DAYS`` days, against
the target's own sweet-spot concurrency (app/sweet_spot.py: the knee). The model is statsmodels'
structural time series (``UnobservedComponents``) on the log of the peaks: a level that moves as a
random walk with a drift, the state-space form of exponential smoothing with a trend (Holt's linear
trend with its slope held), plus each day's own noise (an irregular: a peak of whole requests
wobbles by one without the level moving) and a fixed weekly pattern once two weeks are there. Logs make growth a
rate ("+3 % a day"); the Kalman filter skips a missing day; its own prediction intervals give the range.

A recent change of trend (flat for a month, growing for the last ten days) is what one drift over
the whole history cannot see: :func:`recent_turn` fits the log peaks as a straight line, a line with
a step, and a line that bends at some day, and where the bend wins clearly (BIC) the forecast is the
bent line's, continued from the turn with its least-squares prediction range.

What it says, in this order:
- no sweet spot: unknown, no forecast;
- a peak of the last 7 days at or above the sweet spot: already past it, whatever the history's length;
- fewer than ``MIN_DAYS`` days with a peak: too short, and how many more days it needs;
- no trend when the drift is within ``Z`` standard errors of zero (the filter's own variance of the
  drift at the last day); falling when below;
- else the first day the forecast's mean reaches the sweet spot (~N days, today is day 1) with a range:
  the first day the upper and the lower bound of the ``LEVEL`` prediction interval reach it (the
  lower one may stay under it for all ``HORIZON_DAYS``: "beyond").

Deterministic (maximum likelihood, analytic intervals: nothing drawn at random). One fit costs about
0.1-0.3 s, so :func:`headroom` keeps each (database, target, day, sweet spot)'s answer: the input
changes once a day.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.sweet_spot import resolve
from core.settings import Settings
from db.queries import Reader

SPAN_DAYS = 30  # the history read: the last 30 whole days
MIN_DAYS = 7  # days with a peak below which there is no forecast
WEEKLY_DAYS = 14  # from two weeks on, the model has a weekly pattern (weekends)
RECENT_DAYS = 7  # a peak at or above the sweet spot in these last days: already past it
HORIZON_DAYS = 90  # how far ahead the crossing is looked for
LEVEL = 0.8  # the prediction interval the range comes from
Z = 2.0  # the drift is a trend when more than Z standard errors from zero
FLOOR = 0.1  # requests: a day without demand, for the log

UNKNOWN, TOO_SHORT, ABOVE, NO_TREND, FALLING, CROSSING, BEYOND = (
    "unknown", "too_short", "above", "no_trend", "falling", "crossing", "beyond")  # fmt: skip


@dataclass(frozen=True)
class Headroom:
    """The forecast of one target: its ``state`` and the figures behind it (None where not reached)."""

    state: str  # one of UNKNOWN … BEYOND
    capacity: float | None  # the sweet-spot concurrency it is judged against (requests)
    days: int  # days with a peak-hour demand in the span read
    last_peak: float | None = None  # the highest peak of the last RECENT_DAYS days (requests)
    growth: float | None = None  # per day (0.03: +3 %), the model's drift
    growth_se: float | None = None  # its standard error, per day
    in_days: int | None = None  # the forecast's crossing day (1: today)
    earliest: int | None = None  # the range: the upper bound's crossing day
    latest: int | None = None  # the lower bound's (None: beyond HORIZON_DAYS)
    source: str = ""  # where the sweet spot came from (configured, sweep, benchmark, learned, reference)
    turn_days: int | None = None  # the trend changed this many days ago, and the growth is since then
    unreadable: str = ""  # why the history could not be read (state UNKNOWN)

    def text(self) -> str:
        """One line, as the Overview, the Fleet (its cell: :meth:`cell`), the digest and ``status`` write it."""
        cap = f"the sweet spot ({_n(self.capacity)} running{f', {self.source}' if self.source else ''})"
        rate = f"{100 * (self.growth or 0.0):+.1f} %/day ± {100 * (self.growth_se or 0.0):.1f}"
        if self.turn_days is not None:
            rate += f" since the trend changed {self.turn_days} days ago"
        if self.unreadable:
            return f"no forecast: could not read the history ({self.unreadable})"
        if self.state == UNKNOWN:
            return "no forecast: the sweet spot is unknown"
        if self.state == TOO_SHORT:
            return (f"history too short: {self.days} of the {MIN_DAYS} whole days of peak-hour demand a forecast needs "
                    f"({MIN_DAYS - self.days} more)")
        if self.state == ABOVE:
            return f"the peak is already past {cap}: {_n(self.last_peak)} in the peak hour of the last {RECENT_DAYS} days"
        peak = f"peak-hour demand {_n(self.last_peak)} running + queued, from {self.days} days"
        if self.state == NO_TREND:
            return f"no trend ({rate}, within {Z:g} standard errors of 0; {peak}; {cap})"
        if self.state == FALLING:
            return f"falling ({rate}; {peak}; {cap})"
        latest = f"beyond {HORIZON_DAYS}" if self.latest is None else str(self.latest)
        if self.state == BEYOND:
            return f"at this growth ({rate}) the peak stays in {cap} for more than {HORIZON_DAYS} days ({self.earliest}–{latest}; {peak})"
        return (f"at this growth ({rate}) the peak leaves {cap} in ~{self.in_days} days "
                f"({self.earliest}–{latest}, {LEVEL * 100:.0f} % range; {peak})")

    def cell(self) -> str:
        """The Fleet's short form: ``~12 d (9–15)``, ``no trend``, ``past``, ``too short (5/7 d)``, ``unknown``."""
        latest = f">{HORIZON_DAYS}" if self.latest is None else str(self.latest)
        return {UNKNOWN: "unknown", TOO_SHORT: f"too short ({self.days}/{MIN_DAYS} d)", ABOVE: "past the sweet spot",
                NO_TREND: "no trend", FALLING: "falling", BEYOND: f">{HORIZON_DAYS} d ({self.earliest}–{latest})",
                CROSSING: f"~{self.in_days} d ({self.earliest}–{latest})"}[self.state]  # fmt: skip

    def as_json(self) -> dict[str, object]:
        return {"state": self.state, "text": self.text(), "capacity": self.capacity, "days": self.days,
                "last_peak": self.last_peak, "growth_per_day": self.growth, "growth_se": self.growth_se,
                "in_days": self.in_days, "earliest": self.earliest, "latest": self.latest,
                "turn_days": self.turn_days}  # fmt: skip


def forecast(peaks: Sequence[float | None], capacity: float | None, source: str = "") -> Headroom:
    """The forecast from daily peak-hour demands, oldest first, the last one yesterday's (None: a day
    without one), against ``capacity`` (the sweet-spot concurrency; None: unknown)."""
    days = sum(p is not None for p in peaks)
    if capacity is None or capacity <= 0:
        return Headroom(UNKNOWN, None, days, source=source)
    recent = [p for p in peaks[-RECENT_DAYS:] if p is not None]
    last_peak = max(recent) if recent else None
    if last_peak is not None and last_peak >= capacity:  # whatever the history's length: past is past
        return Headroom(ABOVE, capacity, days, last_peak, source=source)
    if days < MIN_DAYS:
        return Headroom(TOO_SHORT, capacity, days, source=source)
    first = next(i for i, p in enumerate(peaks) if p is not None)
    series = np.log([max(p, FLOOR) if p is not None else math.nan for p in peaks[first:]])
    turn = recent_turn(series)
    if turn is None:
        drift, se, mean, low, high = _fit(series, weekly=days >= WEEKLY_DAYS)
    else:
        drift, se, mean, low, high = turn.drift, turn.se, turn.mean, turn.low, turn.high
    growth, growth_se = math.expm1(drift), math.exp(drift) * se
    since = None if turn is None else len(series) - turn.day
    base = Headroom(NO_TREND, capacity, days, last_peak, growth, growth_se, source=source, turn_days=since)
    if not abs(drift) > Z * se:
        return base
    if drift < 0:
        return dataclasses.replace(base, state=FALLING)
    bound = math.log(capacity)
    in_days, earliest, latest = (_first(a >= bound) for a in (mean, high, low))
    state = BEYOND if in_days is None else CROSSING
    return dataclasses.replace(base, state=state, in_days=in_days, earliest=earliest or HORIZON_DAYS, latest=latest)


def _fit(series: np.ndarray, weekly: bool) -> tuple[float, float, np.ndarray, np.ndarray, np.ndarray]:
    """(drift, its standard error, and per day ahead the forecast's mean, lower and upper bound), logs."""
    from statsmodels.tsa.statespace.structural import UnobservedComponents

    # a random-walk level with a fixed drift plus each day's own noise (the irregular): a peak-hour demand
    # is a median of whole requests, so 6 or 7 on a day of 6.4 is measurement noise, not a lasting move
    # of the level; without the irregular the walk takes every such wobble in and the drift's error
    # grows until a known 3 %/day reads "no trend"
    model = UnobservedComponents(series, level=True, stochastic_level=True, trend=True, stochastic_trend=False,
                                 irregular=True, seasonal=7 if weekly else None, stochastic_seasonal=False)  # fmt: skip
    with warnings.catch_warnings():  # a short series' optimiser speaks up (convergence); the answer stands
        warnings.simplefilter("ignore")
        result = model.fit(disp=False)
        ahead = result.get_forecast(HORIZON_DAYS)
        bounds = ahead.conf_int(alpha=1.0 - LEVEL)
    drift = float(result.filtered_state[1, -1])
    se = math.sqrt(max(float(result.filtered_state_cov[1, 1, -1]), 0.0))
    return drift, se, np.asarray(ahead.predicted_mean), np.asarray(bounds)[:, 0], np.asarray(bounds)[:, 1]


# -- a recent change of trend -------------------------------------------------------------------------
TURN_MIN_DAYS = 5  # days on each side of a turn, at the least
TURN_BIC = 6.0  # the hinge model must beat both the straight and the step model by this much BIC
Z_LEVEL = 1.2816  # the standard normal's 90th percentile: the LEVEL (80 %) two-sided range


@dataclass(frozen=True)
class Turn:
    """A recent change of trend: ``day`` the index it starts at, and the least-squares fit since then
    (per day ahead, on logs): the forecast's mean and the LEVEL range, and the drift with its error."""

    day: int
    drift: float
    se: float
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray


def recent_turn(series: np.ndarray) -> Turn | None:
    """A change of trend the history shows, when one does: the log peaks fitted by least squares as a
    straight line, a line with a step, and a line that bends (a hinge) at each day ``k`` with at least
    :data:`TURN_MIN_DAYS` on each side, each with a day-of-week effect once two weeks are there. The
    hinge is taken only when its best ``k`` beats both others by :data:`TURN_BIC` in BIC (a step change
    is a level, not a growth); the forecast then continues the line since ``k``."""
    t = np.flatnonzero(~np.isnan(series)).astype(float)
    y = series[~np.isnan(series)]
    n = len(y)
    if n < 2 * TURN_MIN_DAYS + 2:
        return None
    weekly = n >= WEEKLY_DAYS
    base = _design(t, weekly)
    bic_line = _bic(base, y)
    best: tuple[float, int] | None = None
    bic_step = math.inf
    for k in range(int(t[0]) + TURN_MIN_DAYS, int(t[-1]) - TURN_MIN_DAYS + 2):
        hinge = np.column_stack([base, np.maximum(t - k, 0.0)])
        step = np.column_stack([base, (t >= k).astype(float)])
        bic_step = min(bic_step, _bic(step, y))
        score = _bic(hinge, y)
        if best is None or score < best[0]:
            best = (score, k)
    if best is None or not best[0] + TURN_BIC < min(bic_line, bic_step):
        return None
    return _continue(t, y, best[1], len(series), weekly)


def _design(t: np.ndarray, weekly: bool) -> np.ndarray:
    """Intercept, slope and (weekly) six day-of-week columns: the columns every candidate shares."""
    cols = [np.ones_like(t), t]
    if weekly:
        cols += [(t.astype(int) % 7 == d).astype(float) for d in range(1, 7)]
    return np.column_stack(cols)


def _bic(x: np.ndarray, y: np.ndarray) -> float:
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    rss = float(np.sum((y - x @ coef) ** 2))
    return len(y) * math.log(max(rss, 1e-12) / len(y)) + x.shape[1] * math.log(len(y))


def _continue(t: np.ndarray, y: np.ndarray, k: int, length: int, weekly: bool) -> Turn:
    """The hinge fit at ``k``, continued :data:`HORIZON_DAYS` ahead with its prediction range."""
    x = np.column_stack([_design(t, weekly), np.maximum(t - k, 0.0)])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ coef
    sigma2 = float(resid @ resid) / max(len(y) - x.shape[1], 1)
    cov = sigma2 * np.linalg.pinv(x.T @ x)
    ahead = np.arange(length, length + HORIZON_DAYS, dtype=float)
    xa = np.column_stack([_design(ahead, weekly), ahead - k])
    mean = xa @ coef
    spread = Z_LEVEL * np.sqrt(np.einsum("ij,jk,ik->i", xa, cov, xa) + sigma2)
    gradient = np.zeros(x.shape[1])
    gradient[1] = gradient[-1] = 1.0  # the drift since the turn: slope + bend
    drift = float(coef[1] + coef[-1])
    return Turn(k, drift, math.sqrt(max(float(gradient @ cov @ gradient), 0.0)), mean, mean - spread, mean + spread)


def _first(reached: np.ndarray) -> int | None:
    hits = np.flatnonzero(reached)
    return int(hits[0]) + 1 if hits.size else None


def _n(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}".removesuffix(".0")


# -- over the facade ------------------------------------------------------------------------------------
# (database, target, day, sweet spot) → its forecast: the input is whole days, so it changes at midnight.
_CACHE: dict[tuple[str, str, int, float | None, str], Headroom] = {}


def headroom(reader: Reader, settings: Settings, target: str, now: float) -> Headroom:
    """``target``'s forecast at ``now`` from the stored history, against its own sweet spot."""
    spot = resolve(reader, settings, target, now)
    return headroom_of(reader, target, now, None if spot.value is None else float(spot.value), spot.source or "")


def headroom_of(reader: Reader, target: str, now: float, capacity: float | None, source: str = "") -> Headroom:
    """The forecast against a known ``capacity`` (the Fleet resolves the sweet spot once per row)."""
    today = int(now // 86400)
    key = (str(getattr(getattr(reader, "engine", None), "url", "")), target, today, capacity, source)
    if key not in _CACHE:
        if len(_CACHE) > 4096:
            _CACHE.clear()
        first = (today - SPAN_DAYS) * 86400.0
        peaks = reader.daily_peaks(target, first, SPAN_DAYS)
        _CACHE[key] = forecast([p.demand for p in peaks], capacity, source)
    return _CACHE[key]


def line(reader: Reader, settings: Settings, target: str, now: float) -> str:
    """:func:`headroom`'s text, or why there is none: a failed read costs this line, never the page or e-mail."""
    try:
        return headroom(reader, settings, target, now).text()
    except Exception as exc:  # noqa: BLE001 - the forecast is one line among many; its failure is said there
        return unreadable(exc).text()


def unreadable(exc: Exception) -> Headroom:
    """The forecast of a history that could not be read: its text says why."""
    return Headroom(UNKNOWN, None, 0, unreadable=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
