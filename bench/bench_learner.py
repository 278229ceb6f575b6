"""The learner on the simulated reference (issue 37): the one knee rule over a day of varied load.

Run: ``.venv/bin/python -m bench.bench_learner [--seeds 0,1,2] [--slos 3,10]``. For each seed a day of
the simulator's daily load (one sample per 30 s, behind a gateway limit of 32 with a peak of 40
clients, so 1 to 32 requests run) is written through the collector's parsers, writer and rollup into
a temporary SQLite file; ``app.sweet_spot.learn_from_history`` then learns it at each SLO. Prints per
seed and SLO the learned sweet spot, the knee, the doublings it rests on, the first level the SLO
test fails (the bucket judgement where it cannot tell) and the minutes and levels. The truth is the
report's knee, 16; the goal 16 ± 2 at 3 s and at 10 s on three seeds.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/…` as `make bench` runs it

from app.sweet_spot import learn_from_history
from collectors.dcgm import parse_dcgm
from collectors.gateway import queue_from_prometheus
from collectors.records import GatewayReading, ScrapeRound, SourceResult
from collectors.vllm import parse_vllm
from core.settings import GatewaySettings, GpuSettings, LearnerSettings, TargetSettings
from db.engine import open_engine
from db.queries import Reader
from db.rollup import rollup
from db.writer import Writer
from simulator import generate_history

DAY = 86400.0
START = 1_780_000_000.0 - 1_780_000_000.0 % DAY  # a midnight UTC: the daily pattern's day starts here
GATEWAY_METRIC = "sweetspot_gateway_queue_depth"
TARGET = TargetSettings(name="sim", vllm_url="http://127.0.0.1:8000/metrics",
                        gateway=GatewaySettings(preset="sweetspot-sim", kind="prometheus",
                                                url="http://127.0.0.1:8001/metrics", metric=GATEWAY_METRIC),
                        gpu=GpuSettings(source="dcgm", url="http://127.0.0.1:9400/metrics"))  # fmt: skip


def rounds(seed: int):
    for sample in generate_history(START, START + DAY, 30.0, seed=seed, gateway_limit=32, peak_clients=40.0):
        ok = SourceResult(True)
        gateway = GatewayReading(queue_from_prometheus(sample.gateway, GATEWAY_METRIC), "sweetspot-sim")
        yield ScrapeRound("sim", sample.ts, parse_vllm(sample.vllm), ok, gateway, ok,
                          parse_dcgm(sample.dcgm, peak_bw_gbps=900.0), ok)  # fmt: skip


def day_of(seed: int, folder: Path) -> str:
    url = f"sqlite:///{folder / f'day{seed}.db'}"
    engine = open_engine(url)
    writer = Writer(engine)
    writer.register_target(dataclasses.replace(TARGET))
    writer.write_rounds(rounds(seed))
    rollup(engine, START + DAY)
    engine.dispose()
    return url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--slos", default="3,10")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for seed in (int(s) for s in args.seeds.split(",")):
            url = day_of(seed, Path(tmp))
            for slo in (float(s) for s in args.slos.split(",")):
                started = time.perf_counter()
                learned = learn_from_history(Reader(url), LearnerSettings(), "sim", START + DAY, slo)
                took = time.perf_counter() - started
                if learned is None:
                    print(f"seed {seed}, SLO {slo:g} s: the history could not be read")
                    continue
                found = learned.found
                print(f"seed {seed}, SLO {slo:g} s: learned {learned.knee}, knee {found.knee if found else None}, "
                      f"SLO limit {found.slo_limit if found else None}; {learned.reason}; from {learned.rests_on}; "
                      f"{took * 1000:.0f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
