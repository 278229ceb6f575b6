"""The digest: per target over a period, how much of it was in the sweet spot, TTFT P95, tok/s
(average and peak against the ceiling), preemptions, incidents, and charts of the period.

Figures come from the query facade (``Reader.window`` over the period, ``Reader.series`` for the
peak and the charts); the time in the sweet spot counts the period's minutes by the verdicts the
alert evaluator stored (``Reader.verdicts``, db/verdicts.py: the target's effective rules, the
banner's and the alerts'); a minute without a stored verdict is counted apart ("no verdict
stored"), never judged again here. Incidents come from ``alert_transitions`` (firing → resolved).
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, select

from app.formatting import (
    dram_text,
    elapsed,
    mbu_text,
    number,
    overhead_text,
    percent,
    slo_attainment_text,
    slo_in_bucket_text,
    with_unit,
)
from app.headroom import line as headroom_line
from app.notify.outbox import DIGEST_KIND, Outgoing
from app.sweet_spot import resolve
from core.durations import format_duration
from core.schedule import zone
from core.settings import Settings, effective_sweetspot
from core.text import visible
from db import schema
from db.verdicts import shares

if TYPE_CHECKING:
    from db.queries import Reader

log = logging.getLogger(__name__)

CHART_STEPS = 288  # the period's charts have this many steps at most (5 min steps for a day)
PEAK_STEP_S = 60.0  # the peak tok/s is the highest 1-minute rate
_ENDS = ("resolved", "inactive")


@dataclass(frozen=True)
class Incident:
    rule: str
    model: str
    severity: str
    started_at: float
    ended_at: float | None  # None: still firing at the end of the period
    summary: str

    def duration_s(self, end: float) -> float:
        return (self.ended_at or end) - self.started_at


@dataclass(frozen=True)
class TargetDigest:
    target: str
    in_sweet_spot: float | None  # share of the period's minutes, 0–1; None when none was judged with data
    no_data: float  # share of minutes judged "no data"
    ttft_p95_s: float | None
    tokens_per_s_avg: float | None
    tokens_per_s_peak: float | None
    ceiling_steps_per_s: float | None  # the report's ceiling (a bound on decode steps/s)
    preemptions: float | None
    incidents: tuple[Incident, ...]
    ttft_p95_bucket: tuple[float, float] | None = None  # the engine's histogram bucket holding the P95
    mbu: float | None = None  # 0–1 over the period, with its source
    mbu_source: str | None = None
    dram_bw_util: float | None = None  # 0–1, the GPUs' own DRAM reading over the period (not MBU)
    dram_bw_source: str | None = None
    overhead_traffic_gbps: float | None = None  # bytes moved beyond the model's, GB/s per GPU
    overhead_ratio: float | None = None
    # TTFT SLO attainment over the period (WindowFigures' fields of the same names)
    ttft_slo_s: float | None = None
    ttft_slo_attainment: float | None = None
    ttft_slo_bounds: tuple[float, float, float, float] | None = None
    ttft_slo_p95_bucket: tuple[float, float] | None = None  # the P95's bucket when it holds the SLO
    outside: float = 0.0  # share of minutes judged outside the sweet spot
    cannot_tell: float = 0.0  # share of minutes judged "cannot tell" (a rule could not be judged)
    not_stored: float = 0.0  # share of minutes without a stored verdict (no evaluator ran then)
    sweet_spot: str = "unknown"  # its own sweet spot at the period's end, with its source (app/sweet_spot.py)
    headroom: str = ""  # when its peak hour leaves the sweet spot, at its growth (app/headroom.py)


@dataclass(frozen=True)
class Digest:
    start: float
    end: float
    timezone: str
    targets: tuple[TargetDigest, ...]


def build(reader: Reader, engine: Engine, settings: Settings, start: float, end: float) -> Digest:
    """The digest of every stored target over [start, end)."""
    # a target not configured any more is in the digest for retired_shown_s after the collector dropped it
    names = [t.name for t in reader.targets() if t.listed(end, settings.retired_shown_s)]
    transitions = _transitions(engine, end)
    return Digest(start, end, settings.alerts.digest.timezone,
                  tuple(_target(reader, settings, name, start, end, transitions.get(name, [])) for name in names))  # fmt: skip


def chart_step(start: float, end: float) -> float:
    """The step of the period's charts: ≥ 5 min, ≤ CHART_STEPS of them."""
    return max(300.0, -(-(end - start) // CHART_STEPS))


def _target(reader: Reader, settings: Settings, name: str, start: float, end: float, transitions: list[Any]) -> TargetDigest:
    # the GPUs too: their DRAM reading stands beside MBU
    whole = reader.window(name, end, end - start, ttft_slo_s=effective_sweetspot(settings, name).ttft_p95_slo_s)
    judged = shares(reader.verdicts(name, start, end), start, end)
    rates = [p.tokens_per_s for p in reader.series(name, start, end, PEAK_STEP_S, fields=("tokens_per_s",))]
    peak = max((r for r in rates if r is not None), default=None)
    return TargetDigest(
        target=name,
        in_sweet_spot=judged.in_sweet_spot if judged.in_sweet_spot or judged.outside or judged.cannot_tell else None,
        no_data=judged.no_data, cannot_tell=judged.cannot_tell,
        ttft_p95_s=whole.ttft_p95_s, tokens_per_s_avg=whole.tokens_per_s, tokens_per_s_peak=peak,
        ceiling_steps_per_s=whole.ceiling_steps_per_s, preemptions=whole.preemptions,
        incidents=incidents(transitions, start, end), ttft_p95_bucket=whole.quantile_buckets.get("ttft_p95_s"),
        mbu=whole.mbu, mbu_source=whole.mbu_source, dram_bw_util=whole.dram_bw_util, dram_bw_source=whole.dram_bw_source,
        overhead_traffic_gbps=whole.overhead_traffic_gbps, overhead_ratio=whole.overhead_ratio,
        ttft_slo_s=whole.ttft_slo_s, ttft_slo_attainment=whole.ttft_slo_attainment, ttft_slo_bounds=whole.ttft_slo_bounds,
        ttft_slo_p95_bucket=whole.ttft_slo_in_p95_bucket(),
        outside=judged.outside, not_stored=judged.not_stored, sweet_spot=resolve(reader, settings, name, end).line(),
        headroom=headroom_line(reader, settings, name, end),
    )  # fmt: skip


def _transitions(engine: Engine, end: float) -> dict[str, list[Any]]:
    t = schema.alert_transitions
    query = select(t).where(t.c.at < end).order_by(t.c.at, t.c.id)
    out: dict[str, list[Any]] = {}
    with engine.connect() as conn:
        for row in conn.execute(query).mappings():
            out.setdefault(row["target"], []).append(row)
    return out


def incidents(transitions: list[Any], start: float, end: float) -> tuple[Incident, ...]:
    """Firing spans (from a transition to firing until one to resolved/inactive) that overlap [start, end)."""
    open_: dict[tuple[str, str], Incident] = {}
    done: list[Incident] = []
    for row in transitions:
        key = (row["rule"], row["model"])
        if row["to_state"] == "firing" and key not in open_:
            open_[key] = Incident(row["rule"], row["model"], row["severity"], row["at"], None, row["summary"] or "")
        elif row["to_state"] in _ENDS and key in open_:
            began = open_.pop(key)
            done.append(Incident(began.rule, began.model, began.severity, began.started_at, row["at"], began.summary))
    spans = [*done, *open_.values()]
    return tuple(sorted((i for i in spans if i.started_at < end and (i.ended_at is None or i.ended_at > start)),
                        key=lambda i: i.started_at))  # fmt: skip


# -- rendering ----------------------------------------------------------------------------------------
def _when(ts: float, timezone: str) -> str:
    return dt.datetime.fromtimestamp(ts, zone(timezone)).strftime("%Y-%m-%d %H:%M %Z")


def subject(digest: Digest) -> str:
    return f"[DIGEST] Sweetspot {format_duration(round(digest.end - digest.start))} to {_when(digest.end, digest.timezone)}"


def _lines(d: TargetDigest, end: float, timezone: str) -> list[str]:
    ceiling = f" (the report's ceiling: at most {number(d.ceiling_steps_per_s)} steps/s)" if d.ceiling_steps_per_s else ""
    lines = [
        f"time in the sweet spot: {percent(d.in_sweet_spot)} (outside {percent(d.outside)}"
        + (f", cannot tell {percent(d.cannot_tell)}" if d.cannot_tell else "") + f", no data {percent(d.no_data)}"
        + (f", not judged {percent(d.not_stored)})" if d.not_stored else ")"),
        f"TTFT P95: {with_unit(d.ttft_p95_s, 's')}" + (f" (vLLM's bucket ({d.ttft_p95_bucket[0]:g}, {d.ttft_p95_bucket[1]:g}] s)" if d.ttft_p95_bucket else ""),
        f"output tok/s: average {number(d.tokens_per_s_avg)}, peak {number(d.tokens_per_s_peak)}{ceiling}",
        mbu_text(d.mbu, d.mbu_source),
        dram_text(d.dram_bw_util, d.dram_bw_source) + (f"; {o}" if (o := overhead_text(d.overhead_traffic_gbps, d.overhead_ratio)) else ""),
        f"preemptions: {number(d.preemptions)}",
        f"sweet spot: {visible(d.sweet_spot, 1000)}",
        *([f"headroom: {visible(d.headroom, 1000)}"] if d.headroom else []),
        f"incidents: {len(d.incidents) or 'none'}",
    ]
    slo = [slo_attainment_text(d.ttft_slo_s, d.ttft_slo_attainment, d.ttft_slo_bounds), slo_in_bucket_text(d.ttft_slo_s, d.ttft_slo_p95_bucket)]
    lines[2:2] = [f"TTFT SLO: {line}" for line in slo[:1] if line] + [line for line in slo[1:] if line]
    for i in d.incidents:
        where = f" ({visible(i.model)})" if i.model else ""
        state = "" if i.ended_at is not None else ", still firing"
        lines.append(f"  - {_when(i.started_at, timezone)} for {elapsed(i.duration_s(end))}{state}: "
                     f"{visible(i.rule)}{where} [{i.severity}] {visible(i.summary, 1000)}")  # fmt: skip
    return lines


def render_text(digest: Digest) -> str:
    out = [subject(digest), f"from {_when(digest.start, digest.timezone)} to {_when(digest.end, digest.timezone)}", ""]
    for d in digest.targets:
        out += [f"{visible(d.target)}:", *(f"  {line}" for line in _lines(d, digest.end, digest.timezone)), ""]
    if not digest.targets:
        out.append("no target stored yet")
    return "\n".join(out) + "\n"


Charts = Callable[[str], list[bytes]]


def render_html(digest: Digest, charts: Charts, inline: bool) -> tuple[str, dict[str, str]]:
    """The HTML and its images (content id → base64 PNG); ``inline`` puts them in data: URIs instead."""
    e = html.escape
    images: dict[str, str] = {}
    parts = [f"<h1 style='font-size:18px'>{e(subject(digest))}</h1>"]
    for d in digest.targets:
        parts.append(f"<h2>{e(visible(d.target))}</h2><ul>" + "".join(f"<li>{e(line.strip())}</li>" for line in _lines(d, digest.end, digest.timezone)) + "</ul>")
        for png in charts(d.target):
            cid = f"chart{len(images) + 1}"
            data = base64.b64encode(png).decode()
            images[cid] = data
            parts.append(f"<p><img src='{'data:image/png;base64,' + data if inline else 'cid:' + cid}' width='560'></p>")
    body = "<html><body style='font-family:sans-serif'>" + "".join(parts) + "</body></html>"
    return body, ({} if inline else images)


def period_charts(reader: Reader, settings: Settings, start: float, end: float) -> Charts:
    """The TTFT and throughput panels of the dashboard over the period, as PNGs."""

    def draw(target: str) -> list[bytes]:
        from app.notify.images import WIDTH, png
        from app.ui import charts

        step = chart_step(start, end)
        frame = charts.Frame(start, end, step)
        points = reader.series(target, start, end, step)
        if not points:
            return []
        ceiling = next((t.ceiling for t in reader.targets() if t.name == target), None)
        panels = (charts.ttft_chart(points, frame, settings.sweetspot.ttft_p95_slo_s), charts.throughput_chart(points, frame, ceiling))
        out = []
        for panel in panels:
            try:
                out.append(png(panel.properties(width=WIDTH).to_dict()))
            except ValueError as exc:  # a chart that cannot be drawn costs that chart, never the digest
                log.warning("%s: a digest chart was left out: %s", target, str(exc).splitlines()[-1])
        return out

    return draw


def outgoing(digest: Digest, to: tuple[str, ...], charts: Charts, key: str) -> Outgoing:
    """The digest as a notification; ``key`` names it in the outbox (the schedule's instant, or manual)."""
    body_html, images = render_html(digest, charts, inline=False)
    return Outgoing(key, DIGEST_KIND, to, subject(digest), render_text(digest), body_html, images)


def scheduled_key(due: float) -> str:
    return f"digest scheduled {int(due)}"
