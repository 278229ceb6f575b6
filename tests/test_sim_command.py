"""``python -m app sim`` as a process: one JSON line of URLs, SIGHUP restarts vLLM, SIGTERM stops it."""

import json
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest


def _start_time(url: str) -> float:
    for line in httpx.get(url, timeout=10).text.splitlines():
        if line.startswith("process_start_time_seconds "):
            return float(line.split()[1])
    raise AssertionError("no process_start_time_seconds")


def test_cli_serves_restarts_on_sighup_and_stops_cleanly():
    proc = subprocess.Popen([sys.executable, "-m", "app", "sim", "--port", "0", "--speed", "10"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=os.path.dirname(os.path.dirname(__file__)))
    try:
        urls = json.loads(proc.stdout.readline())
        assert set(urls) == {"openai_base", "vllm_metrics", "gateway_base", "gateway_metrics", "dcgm_metrics"}
        assert all(url.startswith("http://127.0.0.1:") for url in urls.values())
        first = _start_time(urls["vllm_metrics"])
        proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 10
        while _start_time(urls["vllm_metrics"]) == first and time.time() < deadline:
            time.sleep(0.1)
        assert _start_time(urls["vllm_metrics"]) > first
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_calibrate_json():
    out = subprocess.run([sys.executable, "-m", "app", "sim", "--calibrate", "--json", "--duration", "60"],
                         capture_output=True, text=True, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(__file__)))
    data = json.loads(out.stdout)
    assert [level["concurrency"] for level in data["levels"]] == [8, 16, 32]
    assert [ref["concurrency"] for ref in data["reference"]] == [8, 16, 32]


@pytest.mark.parametrize("fraction", ["1", "-0.1", "nan"])
def test_a_slowdown_outside_0_to_1_is_refused_in_one_line(capsys, fraction):
    from app.cli import main

    assert main(["sim", "--slowdown", fraction]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR: --slowdown:") and "must be ≥ 0 and < 1" in err
