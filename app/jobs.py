"""The scheduled jobs as plain functions: collect a round, roll up, apply retention.

Each can run once from the CLI and returns a one-line description of what it stored. A source that
fails costs that source in that round (stored as a failed scrape with its error), never the round,
never the process.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from app.errors import ScrapeError
from app.settings import Settings, TargetSettings
from collectors.http import ScrapeClient
from collectors.records import GatewayReading, GpuReading, ScrapeRound, SourceResult, VllmScrape

log = logging.getLogger(__name__)


class RoundCollector:
    """Reads every source of every target; keeps one HTTP client and one NVML session between rounds."""

    def __init__(self, settings: Settings, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.clock = clock
        self.client = ScrapeClient()
        self._nvml: Any = None
        self._last_error: dict[tuple[str, str], str] = {}

    def close(self) -> None:
        self.client.close()
        if self._nvml is not None:
            self._nvml.close()

    def collect(self, target: TargetSettings) -> ScrapeRound:
        """One round for one target; never raises for a source failure."""
        ts = self.clock()
        vllm, vllm_status = self._timed(target, "vllm", lambda: self._vllm(target))
        gateway, gateway_status = (None, None)
        if target.gateway.kind != "none":
            gateway, gateway_status = self._timed(target, "gateway", lambda: self._gateway(target))
        gpus: tuple[GpuReading, ...] = ()
        gpu_status = None
        if target.gpu.source != "none":
            readings, gpu_status = self._timed(target, "gpu", lambda: self._gpus(target))
            gpus = readings or ()
        return ScrapeRound(target.name, ts, vllm, vllm_status, gateway, gateway_status, gpus, gpu_status)

    def _timed(self, target: TargetSettings, source: str, read: Callable[[], Any]) -> tuple[Any, SourceResult]:
        start = time.perf_counter()
        try:
            value = read()
        except ScrapeError as exc:
            self._log_change(target, source, exc.one_line())
            return None, SourceResult(False, exc.one_line(), time.perf_counter() - start)
        self._log_change(target, source, "")
        return value, SourceResult(True, None, time.perf_counter() - start)

    def _log_change(self, target: TargetSettings, source: str, error: str) -> None:
        # Log a source going down or coming back once, not on every round.
        key = (target.name, source)
        if self._last_error.get(key, "") != error:
            if error:
                log.warning("%s %s: %s", target.name, source, error)
            else:
                log.info("%s %s: reading again", target.name, source)
            self._last_error[key] = error

    def _vllm(self, target: TargetSettings) -> VllmScrape:
        from collectors.vllm import scrape_vllm

        return scrape_vllm(target.vllm_url, self.settings.scrape_timeout_s, self.client)

    def _gateway(self, target: TargetSettings) -> GatewayReading:
        from collectors.gateway import read_gateway

        return read_gateway(target.gateway, self.settings.scrape_timeout_s, self.client)

    def _gpus(self, target: TargetSettings) -> tuple[GpuReading, ...]:
        if target.gpu.source == "dcgm":
            from collectors.dcgm import scrape_dcgm

            return scrape_dcgm(
                target.gpu.url, self.settings.scrape_timeout_s, self.client, peak_bw_gbps=target.ceiling.bandwidth_gbps
            )
        if self._nvml is None:
            from collectors.nvml import NvmlCollector

            self._nvml = NvmlCollector(peak_bw_gbps=target.ceiling.bandwidth_gbps)
        readings: tuple[GpuReading, ...] = self._nvml.collect()
        return readings


def describe_round(round_: ScrapeRound) -> str:
    """One line saying what a round stored, for ``collect --once`` and the logs."""
    parts = [f"{round_.target}:"]
    if round_.vllm is None:
        parts.append(f"vLLM DOWN ({round_.vllm_status.error})")
    else:
        models = ", ".join(round_.vllm.models) or "no model"
        parts.append(f"vLLM up [{models}] in {round_.vllm_status.duration_s * 1000:.1f} ms")
        for name, figures in round_.vllm.models.items():
            g, c = figures.gauges, figures.counters
            parts.append(
                f"{name}: running={_fmt(g.get('requests_running'))} waiting={_fmt(g.get('requests_waiting'))}"
                f" kv={_fmt(g.get('kv_cache_usage'))} generation_tokens_total={_fmt(c.get('generation_tokens'))}"
            )
    if round_.gateway_status is not None:
        depth = round_.gateway.queue_depth if round_.gateway else None
        parts.append(f"gateway queue={_fmt(depth)}" if round_.gateway_status.ok else f"gateway DOWN ({round_.gateway_status.error})")
    if round_.gpu_status is not None:
        parts.append(f"{len(round_.gpus)} GPU(s)" if round_.gpu_status.ok else f"GPU: {round_.gpu_status.error}")
    return " ".join(parts)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g}"
