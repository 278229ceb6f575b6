"""An in-memory stand-in for ``db.queries.Reader``, built from hand-made records (tests/builders.py).

It answers the facade's methods with the figures of a scenario, so page tests can pin the verdict
(in the sweet spot, outside, target down) independently of the storage layer.
"""

from __future__ import annotations

import functools
import math
import tempfile
from pathlib import Path
from typing import Any

from db.results import GpuFigures, GpuPoint, SeriesPoint, SweepLevel, SweepRun, TargetInfo, WindowFigures
from db.verdicts import StoredVerdict
from tests.builders import CEILING, point, window

NAMES = {"ttft": "vllm:time_to_first_token_seconds", "kv_cache_usage": "vllm:kv_cache_usage_perc"}


def target_info(name: str = "demo", up: bool | None = True, error: str | None = None, now: float = 0.0) -> TargetInfo:
    return TargetInfo(
        name=name, vllm_url="http://127.0.0.1:8000/metrics", up=up, last_scrape_at=now - 3 if up is not None else None,
        last_error=error, metric_names_used=NAMES, missing_metrics=("queue_time",), models=("llama-70b-awq",),
        gpus=("GPU-0000", "GPU-0001"), gpu_source="nvml", gateway_source="[sweetspot-sim] prometheus x", ceiling=CEILING,
    )  # fmt: skip


def gpu(i: int) -> GpuFigures:
    return GpuFigures(
        uuid=f"GPU-000{i}", index=i, name="Tesla V100-SXM2-32GB", host="node1", memory_used_bytes=29.5e9,
        memory_total_bytes=34.4e9, memory_busy_pct_avg=71.0, dram_bw_util_pct_avg=None, dram_bw_gbps_avg=None,
        dram_bw_source=None, peak_bw_gbps=898.0, peak_bw_source="nvml-formula", power_w_avg=245.0,
        temperature_c_max=63.0,
    )  # fmt: skip


@functools.cache
def _no_alerts() -> Any:
    """A migrated, empty database: no alert stored (the scenarios pin figures, not alert states)."""
    from db.engine import open_engine, open_reader

    url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='sweetspot-fake-')) / 'empty.db'}"
    open_engine(url).dispose()
    return open_reader(url)


class FakeReader:
    """``up``: False makes the target down; ``wave``: a daily load wave (else steady); ``figures``: window overrides."""

    def __init__(self, now: float, up: bool = True, wave: bool = True, **figures: object) -> None:
        self.engine = _no_alerts()  # the alert reads (db/alerts.py) run on an empty migrated database
        self.now = now
        self.wave = wave
        self.up = up
        self.figures = figures
        self.calls: list[tuple[str, float]] = []

    def targets(self) -> list[TargetInfo]:
        error = None if self.up else "cannot reach http://127.0.0.1:8000/metrics (connection refused)"
        return [target_info(up=self.up, error=error, now=self.now)]

    def models(self, target: str) -> list[str]:
        return ["llama-70b-awq"]

    def window(self, target: str, end: float, window_s: float, model: str | None = None, level: int | None = None,
               gpus: bool = True, ttft_slo_s: float | None = None) -> WindowFigures:  # fmt: skip
        error = None if self.up else "connection refused"
        base = window(target=target, end=end, start=end - window_s, window_s=window_s, up=self.up, last_error=error,
                      **self.figures)  # type: ignore[arg-type]
        return base

    def series(
        self, target: str, start: float, end: float, step_s: float, model: str | None = None, **_: object
    ) -> list[SeriesPoint]:
        self.calls.append(("series", step_s))
        n = int((end - start) // step_s)
        # A daily wave in concurrency with one hole (collector down) a third of the way in.
        hole = range(n // 3, n // 3 + max(1, n // 20))
        return [self._point(start + i * step_s) for i in range(n) if i not in hole]

    def _point(self, ts: float) -> SeriesPoint:
        if not self.wave:
            return point(ts)
        wave = 0.5 + 0.5 * math.sin(ts / 3600)
        running = 6 + 22 * wave
        tok = 145 * (1 - math.exp(-running / 12))
        return point(ts, running_avg=running, running_max=running + 2, tokens_per_s=tok, ttft_p95_s=0.8 + 0.13 * running,
                     ttft_p50_s=0.4 + 0.05 * running, ttft_p99_s=1.0 + 0.18 * running, kv_cache_usage_max=0.3 + 0.65 * wave,
                     queue_depth_max=max(0.0, running - 16), preemptions=1.0 if wave > 0.97 else 0.0)  # fmt: skip

    def verdicts(self, target: str, start: float, end: float) -> list[StoredVerdict]:
        return []  # no evaluator ran: the scenarios pin figures, not stored verdicts

    def epochs(self, target: str, start: float | None = None, end: float | None = None) -> list[Any]:
        return []  # no configuration change in these scenarios

    def bench_runs(self, limit: int = 20, target: str | None = None) -> list[Any]:
        return []  # nothing imported
    def judged_by(self, target: str) -> dict[str, float | None]:
        return {}  # no evaluator ran: the page judges by its own settings

    def gpu_series(self, target: str, start: float, end: float, step_s: float) -> list[GpuPoint]:
        n = int((end - start) // step_s)
        return [
            GpuPoint(start + k * step_s, f"GPU-000{i}", 29.5e9, 34.4e9, 60.0 + i, None, None, 240.0 + i, 60.0 + i)
            for k in range(n)
            for i in range(2)
        ]

    def latest_gpus(self, target: str, window_s: float = 60.0) -> list[GpuFigures]:
        return [gpu(0), gpu(1)]

    def live_since(self, target: str) -> dict[str, float]:
        """No alert holds in the scenarios (its empty database's states, read as the facade reads them)."""
        from db.queries import Reader

        return Reader(engine=self.engine).live_since(target)

    def alert_board(self, now: float, since_s: float = 86400.0) -> Any:
        """No alert or silence in the scenarios (its empty database's board, read as the facade reads it)."""
        from db.queries import Reader

        return Reader(engine=self.engine).alert_board(now, since_s)

    def sweep_runs(self, limit: int = 10) -> list[SweepRun]:
        levels = tuple(
            SweepLevel(c, 600, 100, 0, tok, 0.3, 0.8, ttft, ttft * 1.2, 0.08, 40.0, 60.0, 0.0)
            for c, tok, ttft in ((8, 88.0, 1.4), (16, 128.0, 2.6), (32, 146.0, 4.9))
        )
        return [SweepRun(self.now - 86400, "http://127.0.0.1:8000", "llama-70b-awq", "mixed", 3.0, levels)]


class BrokenReader(FakeReader):
    """Every query fails the way a locked or corrupt database would."""

    def window(self, *args: object, **kwargs: object) -> WindowFigures:
        raise RuntimeError("database is locked")
