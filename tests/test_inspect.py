"""``python -m app inspect`` run as users run it: a subprocess on a file and on a loopback URL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.support.http_server import CountingServer, closed_port_url, serve, started

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
MODEL = "meta-llama/Llama-3.3-70B-Instruct-AWQ"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEETSPOT_")}
    return subprocess.run(
        [sys.executable, "-m", "app", "inspect", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def check_v1(report: dict) -> None:
    assert report["model_names"] == [MODEL]
    assert report["engines"] == ["0", "1"]
    assert report["generation_tokens_total"] == 2_000_000
    assert report["prompt_tokens_total"] == 5_500_000
    assert report["preemptions_total"] == 7
    assert report["requests_running"] == 16 and report["requests_waiting"] == 5
    assert report["requests_swapped"] is None
    assert report["kv_cache_usage"] == 0.57
    ttft = report["ttft"]
    assert ttft["buckets"][0] == [0.001, 0] and ttft["buckets"][-2] == [2560, 9406]
    assert ttft["buckets"][-1] == ["+Inf", 9407] and len(ttft["buckets"]) == 23
    assert (ttft["count"], ttft["sum"]) == (9407, 12500.75)
    assert report["metric_names_used"]["kv_cache_usage"] == "vllm:kv_cache_usage_perc"
    assert "requests_swapped" in report["missing"] and "ttft" not in report["missing"]


def test_file_json():
    done = run(str(DATA / "vllm_v1.txt"), "--json")
    assert done.returncode == 0, done.stderr
    check_v1(json.loads(done.stdout))


def test_loopback_url_json_and_table():
    with serve({"/metrics": (200, "text/plain", (DATA / "vllm_v1.txt").read_text())}) as base:
        as_json = run(base + "/metrics", "--json")
        as_table = run(base + "/metrics")
    assert as_json.returncode == 0, as_json.stderr
    check_v1(json.loads(as_json.stdout))
    assert as_table.returncode == 0, as_table.stderr
    assert "generation_tokens_total" in as_table.stdout and "2,000,000" in as_table.stdout
    assert "0.570 (57.0 %)" in as_table.stdout and "vllm:kv_cache_usage_perc" in as_table.stdout


def test_v0_file_reports_old_names_and_absent_as_null():
    report = json.loads(run(str(DATA / "vllm_v0.txt"), "--json").stdout)
    assert report["engines"] == [] and report["requests_swapped"] == 1
    assert report["queue_time"] is None and report["ttft"]["buckets"][-2][0] == 10
    assert report["metric_names_used"]["itl"] == "vllm:time_per_output_token_seconds"


def test_two_models_are_totalled(tmp_path):
    page = tmp_path / "two.txt"
    page.write_text(
        'vllm:generation_tokens_total{model_name="a"} 5\nvllm:generation_tokens_total{model_name="b"} 7\n'
        'vllm:kv_cache_usage_perc{model_name="a"} 0.5\nvllm:kv_cache_usage_perc{model_name="b"} NaN\n'
    )
    report = json.loads(run(str(page), "--json").stdout)
    assert report["generation_tokens_total"] == 12 and report["kv_cache_usage"] == 0.5
    assert report["models"]["b"]["kv_cache_usage"] is None  # NaN is no value, and JSON stays valid
    assert report["ttft"] is None


@pytest.mark.parametrize(
    "source, message",
    [
        ("README.md", "ERROR: no vLLM metrics found at README.md"),
        ("does/not/exist.txt", "ERROR: cannot read does/not/exist.txt"),
        (closed_port_url(), "ERROR: cannot reach"),
    ],
    ids=["not-metrics", "missing-file", "closed-port"],  # stable ids: the closed port differs per process
)
def test_garbage_is_one_error_line(source, message):
    done = run(source, "--json")
    assert done.returncode != 0
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message)


class PageServer(CountingServer):
    """Serves tests/data/vllm_v1.txt on 127.0.0.1, keeping each request's headers."""

    def __init__(self) -> None:
        super().__init__(PageHandler)
        self.seen: list[dict[str, str]] = []


class PageHandler(BaseHTTPRequestHandler):
    server: PageServer

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.server.seen.append(dict(self.headers.items()))
        page = (DATA / "vllm_v1.txt").read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, *args: object) -> None:
        pass


def test_inspect_sends_headers_a_bearer_token_and_basic_auth_and_masks_the_password():
    import base64

    for start in started(PageServer):
        server = start()
        seen = server.seen
        url = server.url().replace("http://", "http://reader:s3cret@")
        os.environ["INSPECT_TEST_TOKEN"] = "tok-9"
        try:
            done = run(url, "--json", "--header", "X-Org: team-a")
            bearer = run(server.url(), "--json", "--bearer-token-env", "INSPECT_TEST_TOKEN")
        finally:
            del os.environ["INSPECT_TEST_TOKEN"]
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    check_v1(report)
    assert "s3cret" not in done.stdout and report["source"].startswith("http://reader:***@127.0.0.1")
    assert seen[0]["X-Org"] == "team-a" and seen[0]["Authorization"] == "Basic " + base64.b64encode(b"reader:s3cret").decode()
    assert bearer.returncode == 0, bearer.stderr
    assert seen[1]["Authorization"] == "Bearer tok-9" and "X-Org" not in seen[1]


def test_inspect_trusts_the_ca_file_it_is_given(tmp_path):
    from tests.support.certificates import make_certificate, serve_tls

    cert, key = make_certificate(tmp_path)

    def https_server() -> PageServer:
        server = PageServer()
        serve_tls(server, (cert, key))
        return server

    for start in started(https_server):
        url = start().url().replace("http://", "https://")
        untrusted = run(url, "--json")
        trusted = run(url, "--json", "--ca-file", cert)
    assert untrusted.returncode != 0 and "its TLS certificate is not trusted here" in untrusted.stderr
    assert trusted.returncode == 0, trusted.stderr
    check_v1(json.loads(trusted.stdout))


def test_inspect_bearer_token_variable_not_set_is_one_line():
    done = run("http://127.0.0.1:9/metrics", "--bearer-token-env", "INSPECT_NO_SUCH_TOKEN")
    assert done.returncode == 2
    assert "the environment variable INSPECT_NO_SUCH_TOKEN is not set" in done.stderr


@pytest.mark.parametrize("page", ["vllm_real_0_32.txt", "vllm_v1.txt", "engine_vllm_0_33.txt"])
def test_a_paste_cut_inside_a_histogram_line_keeps_what_is_there_and_says_what_is_missing(tmp_path, page):
    # cut a few characters into the first +Inf bucket line: the page ends mid-line, the histogram has no +Inf
    text = (DATA / page).read_text()
    at = text.index('le="+Inf"')
    cut = text[: text.rindex("\n", 0, at) + 1 + 20]
    paste = tmp_path / "cut.txt"
    paste.write_text(cut)
    done = run(str(paste), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    whole = json.loads(run(str(DATA / page), "--json").stdout)
    assert report["model_names"] == whole["model_names"] and report["model_names"]  # the model name survives
    assert report["generation_tokens_total"] == whole["generation_tokens_total"]  # complete series kept
    assert report["cut_line"] == cut.rsplit("\n", 1)[-1] and len(report["cut_line"]) == 20
    (partial,) = [h for h in report["incomplete_histograms"] if "+Inf bucket" in h["missing"]][:1]
    assert partial["buckets"] and partial["model"] == whole["model_names"][0]
    table = run(str(paste)).stdout
    assert "WARNING  the page ends inside a line, cut there" in table and "no +Inf bucket" in table
    assert whole["cut_line"] is None
