"""The latency clients see (issue 28): behind a gateway, client TTFT = the gateway wait (Little's law:
the queue's average ÷ the requests entering the engine per second) + the engine's TTFT, and the SLO
attainment and the TTFT rule judge that figure. Checked against what the simulator's own clients
measured, through the collector process, the database and ``status``."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from app.alerts.names import window_names
from app.alerts.rules import DEFAULT_RULES, HOLDS, Names, by_name, outcome
from collectors.records import GatewayReading, SourceResult
from core.settings import SweetSpotSettings, TargetSettings
from db.engine import open_engine
from db.pipeline import LITTLE, WAIT_UNKNOWN
from db.queries import Reader
from db.writer import Writer
from simulator import SimOptions, start_simulator
from simulator.params import EngineParams
from tests.store_helpers import vllm_round
from tests.support.collector_process import collector, wait_until

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_800_000_000
# The reference's engine ten times faster, in real time (speed 1: the collector's clock and the
# simulator's agree, so a rate per second and a latency in seconds are the same seconds)
FAST = EngineParams(step_overhead_s=0.0034, gemm_floor_s=0.0036, gemm_s_per_seq=0.00027, decode_s_per_seq=0.00018,
                    prefill_s_per_token=0.000016, bandwidth_gbps=9000.0)  # fmt: skip
WARMUP_S, WINDOW_S = 40.0, 50.0


def test_24_clients_behind_a_limit_of_16_see_what_sweetspot_says(tmp_path):
    db = f"sqlite:///{tmp_path}/g.db"
    with start_simulator(SimOptions(port=0, load=24, gateway_limit=16, speed=1.0, seed=5, params=FAST)) as sim:
        cfg = tmp_path / "sweetspot.toml"
        cfg.write_text(f'db_url = "{db}"\ninterval_s = "1s"\nscrape_timeout_s = "0.5s"\n[[targets]]\nname = "sim"\n'
                       f'vllm_url = "{sim.urls["vllm_metrics"]}"\n[targets.gateway]\npreset = "sweetspot-sim"\n'
                       f'url = "{sim.urls["gateway_metrics"]}"\n')  # fmt: skip
        began = time.time()
        proc = collector(cfg, tmp_path / "collector.log")
        try:
            wait_until(lambda: time.time() > began + WARMUP_S + WINDOW_S, "the warm-up and the window", timeout=200)
            end = time.time()
            assert sim.load is not None
            measured = np.asarray(sim.load.client_ttfts(end - WINDOW_S, end))
        finally:
            proc.kill()
            proc.wait()
    slo = float(np.quantile(measured, 0.5))  # a partial share: the median client meets it
    fig = Reader(db).window("sim", end, WINDOW_S, ttft_slo_s=slo)
    client_p95 = float(np.quantile(measured, 0.95))
    share = float(np.mean(measured <= slo))
    assert fig.queue_depth_avg is not None and fig.queue_depth_avg > 5  # 8 wait at the gateway
    assert fig.gateway_wait_s is not None and fig.gateway_wait_source == LITTLE
    assert fig.ttft_p95_s is not None and fig.client_ttft_p95_s is not None
    assert fig.client_ttft_p95_s > 2 * fig.ttft_p95_s  # the wait is most of what clients see
    assert abs(fig.client_ttft_p95_s - client_p95) <= 0.25 * client_p95, (fig.client_ttft_p95_s, client_p95)
    assert fig.client_ttft_slo_attainment is not None and fig.ttft_slo_attainment is not None
    assert abs(fig.client_ttft_slo_attainment - share) <= 0.05, (fig.client_ttft_slo_attainment, share)
    assert fig.ttft_slo_attainment > 0.9  # the engine alone meets it: its figure says nothing of the wait
    # the TTFT rule judges the client-seen figure, the engine's beside it
    rule = by_name(DEFAULT_RULES, "ttft_p95")
    assert rule is not None
    got = outcome(rule, Names(window_names(fig, SweetSpotSettings(ttft_p95_slo_s=slo))))
    assert got.status == HOLDS and got.value == fig.client_ttft_p95_s
    assert "gateway wait" in got.summary and "the engine's" in got.summary
    # status --json says the same, through the CLI
    done = subprocess.run([sys.executable, "-m", "app", "status", "--db", db, "--json", "--target", "sim"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    data = json.loads(done.stdout)
    assert {"gateway_wait_s", "gateway_wait_source", "client_ttft_p95_s", "client_ttft_slo_attainment"} <= set(data)
    _record(fig, client_p95, share, slo, len(measured))


def _record(fig, client_p95: float, share: float, slo: float, n: int) -> None:
    """The measured figures, for docs/benchmarks.md (pytest -s shows them)."""
    print(f"\n24 clients / limit 16: {n} requests; clients measured TTFT P95 {client_p95:.3f} s, share within "
          f"{slo:.3f} s {share:.3f}; Sweetspot: queue avg {fig.queue_depth_avg:.2f}, admitted "
          f"{fig.requests_started_per_s:.3f} req/s, wait {fig.gateway_wait_s:.3f} s, engine TTFT P95 "
          f"{fig.ttft_p95_s:.3f} s, client TTFT P95 {fig.client_ttft_p95_s:.3f} s, attainment "
          f"{fig.client_ttft_slo_attainment:.3f} (engine's {fig.ttft_slo_attainment:.3f})")


def test_a_queue_while_nobody_is_admitted_gives_wait_unknown_never_a_division_error(tmp_path):
    engine = open_engine(f"sqlite:///{tmp_path}/z.db")
    writer = Writer(engine)
    writer.register_target(TargetSettings(name="t", vllm_url="http://127.0.0.1:1/metrics"))
    for i, ts in enumerate(range(T0, T0 + 120, 5)):
        # nothing finishes and no first token comes: 0 requests/s enter the engine, 5 wait at the gateway
        round_ = vllm_round(ts, gen=100.0, hist=(0.0, 0.0, 0.0, 0.0), running=0.0)
        writer.write_round(dataclasses.replace(round_, gateway=GatewayReading(5.0 if i else 0.0, "test"),
                                               gateway_status=SourceResult(True)))  # fmt: skip
    fig = Reader(f"sqlite:///{tmp_path}/z.db").window("t", T0 + 119, 60, ttft_slo_s=3.0)
    assert fig.queue_depth_avg == 5.0 and fig.requests_started_per_s == 0.0
    assert (fig.gateway_wait_s, fig.client_ttft_p95_s, fig.gateway_wait_source) == (None, None, WAIT_UNKNOWN)
    names = window_names(fig, SweetSpotSettings())
    assert names["ttft_wait_note"].startswith("gateway wait unknown")
    # an empty queue waits nothing, whatever the rate
    empty = Reader(f"sqlite:///{tmp_path}/z.db").window("t", T0 + 0, 1, ttft_slo_s=3.0)
    assert empty.gateway_wait_s in (0.0, None)
    engine.dispose()
