"""A fleet of ordinary size in one collector process: 200 targets × (vLLM + gateway + 8 dcgm GPUs) at 5 s.

Run: ``.venv/bin/python bench/bench_fleet.py [--targets 200] [--interval 5] [--duration 10m]
[--no-prometheus]``. Three processes on 127.0.0.1:

- the **farm**: one live simulator (``--load 16 --speed 5``) whose vLLM, gateway and dcgm pages are
  rendered once a second and served from memory on ``--targets`` ports (one asyncio server, HTTP/1.1
  keep-alive), so each target is its own endpoint with its own connections, and rendering 600 pages
  every 5 s does not take the CPU the collector is measured on;
- the **collector** under test: ``CollectionService`` as ``python -m app collect`` runs it (the
  scheduler's collect, rollup and retention jobs, writing to a fresh SQLite file), with the collect
  job timed from the inside: how late each round started against its slot (first start + k ×
  interval), how long it took, and how many slots had no round;
- **Prometheus** (Debian's ``/usr/bin/prometheus``) scraping the same 600 pages at the same interval
  in the same run, side by side: the peer's CPU per round of the fleet.

The CPU and RSS of the collector and Prometheus are read from /proc once a second over the measured
window (after ``--warm`` seconds); CPU % is of one core. The load average at start and end is printed
beside the figures: on a shared machine the lateness moves with everyone else's load, CPU much less.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TICK = os.sysconf("SC_CLK_TCK")
GOALS = {"late_s": 1.0, "missed": 0, "cpu_pct": 25.0, "rss_mib": 150.0}


# -- the farm: the simulator's pages on many ports ----------------------------------------------------
def farm(count: int) -> None:
    """Serve the live simulator's three pages on ``count`` ports; print the ports as one JSON line."""
    from prometheus_client.exposition import generate_latest

    from simulator.api import SimOptions, start_simulator
    from simulator.expo import _Families, gateway_families, vllm_families

    sim = start_simulator(SimOptions(load=16, speed=5.0))
    pages: dict[str, bytes] = {}

    def render() -> None:
        pages["/metrics"] = generate_latest(_Families(vllm_families(sim.live.view())))
        pages["/gateway/metrics"] = generate_latest(_Families(gateway_families(sim.gateway.view())))
        pages["/dcgm/metrics"] = sim.dcgm_page()

    def refresh() -> None:
        while True:
            time.sleep(1.0)
            render()

    time.sleep(2)  # the load fills the engine so the pages have their full shape
    render()
    threading.Thread(target=refresh, daemon=True).start()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode().split("?", 1)[0]
                body = pages.get(path)
                status = b"200 OK" if body is not None else b"404 Not Found"
                body = body if body is not None else b"no such page\n"
                writer.write(b"HTTP/1.1 %s\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: %d\r\n\r\n"
                             % (status, len(body)) + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            writer.close()

    async def serve() -> None:
        servers = [await asyncio.start_server(answer, "127.0.0.1", 0, backlog=64) for _ in range(count)]
        print(json.dumps([s.sockets[0].getsockname()[1] for s in servers]), flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())


# -- the collector under test --------------------------------------------------------------------------
def collector(ports: list[int], interval_s: float, db_url: str, report: Path) -> None:
    """Run the collector service on the fleet until SIGTERM; write the collect job's timings to ``report``."""
    from app.collection import CollectionService
    from core.settings import CeilingSettings, GatewaySettings, GpuSettings, Settings, TargetSettings

    targets = tuple(
        TargetSettings(
            name=f"t{i:03d}", vllm_url=f"http://127.0.0.1:{port}/metrics",
            gateway=GatewaySettings(kind="prometheus", url=f"http://127.0.0.1:{port}/gateway/metrics",
                                    metric="sweetspot_gateway_queue_depth"),
            gpu=GpuSettings(source="dcgm", url=f"http://127.0.0.1:{port}/dcgm/metrics"),
            ceiling=CeilingSettings(weight_gb=40.0, tensor_parallel=8, bandwidth_gbps=900.0),
        )
        for i, port in enumerate(ports)
    )
    settings = Settings(targets=targets, interval_s=interval_s, db_url=db_url)
    service = CollectionService(settings)
    runs: list[tuple[float, float]] = []  # (started, took) in time.time() seconds
    collect = service._collect_logged

    def timed() -> None:
        start = time.time()
        try:
            collect()
        finally:
            runs.append((start, time.time() - start))

    service._collect_logged = timed  # type: ignore[method-assign]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    scheduled = time.time()  # the scheduler's first slot is "now" as it starts (app/scheduler.py)
    try:
        service.run_forever(stop)
    finally:
        report.write_text(json.dumps({"first_slot": scheduled, "runs": runs}))
        service.close()


# -- the measurement -------------------------------------------------------------------------------------
def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def proc_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def start_prometheus(ports: list[int], interval_s: float, work: Path) -> subprocess.Popen[bytes] | None:
    binary = shutil.which("prometheus") or ("/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None)
    if binary is None:
        return None
    from bench.prom_compare import free_port

    every = f"{interval_s:g}s"
    lines = [f"global: {{scrape_interval: {every}, scrape_timeout: {every}}}", "scrape_configs:"]
    targets = ", ".join(f"'127.0.0.1:{p}'" for p in ports)
    for job, path in (("vllm", "/metrics"), ("gateway", "/gateway/metrics"), ("dcgm", "/dcgm/metrics")):
        lines += [f"  - job_name: {job}", f"    metrics_path: {path}", f"    static_configs: [{{targets: [{targets}]}}]"]
    (work / "prometheus.yml").write_text("\n".join(lines) + "\n")
    return subprocess.Popen(
        [binary, f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{free_port()}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def lateness(t0: float, runs: list[tuple[float, float]], interval_s: float, since: float, until: float) -> dict[str, float]:
    """Lateness of each round against its slot (``t0`` + k × interval), rounds missed, round durations,
    for the rounds started inside [since, until]."""
    kept = [(start, took) for start, took in runs if since <= start <= until]
    slots = {round((start - t0) / interval_s) for start, _ in kept}
    first, last = min(slots), max(slots)
    late = [start - (t0 + round((start - t0) / interval_s) * interval_s) for start, _ in kept]
    took = [t for _, t in kept]
    return {
        "rounds": len(kept), "missed": (last - first + 1) - len(slots),
        "late_max_s": max(late), "late_median_s": statistics.median(late),
        "took_median_s": statistics.median(took), "took_max_s": max(took),
    }


def measure(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="sweetspot-fleet-"))
    me = [sys.executable, str(Path(__file__).resolve())]
    farm_proc = subprocess.Popen([*me, "--role", "farm", "--targets", str(args.targets)], cwd=ROOT,
                                 stdout=subprocess.PIPE, text=True)
    procs: list[subprocess.Popen[bytes] | subprocess.Popen[str]] = [farm_proc]
    try:
        assert farm_proc.stdout is not None
        ports = json.loads(farm_proc.stdout.readline())
        (work / "ports.json").write_text(json.dumps(ports))
        report = work / "runs.json"
        load_start = os.getloadavg()
        ours = subprocess.Popen([*me, "--role", "collector", "--ports-file", str(work / "ports.json"),
                                 "--interval", str(args.interval), "--db", f"sqlite:///{work / 'fleet.db'}",
                                 "--report", str(report)], cwd=ROOT)
        procs.append(ours)
        prom = None if args.no_prometheus else start_prometheus(ports, args.interval, work)
        if prom is not None:
            procs.append(prom)
        time.sleep(args.warm)
        watched = {"ours": ours.pid, **({"prometheus": prom.pid} if prom else {})}
        cpu0 = {k: proc_cpu_s(p) for k, p in watched.items()}
        wall0 = time.time()
        rss: dict[str, list[float]] = {k: [] for k in watched}
        while time.time() - wall0 < args.duration:
            time.sleep(1.0)
            for k, p in watched.items():
                rss[k].append(proc_rss_mib(p))
        wall = time.time() - wall0
        cpu = {k: proc_cpu_s(p) - cpu0[k] for k, p in watched.items()}
        load_end = os.getloadavg()
        ours.send_signal(signal.SIGTERM)
        ours.wait(timeout=60)
        timings = json.loads(report.read_text())
        figures = lateness(timings["first_slot"], timings["runs"], args.interval, wall0, wall0 + wall)
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    print_report(args, figures, cpu, rss, wall, load_start, load_end)


def print_report(args: argparse.Namespace, figures: dict[str, float], cpu: dict[str, float],
                 rss: dict[str, list[float]], wall: float, load_start: tuple[float, ...],
                 load_end: tuple[float, ...]) -> None:
    n, every = args.targets, args.interval
    rounds = wall / every
    ours_pct = cpu["ours"] / wall * 100
    print(f"fleet: {n} targets × (vLLM + gateway + dcgm 8 GPUs) every {every:g} s, measured {wall:.0f} s "
          f"after {args.warm:g} s of warm-up")
    print(f"load average at start {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}, "
          f"at end {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f} (2 cores, shared)")
    checks = {
        "late_s": figures["late_max_s"] <= GOALS["late_s"], "missed": figures["missed"] <= GOALS["missed"],
        "cpu_pct": ours_pct <= GOALS["cpu_pct"], "rss_mib": max(rss["ours"]) <= GOALS["rss_mib"],
    }
    verdict = {k: "met" if ok else "MISSED" for k, ok in checks.items()}
    print(f"  scheduler lateness       max {figures['late_max_s'] * 1000:7.1f} ms   median "
          f"{figures['late_median_s'] * 1000:6.1f} ms   (goal ≤ 1 s: {verdict['late_s']})")
    print(f"  rounds                   {figures['rounds']} run, {figures['missed']} missed   (goal 0: {verdict['missed']})"
          f"   each took median {figures['took_median_s']:.2f} s, max {figures['took_max_s']:.2f} s")
    print(f"  collector CPU            {ours_pct:5.1f} % of one core   (goal ≤ 25 %: {verdict['cpu_pct']})"
          f"   {cpu['ours'] * 1000 / rounds:6.1f} ms per round, {cpu['ours'] * 1000 / rounds / n:5.2f} ms per target-round")
    print(f"  collector RSS            max {max(rss['ours']):5.1f} MiB, last {rss['ours'][-1]:5.1f} MiB"
          f"   (goal ≤ 150 MiB: {verdict['rss_mib']})")
    if "prometheus" in cpu:
        prom_ms = cpu["prometheus"] * 1000 / rounds
        print(f"  prometheus, same run     {cpu['prometheus'] / wall * 100:5.1f} % of one core   {prom_ms:6.1f} ms per round,"
              f" {prom_ms / n:5.2f} ms per target-round   RSS max {max(rss['prometheus']):5.1f} MiB")
        print(f"  ours ÷ prometheus per round: {cpu['ours'] / cpu['prometheus']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", type=int, default=200)
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between rounds")
    parser.add_argument("--duration", default="10m", help="measured time (e.g. 10m, 90s)")
    parser.add_argument("--warm", type=float, default=30.0, help="seconds before measuring (first rounds, series created)")
    parser.add_argument("--no-prometheus", action="store_true", help="leave Prometheus out")
    parser.add_argument("--role", choices=("measure", "farm", "collector"), default="measure", help=argparse.SUPPRESS)
    parser.add_argument("--ports-file", help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    parser.add_argument("--report", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "farm":
        farm(args.targets)
    elif args.role == "collector":
        collector(json.loads(Path(args.ports_file).read_text()), args.interval, args.db, Path(args.report))
    else:
        from core.durations import parse_duration

        args.duration = parse_duration(args.duration)
        measure(args)


if __name__ == "__main__":
    main()
