"""Gateway queue depth against real HTTP servers on 127.0.0.1, one per preset's exposition shape.

Payloads are generated with prometheus_client in each gateway's metric names and labels
(DOMAIN.md §5), with distractors a careless reader would pick up.
"""

from __future__ import annotations

import json
import math

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from collectors.gateway import queue_from_json, queue_from_prometheus, read_gateway, resolve_preset
from core.errors import ScrapeError
from core.settings import GATEWAY_PRESETS, ConfigError, GatewaySettings
from tests.support.http_server import closed_port_url, serve
from tests.support.waiting import LOCAL_ANSWER_S

PROM = "text/plain; version=0.0.4"


def exposition(*gauges: tuple[str, dict[str, str], float]) -> str:
    registry = CollectorRegistry()
    made: dict[str, Gauge] = {}
    for name, labels, value in gauges:
        if name not in made:
            made[name] = Gauge(name, f"{name} help", list(labels), registry=registry)
        (made[name].labels(**labels) if labels else made[name]).set(value)
    Counter("http_requests", "distractor", registry=registry).inc(7)
    return generate_latest(registry).decode()


PRESET_PAYLOADS = {
    "litellm": (exposition(("litellm_in_flight_requests", {}, 5)), 5.0),
    "production-stack": (
        exposition(
            ("vllm:num_prefill_requests", {"server": "http://vllm-0:8000"}, 2),
            ("vllm:num_prefill_requests", {"server": "http://vllm-1:8000"}, 1),
            ("vllm:num_decoding_requests", {"server": "http://vllm-0:8000"}, 14),
            ("vllm:num_decoding_requests", {"server": "http://vllm-1:8000"}, 16),
            # declared by the router but never set there; a value here must not be read
            ("vllm:num_requests_waiting", {"server": "http://vllm-0:8000"}, 99),
        ),
        33.0,
    ),
    "gateway-api": (exposition(("inference_pool_average_queue_size", {"name": "vllm-pool"}, 2.5)), 2.5),
    "llm-d": (
        exposition(
            ("inference_extension_flow_control_queue_size", {"fairness_id": "a", "priority": "0"}, 3),
            ("inference_extension_flow_control_queue_size", {"fairness_id": "b", "priority": "0"}, 4),
        ),
        7.0,
    ),
    "aibrix": (exposition(("gateway_in_flight_requests", {}, 11), ("gateway_request_total", {}, 500)), 11.0),
    "envoy": (exposition(("envoy_cluster_upstream_rq_pending_active", {"envoy_cluster_name": "vllm"}, 6)), 6.0),
    "sweetspot-sim": (exposition(("sweetspot_gateway_queue_depth", {}, 9)), 9.0),
}


def test_every_preset_is_covered():
    assert set(PRESET_PAYLOADS) | {"litellm-json"} == set(GATEWAY_PRESETS)


@pytest.mark.parametrize("preset", sorted(PRESET_PAYLOADS))
def test_prometheus_presets(preset):
    payload, expected = PRESET_PAYLOADS[preset]
    with serve({"/metrics": (200, PROM, payload)}) as base:
        reading = read_gateway(GatewaySettings(preset=preset, url=f"{base}/metrics"), timeout_s=LOCAL_ANSWER_S)
    assert reading.queue_depth == expected
    assert reading.source == f"{preset} {GATEWAY_PRESETS[preset]['metric']}"


def test_litellm_json_preset_reads_health_backlog():
    with serve({"/health/backlog": (200, "application/json", json.dumps({"in_flight_requests": 47}))}) as base:
        reading = read_gateway(GatewaySettings(preset="litellm-json", url=f"{base}/health/backlog"), timeout_s=LOCAL_ANSWER_S)
    assert reading.queue_depth == 47


def test_label_filter_picks_one_cluster():
    payload = exposition(
        ("envoy_cluster_upstream_rq_pending_active", {"envoy_cluster_name": "vllm"}, 6),
        ("envoy_cluster_upstream_rq_pending_active", {"envoy_cluster_name": "admin"}, 40),
    )
    with serve({"/stats/prometheus": (200, PROM, payload)}) as base:
        url = f"{base}/stats/prometheus"
        everything = read_gateway(GatewaySettings(preset="envoy", url=url), 2.0)
        one = read_gateway(GatewaySettings(preset="envoy", url=url, labels={"envoy_cluster_name": "vllm"}), 2.0)
        with pytest.raises(ScrapeError, match=r'no sample of .* has the labels \{envoy_cluster_name="lmvl"\}') as info:
            read_gateway(GatewaySettings(preset="envoy", url=url, labels={"envoy_cluster_name": "lmvl"}), 2.0)
    assert (everything.queue_depth, one.queue_depth) == (46, 6)
    assert 'envoy_cluster_name="admin"' in str(info.value) and "gateway.labels" in info.value.hint


def test_explicit_metric_overrides_preset():
    payload = exposition(("litellm_in_flight_requests", {}, 5), ("my_queue", {}, 2))
    with serve({"/metrics": (200, PROM, payload)}) as base:
        reading = read_gateway(GatewaySettings(preset="litellm", url=f"{base}/metrics", metric="my_queue"), 2.0)
    assert reading.queue_depth == 2


def test_alternatives_take_the_first_name_exposed():
    text = exposition(
        ("llm_d_epp_flow_control_queue_size", {}, 4), ("inference_extension_flow_control_queue_size", {}, 4)
    )
    assert (
        queue_from_prometheus(text, "llm_d_epp_flow_control_queue_size|inference_extension_flow_control_queue_size")
        == 4
    )
    assert queue_from_prometheus(text, "renamed_later|inference_extension_flow_control_queue_size") == 4


def test_declared_family_without_samples_is_absent_not_zero():
    text = "# HELP vllm:num_prefill_requests x\n# TYPE vllm:num_prefill_requests gauge\n"
    text += "# HELP vllm:num_decoding_requests x\n# TYPE vllm:num_decoding_requests gauge\n"
    assert queue_from_prometheus(text, GATEWAY_PRESETS["production-stack"]["metric"]) is None


def test_counter_is_matched_by_its_sample_name():
    registry = CollectorRegistry()
    Counter("gateway_requests", "x", registry=registry).inc(3)
    text = generate_latest(registry).decode()
    assert queue_from_prometheus(text, "gateway_requests_total") == 3


def test_missing_metric_names_it_and_the_fix():
    payload = exposition(("litellm_in_flight_request", {}, 5))
    with serve({"/metrics": (200, PROM, payload)}) as base:
        with pytest.raises(ScrapeError) as info:
            read_gateway(GatewaySettings(preset="litellm", url=f"{base}/metrics"), 2.0)
    message = info.value.one_line()
    assert "no metric named litellm_in_flight_requests" in message
    assert "similar names there: litellm_in_flight_request" in message
    assert "targets[].gateway.metric" in message


@pytest.mark.parametrize("body", ["<html><body>Welcome to nginx</body></html>", '{"status": "ok"}'])
def test_garbage_is_not_prometheus_text(body):
    with serve({"/metrics": (200, "text/html", body)}) as base:
        with pytest.raises(ScrapeError, match="not Prometheus text"):
            read_gateway(GatewaySettings(kind="prometheus", url=f"{base}/metrics", metric="q"), 2.0)


def test_http_500_and_unreachable():
    with serve({"/metrics": (500, "text/plain", "upstream error")}) as base:
        with pytest.raises(ScrapeError, match="answered HTTP 500"):
            read_gateway(GatewaySettings(preset="litellm", url=f"{base}/metrics"), 2.0)
    with pytest.raises(ScrapeError, match="connection refused") as info:
        read_gateway(GatewaySettings(preset="litellm", url=closed_port_url()), 2.0)
    assert "gateway.url" in info.value.hint


@pytest.mark.parametrize(
    "document, path, expected",
    [
        ({"in_flight_requests": 3}, "in_flight_requests", 3.0),
        ({"data": [{"queue": 4}, {"queue": 9}]}, "data.1.queue", 9.0),
        ({"data": [{"queue": 4}]}, "data.-1.queue", 4.0),
        ({"stats": {"queue": {"depth": 2.5}}}, "stats.queue.depth", 2.5),
        ({"q": None}, "q", None),
        (12, "", 12.0),
    ],
)
def test_json_paths(document, path, expected):
    with serve({"/q": (200, "application/json", json.dumps(document))}) as base:
        reading = read_gateway(GatewaySettings(kind="json", url=f"{base}/q", json_path=path), 2.0)
    assert reading.queue_depth == expected


@pytest.mark.parametrize(
    "document, path, message",
    [
        ({"queue": 1}, "queue_length", "no key 'queue_length' in (document) (keys: queue)"),
        ({"data": [1]}, "data.3", "data is a list of 1; '3' is not an index in it"),
        ({"data": [1]}, "data.x", "'x' is not an index"),
        ({"q": "busy"}, "q", "q is str 'busy', not a number"),
        ({"q": True}, "q", "q is bool"),
        ({"a": 1}, "a.b", "a is int, cannot take 'b'"),
    ],
)
def test_json_errors_name_the_path(document, path, message):
    with pytest.raises(ScrapeError) as info:
        queue_from_json(json.dumps(document), path)
    assert message in str(info.value) and "gateway.json_path" in info.value.hint


def test_json_garbage():
    with pytest.raises(ScrapeError, match="not JSON"):
        queue_from_json("<html></html>", "q")


def test_json_nested_deeper_than_the_parser_goes_is_a_scrape_error():
    # json.loads raises RecursionError (not ValueError) past ~1000 levels: a hostile or broken
    # endpoint must cost its own source, like any other garbage.
    with pytest.raises(ScrapeError, match="nested too deeply"):
        queue_from_json("[" * 100_000 + "]" * 100_000, "0")


def test_kind_none_reads_nothing_and_unknown_preset_is_a_config_error():
    assert read_gateway(GatewaySettings(), 2.0).queue_depth is None
    with pytest.raises(ConfigError, match="unknown preset 'nginx'"):
        resolve_preset(GatewaySettings(preset="nginx"))


def test_docs_describe_every_preset():
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "gateways.md").read_text()
    assert [p for p in GATEWAY_PRESETS if f"| `{p}` |" not in text] == []


# -- the selective parser reads what prometheus_client reads, on every preset's payload --------------

@pytest.mark.parametrize("preset", sorted(PRESET_PAYLOADS))
def test_every_preset_payload_reads_as_the_reference_reads_it(preset):
    from prometheus_client.parser import text_string_to_metric_families

    text, expected = PRESET_PAYLOADS[preset]
    metric = GATEWAY_PRESETS[preset]["metric"]
    names = {name for term in metric.split("+") for name in term.split("|")}
    reference = [s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name in names]
    assert queue_from_prometheus(text, metric) == expected == (math.fsum(reference) if reference else None)


def test_a_counter_is_read_by_its_exposed_sample_names():
    # "# TYPE q counter" declares q and q_total; a sample exposed as q is read as q (as a
    # Prometheus server stores it), and q_total declared without samples is absent, not zero
    counter = "# TYPE q counter\nq 5\n"
    assert queue_from_prometheus(counter, "q") == 5.0
    assert queue_from_prometheus(counter, "q_total") is None
    with pytest.raises(ScrapeError, match="no metric named r"):
        queue_from_prometheus(counter, "r")
