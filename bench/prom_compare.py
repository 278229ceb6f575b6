"""The same history and the same two chart queries on Prometheus (Debian's prometheus + promtool).

Writes the synthetic history as OpenMetrics text, backfills it with
``promtool tsdb create-blocks-from openmetrics``, starts prometheus on 127.0.0.1 (a free port) and
times ``/api/v1/query_range`` for the PromQL equivalents of our charts, next to our own reader on a
database holding the same rounds. Both timings include decoding the answer into Python values.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench.synth import MODEL, rounds
from core.settings import TargetSettings
from db.engine import open_engine
from db.queries import Reader
from db.rollup import rollup
from db.writer import Writer

GEN = "vllm:generation_tokens"
TTFT = "vllm:time_to_first_token_seconds"


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


def write_openmetrics(path: Path, start: int, end: int) -> int:
    """The synthetic rounds as OpenMetrics text (failed scrapes leave no sample); rounds written."""
    label = f'model_name="{MODEL}"'
    gen_lines: list[str] = []
    ttft_lines: list[str] = []
    count = 0
    for r in rounds("bench", start, end):
        if r.vllm is None:
            continue
        m = r.vllm.models[MODEL]
        ts = int(r.ts)
        gen_lines.append(f"{GEN}_total{{{label}}} {m.counters['generation_tokens']} {ts}\n")
        h = m.histograms["ttft"]
        for bound, cum in zip(h.bounds, h.cumulative, strict=True):
            ttft_lines.append(f'{TTFT}_bucket{{{label},le="{_le(bound)}"}} {cum} {ts}\n')
        ttft_lines.append(f"{TTFT}_count{{{label}}} {h.count} {ts}\n{TTFT}_sum{{{label}}} {h.sum} {ts}\n")
        count += 1
    with path.open("w") as fh:
        fh.write(f"# TYPE {GEN} counter\n")
        fh.writelines(gen_lines)
        fh.write(f"# TYPE {TTFT} histogram\n")
        fh.writelines(ttft_lines)
        fh.write("# EOF\n")
    return count


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _timed(fn: Callable[[], Any], repeat: int = 30) -> float:
    """Fastest of ``repeat`` runs in ms (the machine is shared: the fastest run is the cost)."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return min(times)


def _ours(db_url: str, start: int, end: int) -> None:
    engine = open_engine(db_url)
    writer = Writer(engine)
    writer.register_target(TargetSettings(name="bench"))
    writer.write_rounds(rounds("bench", start, end))
    rollup(engine, end)


def compare(days: float = 1.05) -> None:
    """Print our time, Prometheus' time and the ratio for two chart queries over the last 24 h."""
    if not shutil.which("promtool") or not shutil.which("prometheus"):
        print("prometheus comparison skipped: promtool/prometheus not installed (apt-get install prometheus)")
        return
    work = Path(tempfile.mkdtemp(prefix="sweetspot-prom-"))
    end = int(time.time()) // 3600 * 3600 - 3600
    start = end - int(days * 86400)
    try:
        n = write_openmetrics(work / "data.om", start, end)
        subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(work / "data.om"), str(work / "tsdb")],
            check=True,
            capture_output=True,
        )
        db_url = f"sqlite:///{work}/ours.db"
        _ours(db_url, start, end)
        port = free_port()
        (work / "prometheus.yml").write_text("global: {}\n")
        proc = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={work / 'prometheus.yml'}",
                f"--storage.tsdb.path={work / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=3650d",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _run_queries(f"http://127.0.0.1:{port}", Reader(db_url), start, end, n)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _median_gap(ours: list[Any], prom: list[float]) -> float:
    """Median relative difference per point (Prometheus extrapolates; we sum exact increases)."""
    gaps = [abs(a - b) / b for a, b in zip(ours, prom, strict=False) if a is not None and b]
    return sorted(gaps)[len(gaps) // 2] if gaps else float("nan")


def wait_ready(client: httpx.Client) -> None:
    for _ in range(300):
        try:
            if client.get("/-/ready").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError("prometheus did not become ready")


def _run_queries(base: str, reader: Reader, start: int, end: int, n: int) -> None:
    lo = end - 86400
    cases = [
        ("tok/s per minute over 24 h", f"sum(increase({GEN}_total[1m])) / 60", 60, "tokens_per_s"),
        (
            "TTFT P95 per 5 min over 24 h",
            f"histogram_quantile(0.95, sum by (le) (increase({TTFT}_bucket[5m])))",
            300,
            "ttft_p95_s",
        ),
    ]
    with httpx.Client(base_url=base, timeout=60) as client:
        wait_ready(client)
        print(f"prometheus comparison ({n} rounds backfilled with promtool, prometheus on 127.0.0.1):")
        for name, promql, step, field in cases:
            params = {"query": promql, "start": lo + step, "end": end, "step": step}

            def prom(params: dict[str, Any] = params) -> list[Any]:
                answer = client.get("/api/v1/query_range", params=params).json()
                return [float(v) for s in answer["data"]["result"] for _, v in s["values"]]

            def ours(step: int = step, field: str = field) -> list[Any]:
                return reader.series_columns("bench", lo, end, step, fields=[field])[field]

            ours_ms, prom_ms = _timed(ours), _timed(prom)
            print(
                f"  {name:32} ours {ours_ms:7.2f} ms   prometheus {prom_ms:7.2f} ms (fastest of 30)   "
                f"ratio {prom_ms / ours_ms:5.1f}× ({len(prom())} vs {sum(v is not None for v in ours())} points; "
                f"median |difference| {_median_gap(ours(), prom()):.1%})"
            )


if __name__ == "__main__":
    compare()
