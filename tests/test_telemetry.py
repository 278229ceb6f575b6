"""The collector's own /metrics: a real collector process serving it, Debian's Prometheus scraping it."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from app.telemetry import GAUGES, Telemetry
from core.settings import TelemetrySettings
from simulator import SimOptions, start_simulator
from tests.prometheus_server import PrometheusServer
from tests.support.ports import free_port
from tests.test_alerts_e2e import collector, kill, wait_for


def config(tmp_path: Path, vllm_url: str, port: int) -> Path:
    path = tmp_path / "sweetspot.toml"
    path.write_text(f"""
db_url = "sqlite:///{tmp_path}/t.db"
interval_s = "1s"

[alerts]
evaluate_every_s = "1s"
lease_s = "3s"

[telemetry]
port = {port}

[[targets]]
name = "demo"
vllm_url = "{vllm_url}"
""")
    return path


def samples(url: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(httpx.get(url, timeout=5).text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def test_prometheus_scrapes_the_collectors_own_metrics(tmp_path):
    sim = start_simulator(SimOptions(port=0, seed=1, speed=20, load=4))
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    proc = collector(config(tmp_path, sim.urls["vllm_metrics"], port), tmp_path / "collector.log")
    server = None
    try:
        # the first evaluation after the first rounds: every derived figure of the target is there
        seen = wait_for(lambda: (s := samples(url)) and "sweetspot_verdict" in s and s, 60, "the derived figures")
        runs = {s.labels["job_name"]: s.value for s in seen["sweetspot_job_runs_total"]}
        assert runs["collect"] >= 1 and runs["alerts"] >= 1
        assert {s.labels["source"] for s in seen["sweetspot_scrapes_total"]} == {"vllm"}
        assert any(s.labels["table"] == "samples" and s.value > 0 for s in seen["sweetspot_rows_written_total"])
        assert seen["sweetspot_evaluation_duration_seconds_count"][0].value >= 1
        verdicts = {s.labels["verdict"]: s.value for s in seen["sweetspot_verdict"] if s.labels["target"] == "demo"}
        assert sorted(verdicts.values()) == [0.0, 0.0, 0.0, 1.0]  # in, outside, cannot tell, no data: one
        assert seen["sweetspot_ttft_p95_slo_seconds"][0].value == 3.0
        assert seen["sweetspot_outbox_queued"][0].value == 0
        server = PrometheusServer(tmp_path, [url])
        server._wait(lambda: server.query('up{job="vllm"} == 1') != [], "scrape the collector")
        server._wait(lambda: server.query('sweetspot_verdict{target="demo"} == 1') != [], "store the verdict")
        assert server.query('sweetspot_job_runs_total{job_name="collect"}')
        assert server.query("sweetspot_tokens_per_second") and server.query("sweetspot_running_requests")
        assert server.query('rate(sweetspot_scrape_duration_seconds_count{source="vllm"}[1m])') is not None
    finally:
        if server is not None:
            server.stop()
        kill(proc)
        sim.stop()
    assert "serving the collector's /metrics on http://127.0.0.1:" in (tmp_path / "collector.log").read_text()


def test_a_port_already_taken_costs_the_metrics_only(caplog):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with caplog.at_level(logging.WARNING):
            stop = Telemetry().serve(TelemetrySettings(port=taken.getsockname()[1]))
        stop()
    assert "cannot serve /metrics on 127.0.0.1:" in caplog.text and "telemetry.port" in caplog.text


def test_port_0_serves_nothing():
    assert Telemetry().serve(TelemetrySettings(port=0))() is None


def test_the_derived_figures_have_unique_names():
    names = [name for name, _, _ in GAUGES]
    assert len(names) == len(set(names)) and all(n.startswith("sweetspot_") for n in names)


def test_mbu_and_the_step_figures_are_exported_per_target_and_absent_without_a_source():
    from prometheus_client import generate_latest

    from app.alerts.evaluator import Derived

    derived = {"h200": Derived({"mbu": 0.23, "steps_per_s": 41.5, "ceiling_steps_per_s": 300.0}, "in_sweet_spot", {}),
               "bare": Derived({"mbu": None, "steps_per_s": 12.0, "ceiling_steps_per_s": None}, "in_sweet_spot", {})}
    t = Telemetry()
    t.read_at_scrape({}, {}, lambda: derived, lambda: [])
    found = {(s.name, s.labels["target"]): s.value for family in text_string_to_metric_families(generate_latest(t.registry).decode())
             for s in family.samples if "target" in s.labels}  # fmt: skip
    assert found[("sweetspot_mbu_ratio", "h200")] == 0.23 and ("sweetspot_mbu_ratio", "bare") not in found
    assert found[("sweetspot_steps_per_second", "bare")] == 12.0
    assert found[("sweetspot_ceiling_steps_per_second", "h200")] == 300.0
    assert ("sweetspot_ceiling_steps_per_second", "bare") not in found  # no inputs: no ceiling, nothing borrowed
