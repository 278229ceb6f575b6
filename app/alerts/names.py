"""The names a rule's expressions can use: the query facade's figures, a few derived ones, thresholds.

One table (:data:`FIGURE_NAMES`, :data:`DERIVED`) serves the evaluator, the banner, ``status``, the
backtest and the check of ``[[alerts.rules]]``. A figure is None when the facade has no data for
it; a rule whose value needs a None figure is in the state ``no_data`` (never "all good").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from app.formatting import clock, mbu_source_text
from app.sweet_spot import NO_SWEET_SPOT
from core.durations import format_duration
from core.histogram_slo import CANNOT_TELL, QuantileJudgement, judge_shares
from core.settings import SweetSpotSettings
from db import mbu_figures
from db.figures import rule_names
from db.results import SeriesPoint, WindowFigures, wait_label

if TYPE_CHECKING:
    from app.sweet_spot import SweetSpot

# Figures of WindowFigures / SeriesPoint (db/figures.py); a series step lacks the window-only ones.
FIGURE_NAMES: dict[str, str] = rule_names()
DERIVED: dict[str, str] = {
    "queued": "requests waiting anywhere: max(waiting_max, queue_depth_max)",
    "up": "1 when the last scrape in the window succeeded, 0 when it failed",
    "no_data": "1 when the window cannot be judged (target down, no scrape, no vLLM figures), else 0",
    "queue_growing": "1 when the gateway queue grew over the last queue_growth_s without draining",
    "queue_before": "gateway queue depth queue_growth_s ago (while growing)",
    "queue_now": "gateway queue depth now (while growing)",
    "gateway": "1 when the target has a gateway source (a queue depth or a gateway wait in the window), else 0",
    "asleep": "1 when vLLM reports its engine asleep (sleep mode: weights offloaded or discarded), else 0",
    "sleep_state": "awake, weights_offloaded, discard_all, or empty where not exposed (text, for labels)",
    "errors_exposed": "1 when the engine exposes finished_error_per_s (vLLM 0.33), else 0",
    "aborts_exposed": "1 when the engine exposes finished_abort_per_s, else 0",
    "mbu_source": "where mbu came from: engine estimate (vLLM byte counters) or modelled (text, for labels)",
    "dram_bw_source": "where dram_bw_util came from: NVML GPM or DCGM DRAM active; empty without a reading (text, for labels)",
    "mbu_missing": "why there is no mbu: each source and what it lacks (text; empty when there is one)",
    "ttft_slo_judgement": "the clients' TTFT P95 against ttft_p95_slo_s as the histogram's bucket bounds prove it: "
    "within, outside or cannot tell; empty without a share (text; core/histogram_slo.py)",
    "ttft_cannot_tell": "1 when the engine's own TTFT P95 of at least 60 requests cannot be judged against the SLO "
    "(its bucket holds the SLO), else 0 (within, outside, fewer requests, or nothing to judge)",
    "engine_ttft_slo_judgement_text": "the engine's own TTFT P95 against the SLO, with its bucket where it cannot tell (text)",
    "ttft_slo_judgement_text": "the judgement with its figures, the bucket where it cannot tell: "
    "cannot tell against 3 s: P95 in (2.5, 5] s (…) (text)",
    "expected_tokens_per_s": "output tok/s the target's own curve (its sweep, else learned, else the demo's "
    "reference) gives at running_avg; none without a curve",
    "curve_share": "tokens_per_s ÷ expected_tokens_per_s: what the target delivers against its own curve",
    "curve_source": "where the own curve came from: sweep, learned or reference (text, for labels)",
    "curve_missing": "why there is no own curve (text; empty when there is one)",
    "sweet_spot_source": "where the concurrency threshold came from: configured, sweep, benchmark, learned or reference (text)",
    "sweet_spot_missing": "why there is no sweet spot (text; empty when there is one)",
}
THRESHOLDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(SweetSpotSettings))
NAMES: frozenset[str] = frozenset((*FIGURE_NAMES, *DERIVED, *THRESHOLDS))


def window_names(f: WindowFigures, sweetspot: SweetSpotSettings, recent: Sequence[SeriesPoint] = (),
                 spot: SweetSpot | None = None) -> dict[str, Any]:  # fmt: skip
    """Every name over one window; ``recent`` are the latest series steps (for queue growth); ``spot``
    the target's resolved sweet spot and own curve (app/sweet_spot.py; None: the settings' alone, no curve)."""
    names: dict[str, Any] = {k: getattr(f, k) for k in FIGURE_NAMES}
    names["scrapes"], names["failed_scrapes"] = float(f.scrapes), float(f.failed_scrapes)
    reason = no_data_reason(f)
    growth = queue_growth(recent, f.end, sweetspot.queue_growth_s)
    names.update(
        queued=_queued(f.waiting_max, f.queue_depth_max),
        up=None if f.up is None else float(f.up),
        no_data=1.0 if reason else 0.0,
        queue_growing=0.0 if growth is None else 1.0,
        queue_before=None if growth is None else growth[0],
        queue_now=None if growth is None else growth[1],
        no_data_reason=reason,
        ttft_p95_note="at least: P95 beyond the largest finite bucket" if f.ttft_p95_in_inf_bucket else "",
        ttft_wait_note=wait_note(f),
        **_ttft_judgement(f),
        quantile_buckets=_buckets(f),  # where each quantile lies in the engine's buckets (summaries)
        gateway=1.0 if f.queue_depth_max is not None or f.gateway_wait_source is not None else 0.0,
        asleep=1.0 if f.sleep_state in ("weights_offloaded", "discard_all") else 0.0,
        sleep_state=f.sleep_state or "",
    )
    names.update(_exposed(f))
    names.update(mbu_source=mbu_source_text(f.mbu_source), mbu_missing=_mbu_missing(f), dram_bw_source=f.dram_bw_source or "")
    names.update(dataclasses.asdict(sweetspot if spot is None else spot.thresholds(sweetspot)))
    names.update(_own_curve(f, sweetspot, spot))
    return names


NO_SPOT = NO_SWEET_SPOT + "or let it learn from its traffic at higher load)"


def _own_curve(f: WindowFigures, sweetspot: SweetSpotSettings, spot: SweetSpot | None) -> dict[str, Any]:
    """The names of the target's own sweet spot and curve (the rules ``concurrency`` and ``under_delivering``)."""
    if spot is None:
        configured = sweetspot.concurrency is not None
        return {"expected_tokens_per_s": None, "curve_share": None, "curve_source": "",
                "curve_missing": "not evaluated: no curve yet", "sweet_spot_source": "configured" if configured else "",
                "sweet_spot_missing": "" if configured else NO_SPOT}  # fmt: skip
    expected = spot.expected(f.running_avg)
    share = None if expected is None or not expected or f.tokens_per_s is None else f.tokens_per_s / expected
    return {"expected_tokens_per_s": expected, "curve_share": share, **spot.names()}
def ttft_judgement(f: WindowFigures) -> QuantileJudgement | None:
    """The clients' TTFT P95 against the window's SLO from the bucket bounds (core/histogram_slo.py):
    the clients' share where a gateway was read, else the engine's; exact where a bound is the
    threshold or the gateway's own wait histogram was convolved. None without a share or an SLO."""
    client = f.client_ttft_slo_attainment is not None
    share = f.client_ttft_slo_attainment if client else f.ttft_slo_attainment
    bounds = f.client_ttft_slo_bounds if client else f.ttft_slo_bounds
    if share is None or f.ttft_slo_s is None:
        return None
    rate = f.requests_started_per_s if f.requests_started_per_s is not None else f.requests_per_s
    requests = (rate or 0.0) * f.window_s
    if bounds is None:
        return judge_shares(share, share, (f.ttft_slo_s, f.ttft_slo_s), f.ttft_slo_s, requests)
    lower_le, lower_share, upper_le, upper_share = bounds
    return judge_shares(lower_share, upper_share, (lower_le, upper_le), f.ttft_slo_s, requests)


def _ttft_judgement(f: WindowFigures) -> dict[str, str | float]:
    judged = ttft_judgement(f)
    engine = engine_ttft_judgement(f)
    return {"ttft_slo_judgement": "" if judged is None else judged.state,
            "ttft_slo_judgement_text": "" if judged is None else judged.text,
            "ttft_cannot_tell": float(engine is not None and engine.state == CANNOT_TELL and engine.requests >= MIN_P95_REQUESTS),
            "engine_ttft_slo_judgement_text": "" if engine is None else engine.text}


# ttft_cannot_tell needs a P95 of at least this many requests (three above it): the healthy weeks' nights
# put 7-24 requests' P95 in (2.5, 5] s for hours, a long prompt or two (docs/scenarios.md); the
# prefix-caching fault ~100
MIN_P95_REQUESTS = 60


def engine_ttft_judgement(f: WindowFigures) -> QuantileJudgement | None:
    """The engine's own TTFT P95 against the SLO itself from its buckets: what a bucket bound at the
    SLO would settle. The clients' judgement behind a gateway shifts the threshold by the wait (SLO −
    the mean wait), into whichever bucket that lands in, which no bound at the SLO fixes."""
    if f.ttft_slo_attainment is None or f.ttft_slo_s is None:
        return None
    requests = ((f.requests_started_per_s if f.requests_started_per_s is not None else f.requests_per_s) or 0.0) * f.window_s
    if f.ttft_slo_bounds is None:
        return judge_shares(f.ttft_slo_attainment, f.ttft_slo_attainment, (f.ttft_slo_s, f.ttft_slo_s), f.ttft_slo_s, requests)
    lower_le, lower_share, upper_le, upper_share = f.ttft_slo_bounds
    return judge_shares(lower_share, upper_share, (lower_le, upper_le), f.ttft_slo_s, requests)


def _buckets(f: WindowFigures) -> dict[str, tuple[float, float]]:
    """Each quantile's engine bucket; the client-seen TTFT P95's too where it is the engine's (no wait)."""
    out = dict(f.quantile_buckets)
    if "ttft_p95_s" in out and f.client_ttft_p95_s == f.ttft_p95_s:
        out["client_ttft_p95_s"] = out["ttft_p95_s"]
    return out


def wait_note(f: WindowFigures) -> str:
    """How the client-seen TTFT P95 was made, in parts that add up to it where a gateway adds a wait:
    ``as clients see it: the engine's median 0.40 s + the gateway wait's P95 8.08 s (estimate, Little's
    law); the engine's own P95 2.44 s``; the unknown wait said so; "" without a gateway or a wait, or
    where the engine's own P95 is the larger part (the figure is then the engine's)."""
    if f.gateway_wait_source is None:
        return ""
    if f.gateway_wait_s is None:
        return "gateway wait unknown: requests waited in the gateway while none entered the engine"
    if f.gateway_wait_s == 0 or f.ttft_p95_s is None or f.client_ttft_p95_s in (None, f.ttft_p95_s):
        return ""
    sep = "; " if f.ttft_p95_in_inf_bucket else ""
    median, wait95 = f.ttft_p50_s, f.gateway_wait_p95_s
    if median is None or wait95 is None:
        return f"{sep}as clients see it: the gateway wait on top of the engine's {f.ttft_p95_s:.3g} s"
    return (f"{sep}as clients see it: the engine's median {median:.3g} s + the gateway wait's P95 {wait95:.3g} s "
            f"({wait_label(f.gateway_wait_source)}); the engine's own P95 {f.ttft_p95_s:.3g} s")


def _mbu_missing(f: WindowFigures) -> str:
    """Why the window has no MBU ("" when it has one)."""
    if f.mbu is not None:
        return ""
    return mbu_figures.missing_reason(f.ceiling, mbu_figures.peak_gbps(f.ceiling, f.gpus), f.steps_per_s, f.ceiling_missing)


# The figures a series step and a window share: a step is judged as the window it covers.
_SHARED = tuple(f.name for f in dataclasses.fields(SeriesPoint) if f.name in {g.name for g in dataclasses.fields(WindowFigures)})


def step_window(p: SeriesPoint, target: str, step_s: float, ceiling: float | None) -> WindowFigures:
    """A series step as the window of figures it covers, [ts, ts + step_s), so that rules judge it
    through :func:`window_names`, the one conversion from figures to the names rules use (the
    backtest replays a rule over steps so). A step without a successful scrape reads as a window
    whose last scrape failed; the sleep state is the step's (an engine asleep in it)."""
    up = bool(p.up_ratio)
    tok = p.tokens_per_s
    asleep = ("discard_all" if (p.sleep_discard_all_max or 0) > 0
              else "weights_offloaded" if (p.sleep_weights_offloaded_max or 0) > 0 else None)  # fmt: skip
    return WindowFigures(
        **{k: getattr(p, k) for k in _SHARED}, target=target, model=None, window_s=step_s, start=p.ts, end=p.ts + step_s,
        ttft_p95_in_inf_bucket=False, ceiling_steps_per_s=ceiling, ceiling_share=None if tok is None or not ceiling else tok / ceiling,
        ceiling=None, gpus=(), last_scrape_at=p.ts + step_s, up=up, last_error=None if up else "no successful scrape in this step",
        scrapes=1, failed_scrapes=0 if up else 1, sleep_state=asleep,
    )  # fmt: skip


def _exposed(f: WindowFigures | SeriesPoint) -> dict[str, float]:
    """Whether the engine exposes a figure at all: the rules over it are quiet (clear) where it does
    not, rather than "no data" forever on an engine that never had it."""
    return {"errors_exposed": float(f.finished_error_per_s is not None),
            "aborts_exposed": float(f.finished_abort_per_s is not None)}


def _queued(waiting: float | None, queue: float | None) -> float | None:
    if waiting is None and queue is None:
        return None
    return max(waiting or 0.0, queue or 0.0)


def no_data_reason(f: WindowFigures) -> str:
    """Why the window cannot be judged, or "" when it can."""
    if f.retired_at is not None:  # never "down": nobody reads it any more, on purpose
        return retired_text(f.target, f.retired_at)
    if f.up is None and f.last_scrape_at is None:
        return "the target has never been scraped (is the collector running? python -m app run)"
    if f.stale_s is not None:
        return (f"stale: not scraped for {format_duration(round(f.stale_s))} (last scrape at {clock(f.last_scrape_at)}); "
                "is the collector running, and can it reach the target?")
    if f.up is False:
        error = f" ({f.last_error})" if f.last_error else ""
        return f"the target is down: the last scrape failed{error}"
    if f.scrapes == 0:
        return f"no scrape in the window (last scrape at {clock(f.last_scrape_at)}); is the collector running?"
    if f.failed_scrapes >= f.scrapes:
        return f"every scrape in the window failed ({f.last_error or 'no error recorded'})"
    if f.tokens_per_s is None and f.running_max is None:
        return "scrapes succeed but expose no vLLM figures (see the Targets page for missing metrics)"
    return ""


NOT_CONFIGURED = "not configured any more"


def retired_text(target: str, retired_at: float) -> str:
    """``not configured any more: the collector started without it at 14:02 …`` with how to drop it."""
    return (f"{NOT_CONFIGURED}: the collector started without it at {clock(retired_at)} (its history is kept; "
            f"`python -m app targets drop {target} --keep-history` takes it out of the lists now)")


def queue_growth(recent: Sequence[SeriesPoint], end: float, growth_s: float) -> tuple[float, float] | None:
    """``(first, last)`` depth when the gateway queue grew over the last ``growth_s`` seconds, else None.

    "Growing" means: the steps cover the whole span, the queue never drained (stayed > 0), and it
    ended higher than it started with a positive least-squares slope, so one dip does not reset it.
    """
    points = [(p.ts, p.queue_depth_max) for p in recent if p.ts >= end - growth_s - 1e-9]
    values = [(ts, q) for ts, q in points if q is not None]
    if len(values) < 3 or len(values) < len(points) or not _covers(values, end, growth_s):
        return None
    if min(q for _, q in values) <= 0 or values[-1][1] <= values[0][1] or _slope(values) <= 0:
        return None
    return values[0][1], values[-1][1]


def _covers(values: Sequence[tuple[float, float]], end: float, growth_s: float) -> bool:
    step = (values[-1][0] - values[0][0]) / (len(values) - 1)
    return values[0][0] <= end - growth_s + step and values[-1][0] >= end - 2 * step


def _slope(values: Sequence[tuple[float, float]]) -> float:
    n = len(values)
    mean_t = sum(t for t, _ in values) / n
    mean_q = sum(q for _, q in values) / n
    return sum((t - mean_t) * (q - mean_q) for t, q in values)
