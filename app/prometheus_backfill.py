"""Import history a Prometheus already holds: ``query_range`` of the raw series, one round per step.

Each step of each target becomes the round a live read at that instant would have made (the same
page building, parser and Writer as the Prometheus source), so counter resets and covered time are
handled as for live data. The range is fetched in chunks sized to keep an answer near
``SAMPLES_PER_REQUEST`` samples (and under Prometheus's 11,000 points per series); a chunk refused
for too many samples is halved. After each chunk is committed, ``backfill_progress`` records how
far the import got, so a second run continues from there; the Writer also never stores a round at
or before a target's latest one, so nothing is ever stored twice.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Container, Iterator
from dataclasses import dataclass
from typing import TextIO

from sqlalchemy import Engine

from app.prometheus_source import FUTURE_SKEW_S, discovered_target, round_from_page, usable_name
from collectors.prometheus import (
    PrometheusClient,
    TargetPage,
    TooLarge,
    matrix_rows,
    sample_value,
    seconds,
    shown_url,
    wanted_selector,
)
from collectors.records import ScrapeRound
from core.errors import ScrapeError
from core.progress import ProgressLine
from core.settings import PrometheusSettings
from db.discovery import backfill_done_until, configured_names, mark_discovered, save_backfill_progress
from db.writer import Writer

log = logging.getLogger(__name__)
SAMPLES_PER_REQUEST = 400_000
MAX_POINTS = 11_000  # Prometheus refuses a range query with more points per series


@dataclass(frozen=True)
class BackfillResult:
    rounds: int
    targets: int
    start: float
    end: float
    resumed_from: float | None
    names: tuple[str, ...] = ()  # the targets written (their history is judged next: app/alerts/replay.py)


def progress_key(source: PrometheusSettings) -> str:
    """What ``backfill_progress`` is keyed by: the server and the selector (another selector starts afresh)."""
    return f"{shown_url(source.url)} {source.selector}"


def rounds_from_matrix(result: list[dict], source: PrometheusSettings, now: float | None = None,
                       refused: Container[str] = ()) -> Iterator[ScrapeRound]:  # fmt: skip
    """One round per (target, step) of a range answer, in time order per target. Points that are
    not ``[finite time, number]`` are left out, as are points stamped after ``now`` + FUTURE_SKEW_S
    (a server whose clock runs ahead would hold every later round back) and the targets of
    ``refused`` (configured targets' names: a discovered target never mixes with one)."""
    pages: dict[str, dict[float, TargetPage]] = defaultdict(dict)
    latest = None if now is None else now + FUTURE_SKEW_S
    left_out = 0
    where = shown_url(source.url)
    for target, name, labels, values in matrix_rows(result, source.target_label):
        if target in refused or not usable_name(target, where):  # "", " ", NUL: never registered as a target
            continue
        by_ts = pages[target]
        for point in values:
            stamp = seconds(point[0]) if isinstance(point, list) and len(point) == 2 else None
            value = sample_value(point[1]) if stamp is not None else None
            if stamp is None or value is None or (latest is not None and stamp > latest):
                left_out += 1
                continue
            page = by_ts.get(stamp)
            if page is None:
                page = by_ts[stamp] = TargetPage()
            page.add(name, labels, value, None)
    if left_out:
        log.warning("backfill: %d points of %s left out: not [time, number], or stamped more than %g s after now",
                    left_out, where, FUTURE_SKEW_S)
    for target in sorted(pages):
        for ts, page in sorted(pages[target].items()):
            yield round_from_page(target, ts, page, where)


def backfill(
    engine: Engine,
    source: PrometheusSettings,
    since_s: float,
    step_s: float,
    now: float,
    timeout_s: float = 30.0,
    stream: TextIO | None = None,
) -> BackfillResult:
    """Import [now − since_s, now) at ``step_s``, continuing a previous run of the same source."""
    key = progress_key(source)
    client = PrometheusClient(source, timeout_s)
    # whole steps since the epoch: a VictoriaMetrics that aligns a range to its step moves nothing
    end = math.floor(client.settled_before(now) / step_s) * step_s
    start = math.floor(now / step_s) * step_s - math.floor(since_s / step_s) * step_s
    done = backfill_done_until(engine, key)
    resumed = float(done) if done is not None and done > start else None
    start = resumed if resumed is not None else start
    writer = Writer(engine)
    known: set[str] = set()
    refused, warned = configured_names(engine), set[str]()  # a discovered target never mixes its rounds into a configured one's
    written = 0
    try:
        steps_total = max(0, int(round((end - start) / step_s)))
        selector = wanted_selector(source.selector)
        # a second run of the same period has nothing left, or nothing Prometheus still holds: 0 added, no error
        chunk = 0 if resumed is not None and start >= end else \
            _chunk_steps(client, selector, source.selector, start, end, resumed is not None)
        if chunk == 0:
            return BackfillResult(0, 0, start, end, resumed)
        progress = ProgressLine("backfill", steps_total, "steps", stream)
        at = start
        while at < end:
            last = min(at + (chunk - 1) * step_s, end - step_s)
            try:
                result = client.query_range(selector, at, last, step_s)
            except ScrapeError as exc:
                # by the answer's status, not its text: the message holds the URL, and a port such as
                # 42217 read as a 422 (a hostile answer was retried in ever smaller chunks)
                if chunk > 1 and (isinstance(exc, TooLarge) or getattr(exc, "status", None) in (422, 503)):
                    chunk = max(1, chunk // 2)  # too many samples for one answer: smaller chunks
                    log.info("backfill: the server refused %d steps at once; trying %d", chunk * 2, chunk)
                    continue
                raise
            rounds = list(rounds_from_matrix(result, source, now, refused))
            clash = sorted({t for t, *_ in matrix_rows(result, source.target_label)} & refused - warned)
            if clash:
                warned.update(clash)
                log.warning("backfill: %s found targets named as configured ones (%s): left out; rename them in "
                            "Prometheus (relabelling) or the configured target", shown_url(source.url), ", ".join(clash[:5]))
            new = sorted({r.target for r in rounds} - known)
            for name in new:
                writer.register_target(discovered_target(source, name))
            if new:
                mark_discovered(engine, new, shown_url(source.url))
                known.update(new)
            written += writer.write_rounds(rounds)
            at = last + step_s
            save_backfill_progress(engine, key, int(at))
            progress.update(int(round((at - start) / step_s)))
        progress.finish(f"({written:,} rounds of {len(known)} targets)")
    finally:
        writer.close()
        client.close()
    return BackfillResult(written, len(known), start, end, resumed, tuple(sorted(known)))


def _chunk_steps(client: PrometheusClient, selector: str, asked: str, start: float, end: float,
                 resumed: bool = False) -> int:  # fmt: skip
    """Steps per request: about SAMPLES_PER_REQUEST samples for the series the selector matched over
    the period backfilled (not at "now": the targets of a past incident may no longer be scraped).
    0 when a resumed run finds no series in what is left of its period: nothing new to add."""
    series = len(client.series(selector, start, end))
    if series == 0 and resumed:
        return 0
    if series == 0:
        from collectors.prometheus import HINT_SELECTOR, PrometheusError

        raise PrometheusError(f"the selector {asked} matches no series at {client.shown} over the period backfilled",
                              HINT_SELECTOR)
    return max(1, min(MAX_POINTS, SAMPLES_PER_REQUEST // series))
