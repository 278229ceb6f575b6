"""End to end: ``python -m app sweep`` as a subprocess against the simulator on 127.0.0.1 (port 0).

The simulator runs 50× faster than real time (``--server-speed`` reports in its time); the test
checks the plumbing (streams timed, JSON written, run stored, errors counted), not the calibration
(that is the simulator's own test).
"""

import json
import subprocess
import sys

import pytest

from app.commands.sweep import has_gateway, sweep_target
from core.errors import UsageError
from core.settings import GatewaySettings, Settings, TargetSettings
from db.queries import Reader
from simulator import SimOptions, start_simulator

SPEED = 50.0


@pytest.fixture
def sim():
    running = start_simulator(SimOptions(speed=SPEED, seed=3))
    yield running
    running.stop()


def sweep(*args):
    return subprocess.run([sys.executable, "-m", "app", "sweep", *args], capture_output=True, text=True, timeout=60)


def test_sweep_against_the_simulator(sim, tmp_path):
    db_url = f"sqlite:///{tmp_path}/sweetspot.db"
    out = tmp_path / "sweep.json"
    config = tmp_path / "sweetspot.toml"  # a target watching the simulator: the sweep finds it by host and port
    metrics = sim.urls["vllm_metrics"]
    config.write_text(f'[[targets]]\nname = "sim"\nvllm_url = "{metrics}"\n')
    done = sweep(
        "--config", str(config),
        "--url", sim.urls["openai_base"], "--concurrency", "1,2", "--duration", "2s",
        "--json", str(out), "--db", db_url, "--seed", "5", "--server-speed", str(SPEED),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert doc["model"] == "sweetspot/sim-70b-awq"
    one, two = doc["levels"]
    for level in (one, two):
        assert level["error_rate"] in (0.0, None)
        assert level["tokens_per_s"] > 0 and 0 < level["ttft_p50_s"] <= level["ttft_p95_s"] <= level["ttft_p99_s"]
        assert 0 < level["itl_p95_s"] < 1.0
    # figures in the simulator's time: 2 s of wall clock are 100 simulated seconds, then the drain
    assert one["duration_s"] >= 2 * SPEED and doc["recommendation"]["server_speed"] == SPEED
    assert doc["recommendation"]["warmup_s"] == pytest.approx(0.2 * SPEED)  # default: a tenth of the window
    assert two["tokens_per_s"] > one["tokens_per_s"]  # two streams share the bandwidth-bound steps
    assert two["requests"] >= 1 and two["e2e_mean_s"] > two["ttft_p50_s"]
    (run,) = Reader(db_url).sweep_runs()
    assert run.url == sim.urls["openai_base"] and run.model == doc["model"]
    assert run.target == "sim" and "(target sim)" in done.stderr  # which server it measured, stored with it
    assert [lv.tokens_per_s for lv in run.levels] == [one["tokens_per_s"], two["tokens_per_s"]]
    assert run.recommendation["sweet_spot_concurrency"] == doc["recommendation"]["sweet_spot_concurrency"]
    assert "| concurrency | output tok/s | TTFT P95 |" in done.stdout
    # the engine's own figures over the same spans, read from the simulator's /metrics (measured:
    # 6.03 and 14.56 tok/s against the client's 6.05 and 14.64)
    engine = doc["recommendation"]["engine"]
    assert [e["concurrency"] for e in engine] == [1, 2]
    for figures, level in zip(engine, (one, two), strict=True):
        assert figures["tokens_per_s"] == pytest.approx(level["tokens_per_s"], rel=0.1)
        lower, upper = figures["ttft_p95_bucket"]
        assert lower < figures["ttft_p95_s"] <= upper
    assert "engine's /metrics over the same span: concurrency 2" in done.stdout
    assert "TTFT P95 above is the client's" in done.stdout and "exact only to the bucket" in done.stdout  # why they differ


def test_engine_restarts_mid_sweep_are_counted_not_fatal(tmp_path):
    # A restart every simulated 60 s (1.2 s of wall time) cuts the streams in flight.
    options = SimOptions(speed=SPEED, seed=4, restart_every_s=60.0)
    with start_simulator(options) as sim:
        done = sweep(
            "--url", sim.urls["openai_base"], "--api", "chat", "--concurrency", "3", "--duration", "3s",
            "--json", str(tmp_path / "s.json"), "--no-store",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (level,) = json.loads((tmp_path / "s.json").read_text())["levels"]
    assert level["errors"] >= 1 and level["requests"] > level["errors"]
    assert level["tokens_per_s"] > 0


def test_sweep_target_resolves_the_target_a_sweep_measures():
    settings = Settings(targets=(TargetSettings(name="prod", vllm_url="http://10.0.0.5:8000/metrics"),))
    assert sweep_target(settings, None, "prod") == ("http://10.0.0.5:8000/v1", "prod")  # --target alone
    assert sweep_target(settings, "http://10.0.0.5:8000/v1/", None) == ("http://10.0.0.5:8000/v1", "prod")
    assert sweep_target(settings, "http://10.0.0.6:8000/v1", None) == ("http://10.0.0.6:8000/v1", None)
    assert sweep_target(settings, "http://10.0.0.5:8001/v1", None)[1] is None  # another port, another server
    with pytest.raises(UsageError, match="--target: no target named 'nope'"):
        sweep_target(settings, None, "nope")
    with pytest.raises(UsageError, match="--url is required without --target"):
        sweep_target(settings, None, None)


def test_the_sweep_knows_whether_a_gateway_stands_in_front(tmp_path):
    gated = TargetSettings(name="gated", vllm_url="http://10.0.0.5:8000/metrics",
                           gateway=GatewaySettings(kind="prometheus", url="http://10.0.0.5:4000/metrics", metric="q"))
    bare = TargetSettings(name="bare", vllm_url="http://10.0.0.6:8000/metrics")
    settings = Settings(targets=(gated, bare), db_url=f"sqlite:///{tmp_path}/none.db")
    assert (has_gateway(settings, "gated"), has_gateway(settings, "bare"), has_gateway(settings, None)) == (True, False, None)
    assert has_gateway(settings, "stored-elsewhere") is None  # neither configured nor stored


def test_a_sweep_of_a_stored_target_keeps_its_name_when_no_config_names_it(sim, tmp_path):
    # The demo's target is set by `run`, not in a config file, and its simulator takes a free port at each
    # start: a sweep stored with only the URL was "of another server" after the next restart.
    from core.settings import TargetSettings
    from db.engine import open_engine
    from db.writer import Writer

    db_url = f"sqlite:///{tmp_path}/sweetspot.db"
    writer = Writer(open_engine(db_url))
    writer.register_target(TargetSettings(name="demo", vllm_url=sim.urls["vllm_metrics"]))
    writer.close()
    done = sweep("--url", sim.urls["openai_base"], "--concurrency", "1", "--duration", "1s", "--db", db_url,
                 "--server-speed", str(SPEED))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "(target demo)" in done.stderr and "plus each level's drain" in done.stderr
    (run,) = Reader(db_url).sweep_runs()
    assert run.target == "demo"
    assert "Caution, few requests" in run.recommendation["reason"]  # one level of 1 s: a handful of requests
