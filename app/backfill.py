"""Backfill simulated history through the same ingestion path as live scrapes (demo first start).

Each simulated sample is three exposition texts; they go through the same parsers as a live scrape
(``parse_vllm``, the gateway and dcgm parsers) and the same Writer, so the demo's history exercises
exactly the code that real data does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TextIO

from collectors.dcgm import parse_dcgm
from collectors.gateway import queue_from_prometheus, resolve_preset
from collectors.records import GatewayReading, ScrapeRound, SourceResult
from collectors.vllm import parse_vllm
from core.progress import ProgressLine
from core.settings import TargetSettings
from db.writer import Writer
from simulator import HistorySample, generate_history

OK = SourceResult(True)


def rounds_from_history(target: TargetSettings, samples: Iterator[HistorySample]) -> Iterator[ScrapeRound]:
    """Turn simulator history samples into the ScrapeRounds a live collector would have built."""
    gateway = resolve_preset(target.gateway)
    for sample in samples:
        depth = queue_from_prometheus(sample.gateway, gateway.metric, gateway.labels)
        yield ScrapeRound(
            target=target.name,
            ts=sample.ts,
            vllm=parse_vllm(sample.vllm),
            vllm_status=OK,
            gateway=GatewayReading(depth, gateway.metric),
            gateway_status=OK,
            gpus=parse_dcgm(sample.dcgm, peak_bw_gbps=target.ceiling.bandwidth_gbps),
            gpu_status=OK,
        )


def backfill(
    writer: Writer,
    target: TargetSettings,
    start_ts: float,
    end_ts: float,
    step_s: float,
    seed: int = 0,
    stream: TextIO | None = None,
) -> int:
    """Write simulated history for ``target`` between the two instants; returns the rounds written."""
    total = int((end_ts - start_ts) // step_s) + 1
    progress = ProgressLine("backfill", total, "rounds", stream)
    samples = generate_history(start_ts, end_ts, step_s, seed)

    def counted() -> Iterator[ScrapeRound]:
        for done, round_ in enumerate(rounds_from_history(target, samples), start=1):
            if done % 200 == 0:
                progress.update(done)
            yield round_

    written = writer.write_rounds(counted())
    progress.update(total)
    progress.finish()
    return written
