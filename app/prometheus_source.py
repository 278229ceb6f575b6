"""The Prometheus source job: each interval, one answer from Prometheus becomes one round per target.

Every distinct value of ``target_label`` is a target (discovered: registered on first sight, marked
as such in the database). A target's round is stored at the time Prometheus scraped it (the newest
sample time on its page), and only when that time moved on: a Prometheus that scrapes every 15 s
read every 5 s gives one round per 15 s, each covering its 15 s, exactly as a direct scrape at
Prometheus's cadence would. The rounds go through the same Writer as direct scrapes (counter
resets and covered time included). A target absent from the answers for ``gone_after_s`` gets one
failed round (down, with the reason); it is up again when it comes back.

A failure of the whole source (Prometheus unreachable, a selector that matches nothing, an answer
refused) is logged with its fix and costs this interval only; the collector goes on.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from collectors import prometheus
from collectors.dcgm import parse_dcgm
from collectors.prometheus import PrometheusClient, PrometheusError, TargetPage
from collectors.records import GatewayReading, GpuReading, ScrapeRound, SourceResult, VllmScrape
from collectors.vllm import parse_vllm
from core.errors import ScrapeError
from core.limits import MAX_TARGETS_PER_SOURCE  # targets one source may register (the bounds' one table)
from core.settings import GatewaySettings, PrometheusSettings, Settings, TargetSettings
from core.text import NameClaims, name_problem, visible

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from db.writer import Writer

log = logging.getLogger(__name__)
FUTURE_SKEW_S = 60.0  # how far ahead of this machine's clock a sample's time may be (clocks drift)
_refused_names: set[str] = set()  # each discovered name a target cannot have, logged once per process


def usable_name(name: str, where: str) -> bool:
    """Whether a value of the target label can name a target (:func:`core.text.name_problem`: not
    blank, nothing invisible, one script); a name that cannot is skipped, logged once."""
    problem = name_problem(name)
    if problem and name not in _refused_names:
        _refused_names.add(name)
        log.warning("%s: a series's target label %s; its series are skipped", where, problem)
    return not problem


@dataclass
class SourceRound:
    """What one read of the source produced: rounds to write, targets seen for the first time, an error."""

    rounds: list[ScrapeRound] = field(default_factory=list)
    discovered: list[TargetSettings] = field(default_factory=list)
    error: str | None = None


def discovered_target(source: PrometheusSettings, name: str) -> TargetSettings:
    """The settings a discovered target is registered with: where it comes from, the source's ceiling."""
    where = f'{prometheus.shown_url(source.url)} {source.target_label}="{name}"'
    gateway = GatewaySettings()
    if source.gateway_selector:
        gateway = GatewaySettings(kind="prometheus", url=prometheus.shown_url(source.url), metric=source.gateway_selector)
    return TargetSettings(name=name, vllm_url=f"prometheus {where}", gateway=gateway, ceiling=source.ceiling)


def with_names_form(scrape: VllmScrape, page: TargetPage) -> VllmScrape:
    """The scrape with the metric names as Prometheus stored them (``vllm_x`` when that is what was found)."""
    if not page.underscore:
        return scrape
    used = {key: name.replace("vllm:", "vllm_", 1) for key, name in scrape.metric_names_used.items()}
    return dataclasses.replace(scrape, metric_names_used=used)


class PrometheusSource:
    """Reads one ``[[prometheus]]`` source into rounds (no database access: the job writes them)."""

    def __init__(self, settings: Settings, source: PrometheusSettings, clock: Callable[[], float] = time.time,
                 claims: NameClaims | None = None) -> None:
        self.source = source
        self.clock = clock
        # who holds each name (shared by the collector's sources): a configured name, another source's,
        # or a look-alike of one is not taken
        self.claims = claims if claims is not None else NameClaims([t.name for t in settings.targets])
        self.client = PrometheusClient(source, settings.scrape_timeout_s)
        self.max_series = settings.max_series  # the targets it finds have no table of their own
        self.known: set[str] = set()
        self.seen: dict[str, float] = {}  # target → clock time it was last in an answer
        self.last_ts: dict[str, float] = {}  # target → the last round's time handed out
        self.down: set[str] = set()
        self.refused: set[str] = set()
        self._warned_unlabelled = False

    @property
    def name(self) -> str:
        return prometheus.shown_url(self.source.url)

    def close(self) -> None:
        self.client.close()

    def read(self) -> SourceRound:
        """One request to Prometheus (two or three with gateway / dcgm selectors); never raises ScrapeError."""
        out = SourceRound()
        now = self.clock()
        started = time.perf_counter()
        try:
            answer = self.client.current(prometheus.wanted_selector(self.source.selector), self.source.target_label)
            self._check(answer)
        except ScrapeError as exc:
            out.error = exc.one_line()
            self._gone(out, now, out.error)
            return out
        gateway, gateway_status = self._gateway()
        gpus, gpu_status = self._gpus()
        duration = time.perf_counter() - started
        for target, page in answer.pages.items():
            # a name is judged once (a known one is this source's; a refused one stays refused): the
            # claim's normalising costs ~20 µs a name, every round for thousands of targets
            if target in self.refused or (target not in self.known and not self._takes(target)):
                continue
            self.seen[target] = now
            if target not in self.known:
                self.known.add(target)
                out.discovered.append(discovered_target(self.source, target))
            round_ = self._round(target, page, duration, now)
            if round_ is None:
                continue
            if gateway_status is not None:
                depth = gateway.get(target)
                status = gateway_status if depth is not None or not gateway_status.ok else SourceResult(
                    False, f"no {self.source.gateway_selector} series with {self._gateway_label}=\"{target}\"")
                round_ = dataclasses.replace(round_, gateway=GatewayReading(depth, self.source.gateway_selector),
                                             gateway_status=status)
            if gpu_status is not None:
                round_ = dataclasses.replace(round_, gpus=gpus.get(target, ()), gpu_status=gpu_status)
            out.rounds.append(round_)
        self._gone(out, now, f"absent from Prometheus's answer (selector {self.source.selector}) for over "
                             f"{self.source.gone_after_s:g} s: stopped, or no longer scraped")
        return out

    def _check(self, answer: prometheus.Answer) -> None:
        label, where = self.source.target_label, self.name
        if answer.unlabelled_count and not answer.pages:
            raise PrometheusError(
                f"{answer.unlabelled_count} series of {self.source.selector} at {where} have no label {label} "
                f"(e.g. {answer.unlabelled[0]})", "Set prometheus[].target_label to the label that names a target")
        if not answer.pages:
            raise PrometheusError(f"the selector {self.source.selector} matches no series at {where}", prometheus.HINT_SELECTOR)
        if answer.unlabelled_count and not self._warned_unlabelled:
            self._warned_unlabelled = True
            log.warning("%s: %d series have no label %s and are left out (e.g. %s); narrow prometheus[].selector",
                        where, answer.unlabelled_count, label, answer.unlabelled[0])

    def _takes(self, target: str) -> bool:
        """Whether a target this source has not registered yet may be: a usable name, not held by
        another owner (:class:`core.text.NameClaims`), within MAX_TARGETS_PER_SOURCE."""
        if not usable_name(target, self.name):
            return False
        if len(self.known) >= MAX_TARGETS_PER_SOURCE:
            self._refuse(target, f"past the {MAX_TARGETS_PER_SOURCE:,} targets one source may register")
            return False
        problem = self.claims.claim(target, self.name)
        if problem:
            self._refuse(target, problem)
        return not problem

    def _refuse(self, target: str, why: str) -> None:
        if target not in self.refused and len(self.refused) < MAX_TARGETS_PER_SOURCE:  # logged once each, and not without end
            self.refused.add(target)
            log.warning("%s: a target named %s %s: its series are left out (rename it in Prometheus by "
                        "relabelling, or rename the configured target)", self.name, f"'{visible(target)}'", why)  # fmt: skip

    def _round(self, target: str, page: TargetPage, duration_s: float, now: float) -> ScrapeRound | None:
        """The target's round, None when Prometheus has not scraped it since the last one. A page
        stamped more than FUTURE_SKEW_S after ``now`` is a down round saying so, at ``now``: its time
        would hold back every later round (none is stored at or before a target's latest)."""
        ts = (page.ts_ms / 1000.0) if page.ts_ms is not None else self.clock()
        if ts > now + FUTURE_SKEW_S:
            self.last_ts[target] = max(now, self.last_ts.get(target, 0.0) + 0.001)
            reason = (f"Prometheus stamps its samples {ts - now:.0f} s in the future (its clock, or the server's, "
                      f"is ahead by more than {FUTURE_SKEW_S:g} s): not stored")
            return ScrapeRound(target, self.last_ts[target], None, SourceResult(False, reason, duration_s))
        if ts <= self.last_ts.get(target, 0.0):
            return None
        self.last_ts[target] = ts
        self.down.discard(target)
        return round_from_page(target, ts, page, self.name, duration_s, self.max_series)

    def resume(self, last_rounds: dict[str, tuple[int, bool]]) -> None:
        """Take up the targets an earlier run found (name → last round's time, up): one that vanished
        while the collector was stopped is then marked down after ``gone_after_s`` like any other."""
        now = self.clock()
        for target, (stored, up) in last_rounds.items():
            ts = min(float(stored), now)  # a round stored in the future (an older version let one in) holds nothing back
            if self.claims.claim(target, self.name):
                continue  # another owner's now (a configured target of that name, another source's)
            self.known.add(target)
            self.seen.setdefault(target, ts)
            self.last_ts[target] = max(self.last_ts.get(target, 0.0), ts)
            if not up:
                self.down.add(target)  # its down round is stored already

    def _gone(self, out: SourceRound, now: float, reason: str) -> None:
        for target, seen in self.seen.items():
            if target in self.down or now - seen < self.source.gone_after_s:
                continue
            self.down.add(target)
            ts = max(now, self.last_ts.get(target, 0.0) + 1.0)
            self.last_ts[target] = ts
            out.rounds.append(ScrapeRound(target, ts, None, SourceResult(False, reason)))

    @property
    def _gateway_label(self) -> str:
        return self.source.gateway_label or self.source.target_label

    def _gateway(self) -> tuple[dict[str, float], SourceResult | None]:
        if not self.source.gateway_selector:
            return {}, None
        try:
            answer = self.client.current(self.source.gateway_selector, self._gateway_label)
        except ScrapeError as exc:
            return {}, SourceResult(False, exc.one_line())
        return prometheus.values_by_target(answer), SourceResult(True)

    def _gpus(self) -> tuple[dict[str, tuple[GpuReading, ...]], SourceResult | None]:
        if not self.source.dcgm_selector:
            return {}, None
        try:
            answer = self.client.current(self.source.dcgm_selector, self.source.dcgm_label or self.source.target_label)
            peak = self.source.ceiling.bandwidth_gbps
            return {target: parse_dcgm(page.text, peak_bw_gbps=peak) for target, page in answer.pages.items()}, SourceResult(True)
        except ScrapeError as exc:
            return {}, SourceResult(False, exc.one_line())


def round_from_page(target: str, ts: float, page: TargetPage, where: str, duration_s: float = 0.0,
                    max_series: int | None = None) -> ScrapeRound:  # fmt: skip
    """The round one target's page makes (live or backfilled): up, or down with the reason; only the
    page's first ``max_series`` series are read (collectors.vllm.parse_vllm)."""
    up = _up_value(page)
    if up == 0.0:
        error = f"Prometheus cannot scrape it (up = 0 at {time.strftime('%H:%M:%S', time.localtime(ts))})"
        return ScrapeRound(target, ts, None, SourceResult(False, error, duration_s))
    try:
        scrape = with_names_form(parse_vllm(page.text, source=f"{where} {target}", max_series=max_series), page)
    except ScrapeError as exc:
        return ScrapeRound(target, ts, None, SourceResult(False, f"through {where}: {exc.one_line()}", duration_s))
    return ScrapeRound(target, ts, scrape, SourceResult(True, None, duration_s))


def _up_value(page: TargetPage) -> float | None:
    """Prometheus's own ``up`` of the target when the selector brought it (it does for ``{job=...}``)."""
    for line in page.lines:
        if line.startswith(("up{", "up ")):
            return float(line.rsplit(" ", 1)[1])
    return None


class PrometheusJob:
    """Runs a source each interval and writes its rounds with the collector's Writer, under its lock."""

    def __init__(self, source: PrometheusSource, writer: Writer, engine: Engine, lock: threading.Lock,
                 observe: Callable[[ScrapeRound], object] = lambda _round: None) -> None:  # fmt: skip
        self.source, self.writer, self.engine, self.lock = source, writer, engine, lock
        self.observe = observe  # each round written (the collector's /metrics counts its sources)
        self.resumed = False

    def run(self) -> list[str]:
        """Read once and write; returns one line per round written (and one for a source error)."""
        from app.jobs import describe_round
        from db.discovery import discovered_last_rounds, mark_discovered

        if not self.resumed:  # the targets of earlier runs: gone ones get their down round too
            self.source.resume(discovered_last_rounds(self.engine, self.source.name))
            self.resumed = True
        read = self.source.read()
        lines = []
        if read.error:
            log.warning("prometheus %s: %s", self.source.name, read.error)
            lines.append(f"prometheus {self.source.name}: {read.error}")
        with self.lock:
            for target in read.discovered:
                self.writer.register_target(target)
            if read.discovered:
                mark_discovered(self.engine, [t.name for t in read.discovered], self.source.name)
                log.info("prometheus %s: %d new target(s): %s", self.source.name, len(read.discovered),
                         ", ".join(t.name for t in read.discovered[:10]))
            self.writer.write_rounds(read.rounds)
        for round_ in read.rounds:
            self.observe(round_)
        lines += [describe_round(r) for r in read.rounds]
        return lines
