"""The scheduled jobs as plain functions: collect a round, roll up, apply retention.

Each can run once from the CLI and returns a one-line description of what it stored. A source that
fails costs that source in that round (stored as a failed scrape with its error), never the round,
never the process.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from app.gpu_reader import GpuReader
from collectors import dcgm, gateway, vllm
from collectors.expfmt import MAX_BUCKETS, MAX_LABEL_VALUE_CHARS, MAX_LINE_CHARS
from collectors.fetch import Answer, Fetcher, Get
from collectors.records import GatewayReading, GpuReading, ScrapeRound, SourceResult, VllmScrape
from core.errors import ScrapeError
from core.redact import masked
from core.settings import Settings, TargetSettings
from core.text import visible

log = logging.getLogger(__name__)


class RoundReader:
    """Reads every source of every target; keeps one HTTP fetcher and one NVML session between rounds."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.clock = clock
        self.fetcher = Fetcher()
        self._nvml: Any = None
        self._gpus = GpuReader(self._nvml_gpus)
        self._last_error: dict[tuple[str, str], str] = {}
        for target in settings.targets:
            for source in ("vllm", "gateway", "gpu"):
                if not target.source_http(source).tls_verify:
                    log.warning("%s %s: TLS certificates are not verified (http.tls_verify = false)", target.name, source)

    def close(self) -> None:
        self.fetcher.close()
        self._gpus.close()
        if self._nvml is not None and not self._gpus.busy():  # a stuck reading holds NVML's lock: leave it
            self._nvml.close()

    def collect(self, target: TargetSettings) -> ScrapeRound:
        """One round for one target; never raises for a source failure."""
        (round_,) = self.collect_all((target,))
        return round_

    def collect_all(self, targets: Iterable[TargetSettings]) -> Iterator[ScrapeRound]:
        """One round for each target, yielded as each is complete; never raises for a source failure.

        Every GET of every target is sent at once (collectors/fetch.py), NVML is read on its own
        thread meanwhile, and each answer is parsed as it arrives: a slow or unreachable source (a
        GPU whose NVML calls hang included) delays no other for longer than the scrape timeout, and a
        target's round comes as soon as its own sources are in. A source's ``duration_s`` runs from
        its GET sent to its answer parsed.
        """
        rounds: list[_Round] = []
        gets: list[Get] = []
        for target in targets:
            round_ = _Round(target, self.clock(), self.settings.series_limit(target))
            rounds.append(round_)
            for source, get in _http_sources(target):
                round_.left += 1
                if get is None:  # nothing to fetch (a gateway preset of kind none)
                    round_.results[source] = GatewayReading(queue_depth=None, source="none"), SourceResult(True, None, 0.0)
                    round_.left -= 1
                else:
                    gets.append(Get((round_, source), get[0], get[1], get[2]))
        # Local GPUs: read on the NVML thread while the answers are on their way (app/gpu_reader.py).
        gpu_reads = [(r, self._gpus.start(r.target), time.perf_counter()) for r in rounds if r.target.gpu.source == "nvml"]
        for round_, _, _ in gpu_reads:
            round_.left += 1
        yield from (r.done() for r in rounds if r.left == 0)
        for answer in self.fetcher.fetch_many(gets, self.settings.scrape_timeout_s):
            round_, source = answer.key  # type: ignore[misc]
            if source == "vllm" and answer.answered_at is not None:
                # On the round's clock: no later than that clock has run since the round began (a
                # test's fixed clock has not run at all; perf_counter's offset added to it leaked
                # the wall's jitter into every rate: 481 steps/s for 480)
                ran = max(0.0, self.clock() - round_.ts)
                round_.vllm_offset = min(answer.answered_at - round_.began, ran)
            self._record(round_, source, time.perf_counter() - answer.duration_s, _parse, source, answer)
            if round_.left == 0:
                yield round_.done()
        for round_, job, start in gpu_reads:  # each reading gets the scrape timeout from its start
            self._record(round_, "gpu", start, self._gpus.result, job, job.started + self.settings.scrape_timeout_s)
            if round_.left == 0:
                yield round_.done()

    def _record(self, round_: _Round, source: str, began: float, read: Callable[..., Any], *args: Any) -> None:
        """Store what ``read(*args)`` gives as ``source``'s result, timed from ``began`` (perf_counter)."""
        try:
            value = read(*args)
        except ScrapeError as exc:
            self._log_change(round_.target, source, exc.one_line())
            round_.results[source] = None, SourceResult(False, exc.one_line(), time.perf_counter() - began)
        except Exception as exc:
            # Not an error a collector expects (a bug, or input it did not foresee): it still costs
            # this source in this round only, stored as down with what happened; the traceback is
            # logged once per kind of failure.
            error = f"collector error ({type(exc).__name__}: {str(exc)[:160]})"
            key = (round_.target.name, source)
            if self._last_error.get(key, "") != error:
                log.exception("%s %s: %s", round_.target.name, source, error)
                self._last_error[key] = error
            round_.results[source] = None, SourceResult(False, error, time.perf_counter() - began)
        else:
            self._log_change(round_.target, source, "")
            if source == "vllm":
                self._log_series_limit(round_.target, value)
                self._log_duplicates(round_.target, value)
            if source == "gateway":
                self._log_wait(round_.target, value)
            round_.results[source] = value, SourceResult(True, None, time.perf_counter() - began)
        round_.left -= 1

    def _log_series_limit(self, target: TargetSettings, scrape: VllmScrape) -> None:
        # Once when a target's page goes over its limit (and once when it is back under), not every round.
        key = (target.name, "series")
        over = f"over {scrape.series_limit}" if scrape.series_dropped else ""
        if self._last_error.get(key, "") != over:
            if over:
                log.warning("%s vllm: %d series over max_series = %d dropped (the page's first %d are kept; raise"
                            " targets[].max_series to keep them all)", target.name, scrape.series_dropped,
                            scrape.series_limit, scrape.series_limit)  # fmt: skip
            else:
                log.info("%s vllm: the page is within max_series again", target.name)
            self._last_error[key] = over
        key, refused = (target.name, "bounds"), "over" if scrape.lines_refused else ""
        if self._last_error.get(key, "") != refused:
            if refused:
                log.warning("%s vllm: %d lines left out over the parser's bounds (a line over %d characters, a label "
                            "value over %d, or a histogram's buckets past %d; docs/security.md)", target.name,
                            scrape.lines_refused, MAX_LINE_CHARS, MAX_LABEL_VALUE_CHARS, MAX_BUCKETS)  # fmt: skip
            self._last_error[key] = refused

    def _log_duplicates(self, target: TargetSettings, scrape: VllmScrape) -> None:
        # Once when a target's page starts repeating samples (and once when it stops), not every round.
        key = (target.name, "duplicates")
        repeated = "repeated" if scrape.duplicate_samples else ""
        if self._last_error.get(key, "") != repeated:
            if repeated:
                log.warning("%s vllm: %d samples repeat a name and labels already on the page; the first of each is "
                            "kept, the repeats dropped (check the exporter or the proxy in front of it)",
                            target.name, scrape.duplicate_samples)
            else:
                log.info("%s vllm: the page repeats no sample any more", target.name)
            self._last_error[key] = repeated

    def _log_wait(self, target: TargetSettings, reading: GatewayReading) -> None:
        # Once when the gateway's wait histogram cannot be read (and once when it can again): the wait
        # is then Little's law's estimate, and gateway_wait_source says so without the detail.
        key, note = (target.name, "gateway wait"), reading.wait_note
        if self._last_error.get(key, "") != note:
            if note:
                log.warning("%s gateway: %s; the gateway wait is estimated by Little's law (targets[].gateway.wait_metric)",
                            target.name, note)
            else:
                log.info("%s gateway: its wait histogram reads again", target.name)
            self._last_error[key] = note

    def _log_change(self, target: TargetSettings, source: str, error: str) -> None:
        # Log a source going down or coming back once, not on every round.
        key = (target.name, source)
        if self._last_error.get(key, "") != error:
            if error:
                log.warning("%s %s: %s", target.name, source, error)
            else:
                log.info("%s %s: reading again", target.name, source)
            self._last_error[key] = error

    def _nvml_gpus(self, target: TargetSettings) -> tuple[GpuReading, ...]:
        if self._nvml is None:
            from collectors.nvml import NvmlCollector

            self._nvml = NvmlCollector(peak_bw_gbps=target.ceiling.bandwidth_gbps)
        readings: tuple[GpuReading, ...] = self._nvml.collect()
        return readings


def _http_sources(target: TargetSettings) -> Iterator[tuple[str, tuple[str, Any, str] | None]]:
    """(source, (URL, HTTP settings, hint) or None when nothing is fetched) for each HTTP source."""
    yield "vllm", (target.vllm_url, target.source_http("vllm"), vllm.HINT)
    if target.gateway.kind != "none":
        settings = gateway.resolve_preset(target.gateway)
        yield "gateway", None if settings.kind == "none" else (settings.url, target.source_http("gateway"), gateway.HINT_URL)
    if target.gpu.source == "dcgm":
        yield "gpu", (target.gpu.url, target.source_http("gpu"), dcgm.HINT)


def _parse(source: str, answer: Answer) -> Any:
    """The record of ``answer``'s page, parsed by its source's collector; raises its ScrapeError."""
    if answer.error is not None:
        raise answer.error
    assert answer.text is not None
    round_ = answer.key[0]  # type: ignore[index]
    target: TargetSettings = round_.target
    if source == "vllm":
        return vllm.vllm_from_page(masked(target.vllm_url), answer.text, target.engine, round_.max_series)
    if source == "gateway":
        return gateway.gateway_from_page(gateway.resolve_preset(target.gateway), answer.text)
    return dcgm.dcgm_from_page(masked(target.gpu.url), answer.text, target.ceiling.bandwidth_gbps)


class _Round:
    """One target's round while its sources are read: what each gave, and how many are still to come."""

    def __init__(self, target: TargetSettings, ts: float, max_series: int | None = None) -> None:
        self.target = target
        self.ts = ts
        self.began = time.perf_counter()  # with ts: where on ts's clock the vLLM page came
        self.vllm_offset: float | None = None
        self.max_series = max_series  # series kept from its vLLM page (Settings.series_limit)
        self.results: dict[str, tuple[Any, SourceResult]] = {}
        self.left = 0  # sources started and not recorded yet (collect_all counts them as it starts them)

    def done(self) -> ScrapeRound:
        vllm, vllm_status = self.results["vllm"]
        gateway, gateway_status = self.results.get("gateway", (None, None))
        gpus, gpu_status = self.results.get("gpu", (None, None))
        vllm_at = None if self.vllm_offset is None else self.ts + self.vllm_offset
        return ScrapeRound(self.target.name, self.ts, vllm, vllm_status, gateway, gateway_status, gpus or (), gpu_status,
                           vllm_at)


def describe_round(round_: ScrapeRound) -> str:
    """One line saying what a round stored, for ``collect --once`` and the logs: names from outside
    (models, a target, an error) each made :func:`core.text.visible` (escaped, bounded)."""
    parts = [f"{visible(round_.target)}:"]
    if round_.vllm is None:
        parts.append(f"vLLM DOWN ({visible(round_.vllm_status.error, 2000)})")
    else:
        models = ", ".join(map(visible, round_.vllm.models)) or "no model"
        parts.append(f"vLLM up [{models}] in {round_.vllm_status.duration_s * 1000:.1f} ms")
        for name, figures in round_.vllm.models.items():
            g, c = figures.gauges, figures.counters
            parts.append(
                f"{visible(name)}: running={_fmt(g.get('requests_running'))} waiting={_fmt(g.get('requests_waiting'))}"
                f" kv={_fmt(g.get('kv_cache_usage'))} generation_tokens_total={_fmt(c.get('generation_tokens'))}"
            )
    if round_.gateway_status is not None:
        depth = round_.gateway.queue_depth if round_.gateway else None
        parts.append(f"gateway queue={_fmt(depth)}" if round_.gateway_status.ok
                     else f"gateway DOWN ({visible(round_.gateway_status.error, 2000)})")
    if round_.gpu_status is not None:
        parts.append(f"{len(round_.gpus)} GPU(s)" if round_.gpu_status.ok else f"GPU: {visible(round_.gpu_status.error, 2000)}")
    return " ".join(parts)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g}"
