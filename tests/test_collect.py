"""The collector end to end: real simulator on loopback, real SQLite file, the CLI as users run it."""

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.collection import CollectionService
from collectors.vllm import parse_vllm, total_figures
from core.settings import Settings, TargetSettings
from db.queries import Reader
from simulator import SimOptions, start_simulator
from tests.support.collector_process import collector, two_targets, wait_until
from tests.support.http_server import closed_port_url, serve

ROOT = Path(__file__).resolve().parent.parent
V1 = (ROOT / "tests" / "data" / "vllm_v1.txt").read_text()


def app(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def sim():
    with start_simulator(SimOptions(port=0, load=6, speed=20.0, seed=3)) as running:
        # the built-in load's first tokens (a condition: at load 20 a fixed second made none)
        wait_until(lambda: total_figures(parse_vllm(httpx.get(running.urls["vllm_metrics"], timeout=10).text)).counters.get("generation_tokens", 0) > 0,
                   "the simulator's first tokens")  # fmt: skip
        yield running


def test_collect_once_stores_every_source_and_status_reads_it(sim, tmp_path):
    db = f"sqlite:///{tmp_path}/c.db"
    urls = sim.urls
    done = app("collect", "--once", "--db", db, "--vllm-url", urls["vllm_metrics"], "--gateway-url",
               urls["gateway_metrics"], "--gateway-metric", "sweetspot_gateway_queue_depth", "--gpu", urls["dcgm_metrics"])
    assert done.returncode == 0, done.stderr
    assert "vLLM up" in done.stdout and "8 GPU(s)" in done.stdout and "gateway queue=" in done.stdout
    status = json.loads(app("status", "--db", db, "--json").stdout)
    assert status["up"] is True
    assert len(status["gpus"]) == 8
    assert status["running_max"] is not None and status["running_max"] >= 1


def test_gpu_errors_of_a_flag_made_target_name_the_flag(sim, tmp_path):
    # --gpu nvml on a host without a usable NVML (this one: no driver; the test skips where one works)
    done = app("collect", "--once", "--db", f"sqlite:///{tmp_path}/c.db", "--vllm-url", sim.urls["vllm_metrics"], "--gpu", "nvml")
    if "no GPU data" not in done.stdout + done.stderr:
        pytest.skip("NVML works on this host")
    text = done.stdout + done.stderr
    assert "--gpu none or --gpu DCGM_URL" in text and "targets[]" not in text


def test_unreachable_vllm_is_stored_as_down_with_its_error(tmp_path):
    db = f"sqlite:///{tmp_path}/c.db"
    url = closed_port_url() + "/metrics"
    done = app("collect", "--once", "--db", db, "--vllm-url", url)
    assert done.returncode == 1, done.stderr  # stored as down, and said so by the exit status (issue 14)
    assert "vLLM DOWN" in done.stdout and "connection refused" in done.stdout
    status = json.loads(app("status", "--db", db, "--json").stdout)
    assert status["up"] is False
    assert status["tokens_per_s"] is None  # a failed scrape is never zeros
    assert "connection refused" in (status["last_error"] or "")


def test_a_garbage_scrape_costs_one_round_not_the_collector(tmp_path):
    routes = {"/metrics": (200, "text/plain", "<html>oops</html>")}
    with serve(routes) as base:
        target = TargetSettings(name="t", vllm_url=f"{base}/metrics")
        service = CollectionService(Settings(db_url=f"sqlite:///{tmp_path}/g.db", targets=(target,)))
        try:
            first = service.collect_once()
            time.sleep(1.1)  # rounds are keyed by whole seconds
            routes["/metrics"] = (200, "text/plain", V1)
            second = service.collect_once()
        finally:
            service.close()
    assert "DOWN" in first[0] and "up" in second[0]
    info = Reader(f"sqlite:///{tmp_path}/g.db").targets()[0]
    assert info.up is True and info.last_scrape_at is not None


def test_a_vllm_restart_mid_run_gives_no_negative_or_spiking_figures(tmp_path):
    db = f"sqlite:///{tmp_path}/r.db"
    with start_simulator(SimOptions(port=0, load=4, speed=20.0, seed=5)) as sim:
        target = TargetSettings(name="r", vllm_url=sim.urls["vllm_metrics"])
        service = CollectionService(Settings(db_url=db, targets=(target,)))
        try:
            for i in range(6):
                if i == 3:
                    sim.restart()
                service.collect_once()
                time.sleep(1.05)
        finally:
            service.close()
    window = Reader(db).window("r", time.time() + 1, 60)
    assert window.tokens_per_s is not None and window.tokens_per_s >= 0
    # 4 clients at 20x cannot exceed a few thousand tok/s of wall time; a reset read as a raw
    # cumulative value would add the whole counter at once.
    assert window.tokens_per_s < 5000
    assert window.preemptions is not None and window.preemptions >= 0


def test_sigterm_stops_the_collector_cleanly(sim, tmp_path):
    db = f"sqlite:///{tmp_path}/s.db"
    proc = subprocess.Popen([sys.executable, "-m", "app", "collect", "--db", db, "--interval", "1s", "--vllm-url",
                             sim.urls["vllm_metrics"]], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 30
        while time.time() < deadline and not has_rounds(db, 2):
            time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "stopped cleanly" in err


def has_rounds(db: str, n: int) -> bool:
    try:
        window = Reader(db).window("default", time.time() + 1, 600)
    except Exception:
        return False
    return window.scrapes >= n


def test_collect_without_target_names_the_fix(tmp_path):
    done = app("collect", "--once", "--db", f"sqlite:///{tmp_path}/x.db")
    assert done.returncode == 2
    assert done.stderr.startswith("ERROR: no target to collect from") and "--vllm-url" in done.stderr


def test_a_second_collector_on_the_database_stands_by_in_one_line(tmp_path, caplog):
    # Both stamp their rounds with the same clock: the second writer used to collide on (target, ts)
    # every round it shared with the first, each time with a traceback, and count increases twice.
    import logging

    from sqlalchemy import func, select

    from db import schema
    from db.engine import open_reader

    now = [1_800_000_000.0]
    db = f"sqlite:///{tmp_path}/two.db"
    with serve({"/metrics": (200, "text/plain", V1)}) as base:
        settings = Settings(db_url=db, targets=(TargetSettings(name="t", vllm_url=f"{base}/metrics"),))
        first, second = (CollectionService(settings, clock=lambda: now[0]) for _ in range(2))
        try:
            with caplog.at_level(logging.INFO):
                for _ in range(4):
                    assert "vLLM up" in first.collect_once()[0]
                    (line,) = second.collect_once()
                    assert line.startswith("collector: another collector (") and "Run one collector per database" in line
                    assert second.rollup() == "rollup: another collector writes to this database"
                    now[0] += 5
            standby = [r for r in caplog.records if "another collector" in r.getMessage()]
            assert len(standby) == 1 and standby[0].levelname == "WARNING"
            assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
            # a second collector started on this database says it stands by, not "collecting t"
            assert second.turn.start_line("collecting t").startswith("collector: another collector (")
            assert first.turn.start_line("collecting t") == "collecting t"
            first.close()  # a clean stop hands the lease back: the standby writes from its next round
            assert "vLLM up" in second.collect_once()[0]
        finally:
            first.close()
            second.close()
    engine = open_reader(db)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(schema.scrapes)).scalar() == 5
    engine.dispose()
def test_a_hanging_proxy_costs_its_source_and_sigterm_stops_the_collector(sim, tmp_path):
    # A proxy that accepts and never answers: the round ends at its deadline with the source failed
    # and logged, the other target is stored every round, and SIGTERM ends the process.
    with socket.socket() as proxy:
        proxy.bind(("127.0.0.1", 0))
        proxy.listen()
        db = f"sqlite:///{tmp_path}/p.db"
        cfg = two_targets(tmp_path / "sweetspot.toml", f'db_url = "{db}"\ninterval_s = "1s"\nscrape_timeout_s = "0.5s"',
                          ("proxied", "http://vllm.invalid:8000/metrics"), ("direct", sim.urls["vllm_metrics"]),
                          f'http = {{ proxy = "http://127.0.0.1:{proxy.getsockname()[1]}" }}')  # fmt: skip
        log = tmp_path / "collector.log"
        proc = collector(cfg, log)
        try:
            wait_until(lambda: scrapes(db, "proxied") >= 2 and scrapes(db, "direct") >= 2, "two rounds of each")
            assert "proxied vllm: cannot reach http://vllm.invalid:8000/metrics (no answer within 0.5 s)" in log.read_text()
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)  # the round in flight ends at its deadline, then the process
        finally:
            proc.kill()
    assert proc.returncode == 0, log.read_text()
    assert "stopped cleanly" in log.read_text()
    assert Reader(db).window("proxied", time.time() + 1, 600).up is False


def scrapes(db: str, target: str) -> int:
    try:
        return Reader(db).window(target, time.time() + 1, 600).scrapes
    except Exception:  # the database is not made yet
        return 0


def test_sigterm_ends_the_process_even_when_a_job_never_returns(tmp_path):
    # The last resort behind every source's deadline: a job stuck for good is named and left behind.
    script = ("import logging, sys, threading\n"
              "from app import scheduler\n"
              "logging.basicConfig(level=logging.INFO)\n"
              "def stuck():\n    print('stuck', flush=True); threading.Event().wait()\n"
              "scheduler.run_until_stopped([scheduler.Job('stuck', stuck, 100.0)], grace_s=0.5)\n")  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "stuck\n"  # the job is under way
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 1
    assert "job stuck still running 0.5 s after the stop signal; exiting without waiting for it" in err


def test_sigterm_taken_by_a_worker_thread_still_stops_the_process(tmp_path):
    # A process-directed SIGTERM may land on any thread; here a job's own thread takes it (as a worker
    # blocked in a database call did under load). Python runs the handler only when the main thread
    # executes bytecode, so the main thread's wait for the stop must wake by itself to run it.
    script = ("import os, signal, threading\n"
              "from app import scheduler\n"
              "def take_it():\n    print('job', flush=True); signal.pthread_kill(threading.get_ident(), signal.SIGTERM)\n"
              "scheduler.run_until_stopped([scheduler.Job('take_it', take_it, 3600.0)])\n"
              "print('stopped', flush=True)\n")  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "job\n"
        out, err = proc.communicate(timeout=120)  # a bound for a loaded machine; an untimed wait never ends
    finally:
        proc.kill()
    assert proc.returncode == 0 and out == "stopped\n", err
