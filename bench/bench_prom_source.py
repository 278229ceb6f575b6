"""The Prometheus source at scale: 100 replay targets scraped by Debian's prometheus, read through it.

1. Record pages of a loaded simulator (plain text format, as vLLM serves it), then start
   ``bench/replay_targets.py`` in its own process: ``--targets`` endpoints on 127.0.0.1, each
   serving those pages in turn, one page per ``--period`` (5 s), out of step with each other.
2. Start Debian's ``prometheus`` on 127.0.0.1 scraping them every ``--period``.
3. For ``--seconds``, at the same time: Sweetspot scraping every target directly each period
   (``RoundReader``, as ``collect`` does) into one SQLite file, and Sweetspot reading the same
   targets through Prometheus (``PrometheusSource`` every half period) into another.
4. Compare, per target, the figures of a window both cover (tok/s, TTFT P95, running, KV), and
   time one source round alone (the request, splitting, parsing, the rounds; then the write)
   for ``--rounds`` rounds with nothing else running in this process. Goal: ≤ 1 s of wall time.

Usage: .venv/bin/python bench/bench_prom_source.py [--targets 100] [--seconds 120] [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.jobs import RoundReader  # noqa: E402
from app.prometheus_source import PrometheusSource  # noqa: E402
from core.settings import PrometheusSettings, Settings, TargetSettings  # noqa: E402
from db.engine import open_engine  # noqa: E402
from db.queries import Reader  # noqa: E402
from db.writer import Writer  # noqa: E402
from simulator import SimOptions, start_simulator  # noqa: E402
from tests.prometheus_server import PrometheusServer  # noqa: E402

GOAL_S = 1.0
FIGURES = ("tokens_per_s", "ttft_p95_s", "running_avg", "kv_cache_usage_max", "preemptions")


def record(pages: int) -> list[str]:
    sim = start_simulator(SimOptions(port=0, seed=7, speed=20, load=24))
    try:
        time.sleep(3)
        out = []
        for _ in range(pages):
            out.append(httpx.get(sim.urls["vllm_metrics"]).text)
            time.sleep(0.5)
        return out
    finally:
        sim.stop()


def run_until(stop: float, every_s: float, step: object) -> None:
    tick = time.monotonic()
    while tick < stop:
        step()  # type: ignore[operator]
        tick += every_s
        time.sleep(max(0.0, tick - time.monotonic()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--period", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    import shutil

    if not (shutil.which("prometheus") or Path("/usr/bin/prometheus").exists()):
        print("SKIP: Debian's prometheus is not installed (apt-get install prometheus)")
        return 0
    work = Path(tempfile.mkdtemp(prefix="sweetspot-promsource-"))
    (work / "pages.json").write_text(json.dumps(record(40)))
    replay = subprocess.Popen([sys.executable, "-m", "bench.replay_targets", str(work / "pages.json"), str(args.targets),
                               str(args.period)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert replay.stdout is not None
    ports = json.loads(replay.stdout.readline())
    urls = [f"http://127.0.0.1:{p}/metrics" for p in ports]
    server = PrometheusServer(work, urls, interval=f"{args.period:g}s")
    try:
        server._wait(lambda: len(server.query("up == 1")) == args.targets, f"scrape {args.targets} targets", 120)
        settings = Settings(interval_s=args.period, scrape_timeout_s=args.period)
        direct_url, through_url = f"sqlite:///{work}/direct.db", f"sqlite:///{work}/through.db"
        targets = tuple(TargetSettings(name=u.split("/")[2], vllm_url=u) for u in urls)
        direct_engine, through_engine = open_engine(direct_url), open_engine(through_url)
        direct, through = Writer(direct_engine), Writer(through_engine)
        for t in targets:
            direct.register_target(t)
        collector = RoundReader(dataclasses_replace(settings, targets))
        source = PrometheusSource(settings, PrometheusSettings(url=server.url))
        began = time.time()
        stop = time.monotonic() + args.seconds
        side = threading.Thread(target=run_until, args=(stop, args.period,
                                lambda: [direct.write_round(r) for r in collector.collect_all(targets)]))  # fmt: skip
        side.start()
        run_until(stop, args.period / 2, lambda: through.write_rounds(source.read().rounds))
        side.join()
        ended = time.time()
        compare(direct_url, through_url, [t.name for t in targets], began + 30, ended - 5)
        time_rounds(source, through, args.rounds, args.period, args.targets)
        collector.close()
        source.close()
        direct.close()
        through.close()
    finally:
        server.stop()
        replay.stdin.close()  # type: ignore[union-attr]
        replay.wait(timeout=30)
    return 0


def dataclasses_replace(settings: Settings, targets: tuple[TargetSettings, ...]) -> Settings:
    import dataclasses

    return dataclasses.replace(settings, targets=targets)


def compare(direct_url: str, through_url: str, names: list[str], start: float, end: float) -> None:
    a, b = Reader(direct_url), Reader(through_url)
    diffs: dict[str, list[float]] = {f: [] for f in FIGURES}
    missing = 0
    for name in names:
        fa, fb = a.window(name, end, end - start), b.window(name, end, end - start)
        for key in FIGURES:
            va, vb = getattr(fa, key), getattr(fb, key)
            if va is None or vb is None:
                missing += va is not vb
                continue
            diffs[key].append(abs(va - vb) / abs(va) if va else abs(vb))
    print(f"figures over the same {end - start:.0f} s window, direct scrape vs through Prometheus, {len(names)} targets "
          f"({missing} figure(s) present on one side only):")  # fmt: skip
    for key, values in diffs.items():
        if values:
            print(f"  {key:20} median difference {100 * statistics.median(values):5.2f} %   max {100 * max(values):5.2f} %"
                  f"   ({len(values)} targets)")  # fmt: skip


def time_rounds(source: PrometheusSource, writer: Writer, rounds: int, period: float, targets: int) -> None:
    reads, writes, stored, gets = [], [], [], []
    from collectors.prometheus import wanted_selector

    params = {"match[]": wanted_selector(source.source.selector)}
    for _ in range(rounds):
        t = time.perf_counter()
        source.client.client.get(source.client.base + "/federate", params=params).raise_for_status()
        gets.append(time.perf_counter() - t)  # Prometheus's part: the same request, nothing read from it
        t = time.perf_counter()
        read = source.read()
        reads.append(time.perf_counter() - t)
        t = time.perf_counter()
        writer.write_rounds(read.rounds)
        writes.append(time.perf_counter() - t)
        stored.append(len(read.rounds))
        time.sleep(period / 2)
    total = [r + w for r, w in zip(reads, writes, strict=True)]
    print(f"one source round for {targets} targets ({rounds} rounds, alone in this process; rounds with new "
          f"samples: {sum(1 for s in stored if s)}, median {statistics.median(stored):.0f} targets each):")
    print(f"  (the request alone, Prometheus answering: median {statistics.median(gets) * 1000:.0f} ms, "
          f"max {max(gets) * 1000:.0f} ms)")
    print(f"  request + split + parse: median {statistics.median(reads) * 1000:.0f} ms, max {max(reads) * 1000:.0f} ms")
    print(f"  write (SQLite):          median {statistics.median(writes) * 1000:.0f} ms, max {max(writes) * 1000:.0f} ms")
    verdict = "met" if max(total) <= GOAL_S else "NOT met"
    print(f"  whole round:             median {statistics.median(total) * 1000:.0f} ms, max {max(total) * 1000:.0f} ms "
          f"(goal ≤ {GOAL_S * 1000:.0f} ms: {verdict})")


if __name__ == "__main__":
    raise SystemExit(main())
