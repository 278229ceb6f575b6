"""The simulator's /metrics, gateway and dcgm endpoints, read by prometheus_client and our collectors."""

import socket
import threading
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from collectors.dcgm import parse_dcgm
from simulator import SimOptions, start_simulator
from simulator.stats import TTFT_BUCKETS_V0, TTFT_BUCKETS_V1


def _samples(url: str) -> dict[str, list]:
    text = httpx.get(url, headers={"Accept": "text/plain"}, timeout=10).text
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def _one(samples: dict[str, list], name: str) -> float:
    return samples[name][0].value


def _le(samples: dict[str, list], name: str) -> list[float]:
    return [float(s.labels["le"]) for s in samples[name + "_bucket"]]


@pytest.fixture(scope="module")
def loaded():
    sim = start_simulator(SimOptions(speed=40, load=6, seed=3))
    deadline = time.time() + 20
    while time.time() < deadline and not _samples(sim.urls["vllm_metrics"]).get("vllm:e2e_request_latency_seconds_count", [0])[0]:
        time.sleep(0.3)
    # The built-in load ramps up one client per control period: wait for all six to be in flight.
    while time.time() < deadline and _one(_samples(sim.urls["gateway_metrics"]), "sweetspot_gateway_in_flight") < 6:
        time.sleep(0.2)
    yield sim
    sim.stop()


def test_v1_names_labels_and_buckets(loaded):
    s = _samples(loaded.urls["vllm_metrics"])
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:num_preemptions_total", "vllm:generation_tokens_total", "vllm:prompt_tokens_total",
                 "vllm:request_success_total", "vllm:inter_token_latency_seconds_count",
                 "vllm:e2e_request_latency_seconds_count", "vllm:request_queue_time_seconds_count",
                 "vllm:cache_config_info", "process_start_time_seconds", "vllm:generation_tokens_created",
                 "vllm:iteration_tokens_total_bucket"):
        assert name in s, name
    assert s["vllm:num_requests_running"][0].labels == {"model_name": "sweetspot/sim-70b-awq", "engine": "0"}
    assert _le(s, "vllm:time_to_first_token_seconds") == [*TTFT_BUCKETS_V1, float("inf")]
    assert _one(s, "vllm:generation_tokens_total") > 0
    assert s["vllm:cache_config_info"][0].labels["num_gpu_blocks"] == "4980"
    assert "vllm:gpu_cache_usage_perc" not in s


def test_gateway_and_gpus_follow_the_load(loaded):
    g = _samples(loaded.urls["gateway_metrics"])
    assert _one(g, "sweetspot_gateway_in_flight") == 6 and _one(g, "sweetspot_gateway_queue_depth") == 0
    text = httpx.get(loaded.urls["dcgm_metrics"], timeout=10).text
    gpus = parse_dcgm(text)
    assert len(gpus) == 8 and all(gpu.name == "Tesla V100-SXM2-32GB" for gpu in gpus)
    # vLLM holds the weights, its reserve and the KV pool --kv-cache-memory-bytes sets (5 + 0.5 + 3.26 GB
    # of 34.4 GB), plus the CUDA context: a quarter of each GPU, not gpu_memory_utilization's 0.92
    assert all(0.25 < gpu.memory_used_bytes / gpu.memory_total_bytes < 0.27 for gpu in gpus)
    assert all(0 < gpu.dram_bw_util_pct < 100 for gpu in gpus)


def test_v0_names():
    with start_simulator(SimOptions(vllm_version="v0")) as sim:
        s = _samples(sim.urls["vllm_metrics"])
    for name in ("vllm:gpu_cache_usage_perc", "vllm:num_requests_swapped", "vllm:time_per_output_token_seconds_count"):
        assert name in s
    assert "vllm:kv_cache_usage_perc" not in s and "vllm:inter_token_latency_seconds_count" not in s
    assert not any(name.endswith("_created") for name in s)
    assert _le(s, "vllm:time_to_first_token_seconds") == [*TTFT_BUCKETS_V0, float("inf")]
    assert "engine" not in s["vllm:num_requests_running"][0].labels


def test_restart_resets_counters_and_start_time(loaded):
    before = _samples(loaded.urls["vllm_metrics"])
    loaded.restart()
    after = _samples(loaded.urls["vllm_metrics"])
    assert _one(after, "process_start_time_seconds") > _one(before, "process_start_time_seconds")
    assert _one(after, "vllm:generation_tokens_created") > _one(before, "vllm:generation_tokens_created")
    assert _one(after, "vllm:generation_tokens_total") < _one(before, "vllm:generation_tokens_total")
    assert _one(after, "vllm:e2e_request_latency_seconds_count") == 0


def test_gateway_queue_depth_with_limit_2_and_5_requests():
    sim = start_simulator(SimOptions(gateway_limit=2, speed=1))
    results: list[int] = []

    def client() -> None:
        body = {"prompt": "wait in line", "max_tokens": 400}
        try:
            results.append(httpx.post(sim.urls["gateway_base"] + "/completions", json=body, timeout=30).status_code)
        except httpx.HTTPError:
            results.append(-1)

    threads = [threading.Thread(target=client) for _ in range(5)]
    for thread in threads:
        thread.start()
    depth = in_flight = None
    deadline = time.time() + 10
    while time.time() < deadline:
        g = _samples(sim.urls["gateway_metrics"])
        depth, in_flight = _one(g, "sweetspot_gateway_queue_depth"), _one(g, "sweetspot_gateway_in_flight")
        if depth == 3:
            break
        time.sleep(0.05)
    sim.stop()
    for thread in threads:
        thread.join(timeout=10)
    assert (depth, in_flight) == (3, 2)
    assert len(results) == 5


@pytest.mark.parametrize(("interval_s", "fewest"), [(30.0, 2), (0.0, 15)])
def test_dcgm_reads_the_gpus_once_per_collect_interval(interval_s, fewest):
    # As dcgm-exporter: between two readings of the GPUs (every 30 s of simulated time here, 0.75 s
    # of wall time at speed 40) every GET returns the same page; with no interval, each GET reads them.
    with start_simulator(SimOptions(speed=40, load=6, seed=3, dcgm_interval_s=interval_s)) as sim:
        time.sleep(1.0)  # some load, so that the GPU figures move
        pages = set()
        first = sim.live.clock.now()
        for _ in range(20):  # about 2 s of wall time: 80 s simulated
            pages.add(httpx.get(sim.urls["dcgm_metrics"], timeout=10).text)
            time.sleep(0.1)
        span_s = sim.live.clock.now() - first
    # at most one reading per interval of the simulated time the GETs took (plus the one in force at
    # the first GET), however slow the machine; with no interval the figures follow the load at each GET
    most = int(span_s / interval_s) + 2 if interval_s else 20
    assert fewest <= len(pages) <= most


def test_an_answer_arrives_whole_without_waiting_for_the_clients_acknowledgement():
    # Real servers send without Nagle's delay; the stdlib's defaults held the body back until the
    # client acknowledged the headers, up to 40 ms later (Linux delays that acknowledgement).
    with start_simulator(SimOptions()) as sim:
        host, port = sim.urls["vllm_metrics"].removeprefix("http://").split("/")[0].split(":")
        request = f"GET /metrics HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            for _ in range(8):  # past the quick acknowledgements of a new connection
                sock.sendall(request)
                time.sleep(0.01)  # the answer is ready long before this
                data = sock.recv(1 << 20, socket.MSG_DONTWAIT)
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                while len(body) < length:  # take the rest, however late, before the next request
                    body += sock.recv(1 << 20)
                assert len(data) - len(head) - 4 == length, "the body came after the headers"
