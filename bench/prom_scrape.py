"""The peer for collector CPU: Prometheus (Debian's package) scraping the same three pages.

``bench/bench_collector.py --prometheus`` runs both, one after the other, against the same simulator:
our collector collecting the 3-source demo target once a second (each round written to SQLite), then
a Prometheus server on 127.0.0.1 scraping the same vLLM, gateway and dcgm pages once a second into
its own TSDB. Prometheus' CPU is read from /proc (user + system of the whole server, 10 ms ticks)
over the measured window, divided by its scrape rounds; an idle Prometheus (nothing to scrape) is
measured first for as long, and its CPU is also subtracted, so both "whole server" and "scraping
only" are printed. Ours is the mean (and median) ``time.process_time()`` per round at the same
cadence: a mean against a mean.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from bench.prom_compare import free_port, wait_ready

WARM_S = 10.0


def ours_at_cadence(collect_and_write: Callable[[], None], seconds: float, every_s: float = 1.0) -> list[float]:
    """CPU ms of each round, one round every ``every_s`` for ``seconds`` (after a few unmeasured rounds)."""
    for _ in range(3):
        collect_and_write()
    times = []
    tick = time.monotonic()
    end = tick + seconds
    while tick < end:
        start = time.process_time()
        collect_and_write()
        times.append((time.process_time() - start) * 1000)
        tick += every_s
        time.sleep(max(0.0, tick - time.monotonic()))
    return times


def prometheus_cpu(urls: dict[str, str], seconds: float) -> tuple[float, float, int] | None:
    """(CPU ms per round of the whole server, of an idle server, scrape rounds); None without Prometheus."""
    if not shutil.which("prometheus"):
        return None
    jobs = {"vllm": urls["vllm_metrics"], "gateway": urls["gateway_metrics"], "dcgm": urls["dcgm_metrics"]}
    idle_ms, _ = _server_cpu({}, seconds)
    busy_ms, rounds = _server_cpu(jobs, seconds)
    return busy_ms / rounds, idle_ms / rounds, rounds


def _server_cpu(jobs: dict[str, str], seconds: float) -> tuple[float, int]:
    """(CPU ms of a Prometheus scraping ``jobs`` once a second over ``seconds``, vLLM scrapes in that window)."""
    work = Path(tempfile.mkdtemp(prefix="sweetspot-promscrape-"))
    port = free_port()
    lines = ["global: {scrape_interval: 1s, scrape_timeout: 1s}", "scrape_configs:"]
    for name, url in jobs.items():
        parts = urlsplit(url)
        lines += [f"  - job_name: {name}", f"    metrics_path: {parts.path}",
                  f"    static_configs: [{{targets: ['{parts.netloc}']}}]"]
    (work / "prometheus.yml").write_text("\n".join(lines) + "\n")
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            wait_ready(client)
            time.sleep(WARM_S)  # first scrapes, series created: not the steady state
            before = _cpu_ms(proc.pid)
            time.sleep(seconds)
            cpu = _cpu_ms(proc.pid) - before
            rounds = int(seconds)
            if jobs:
                query = f'count_over_time(up{{job="vllm"}}[{int(seconds)}s])'
                result = client.get("/api/v1/query", params={"query": query}).json()["data"]["result"]
                rounds = int(float(result[0]["value"][1])) if result else 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    return cpu, max(rounds, 1)


def _cpu_ms(pid: int) -> float:
    """User + system CPU of process ``pid`` so far, in ms (from /proc, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def report(collect_and_write: Callable[[], None], urls: dict[str, str], seconds: float) -> None:
    """Print ours and Prometheus' CPU per round of the same three pages, once a second, and the ratio."""
    print(f"the same 3 pages once a second for {seconds:g} s, ours then Prometheus (Debian's), one after the other:")
    ours = ours_at_cadence(collect_and_write, seconds)
    mean = statistics.fmean(ours)
    print(f"  {'ours (GET + parse + write to SQLite)':44} mean {mean:6.3f} ms CPU per round"
          f"   median {statistics.median(ours):6.3f}   ({len(ours)} rounds)")
    prom = prometheus_cpu(urls, seconds)
    if prom is None:
        print("  prometheus comparison skipped: prometheus not installed (apt-get install prometheus)")
        return
    whole, idle, rounds = prom
    print(f"  {'prometheus, whole server':44} mean {whole:6.3f} ms CPU per round   ({rounds} rounds)"
          f"   ratio {whole / mean:.1f}x ours")
    print(f"  {'prometheus, above an idle server':44} mean {whole - idle:6.3f} ms CPU per round"
          f"   ratio {(whole - idle) / mean:.1f}x ours   (an idle server: {idle:.3f} ms in the same time)")
