"""The vLLM collector: catalogue names and aliases, engine aggregation, traps, and real HTTP scrapes."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from collectors.records import INF, Histogram
from collectors.vllm import merge_histograms, parse_vllm, scrape_vllm, total_figures
from core.errors import ScrapeError
from tests.data import make_vllm_fixtures
from tests.support.http_server import closed_port_url, serve

DATA = Path(__file__).parent / "data"
MODEL = "meta-llama/Llama-3.3-70B-Instruct-AWQ"
V1_TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160,
           640, 2560, INF)


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_committed_fixtures_match_their_generator():
    for name, text in make_vllm_fixtures.payloads().items():
        assert read(name) == text, f"{name} is stale: run tests/data/make_vllm_fixtures.py"
    assert 50_000 < len(read("vllm_v1.txt")) < 65_000


def test_v1_two_engines_summed_and_kv_maxed():
    scrape = parse_vllm(read("vllm_v1.txt"))
    assert list(scrape.models) == [MODEL]
    assert scrape.engines == ("0", "1")
    fig = scrape.models[MODEL]
    assert fig.counters == {
        "generation_tokens": 2_000_000, "prompt_tokens": 5_500_000, "preemptions": 7, "request_success": 10_920,
        "prefix_cache_hits": 550_000, "prefix_cache_queries": 1_700_000,
        "finished_stop": 9000, "finished_length": 1900, "finished_abort": 20,
    }
    resident = fig.gauges["kv_resident_tokens"]
    assert fig.gauges == {"requests_running": 16, "requests_waiting": 5, "kv_cache_usage": 0.57,
                          "kv_capacity_tokens": 2 * 30210 * 16, "engine_count": 2, "kv_resident_tokens": resident}
    # each engine's usage × its own capacity (blocks × block size), summed: not the max × the sum
    assert resident == pytest.approx((0.41 + 0.57) * 30210 * 16)
    ttft = fig.histograms["ttft"]
    assert ttft.bounds == V1_TTFT
    assert ttft.cumulative[:4] == (0, 1, 6, 25) and ttft.cumulative[-2:] == (9406, 9407)
    assert (ttft.count, ttft.sum) == (9407, 12500.75)
    # the step count and the request lengths are histograms the step model reads (db/mbu_figures.py)
    assert set(fig.histograms) == {"ttft", "itl", "e2e", "queue_time", "iteration_tokens", "request_prompt_tokens",
                                   "request_generation_tokens"}
    assert fig.created["generation_tokens"] == 1764490000.25 and fig.created["ttft"] == 1764490000.25
    assert scrape.process_start_time_s == 1764489990.5
    assert "requests_swapped" in scrape.missing and "finished_error" in scrape.missing  # no 0.33 reasons
    assert not {"ttft", "itl", "e2e", "queue_time", "cache_config", "kv_capacity_tokens"} & set(scrape.missing)
    assert scrape.metric_names_used["kv_cache_usage"] == "vllm:kv_cache_usage_perc"
    assert scrape.metric_names_used["itl"] == "vllm:inter_token_latency_seconds"
    assert scrape.cache_config["num_gpu_blocks"] == "30210" and "engine" not in scrape.cache_config


def test_v0_old_names_no_engines_no_created():
    scrape = parse_vllm(read("vllm_v0.txt"))
    fig = scrape.models[MODEL]
    assert scrape.engines == ()
    assert fig.gauges == {"requests_running": 9, "requests_waiting": 2, "requests_swapped": 1, "kv_cache_usage": 0.41}
    assert scrape.engine == "vllm"
    assert fig.histograms["ttft"].bounds == V1_TTFT[:16] + (INF,)
    assert fig.histograms["ttft"].cumulative[-1] == fig.histograms["ttft"].count == 5013
    assert scrape.metric_names_used["kv_cache_usage"] == "vllm:gpu_cache_usage_perc"
    assert scrape.metric_names_used["itl"] == "vllm:time_per_output_token_seconds"
    assert fig.created == {}
    assert {"prefix_cache_hits", "prefix_cache_queries", "queue_time", "cache_config"} <= set(scrape.missing)
    assert "kv_cache_usage" not in scrape.missing


def test_v0_10_both_kv_names_read_once_preferring_the_new_one():
    scrape = parse_vllm(read("vllm_v0_10.txt"))
    assert scrape.metric_names_used["kv_cache_usage"] == "vllm:kv_cache_usage_perc"
    assert scrape.metric_names_used["prefix_cache_hits"] == "vllm:gpu_prefix_cache_hits_total"
    assert scrape.models[MODEL].counters["prefix_cache_hits"] == 550_000


def test_aliases_never_double_count():
    text = (
        'vllm:kv_cache_usage_perc{model_name="m"} 0.3\nvllm:gpu_cache_usage_perc{model_name="m"} 0.9\n'
        'vllm:inter_token_latency_seconds_count{model_name="m"} 10\n'
        'vllm:time_per_output_token_seconds_count{model_name="m"} 10\n'
    )
    fig = parse_vllm(text).models["m"]
    assert fig.gauges["kv_cache_usage"] == 0.3
    assert fig.histograms["itl"].count == 10


def test_empty_family_of_preferred_alias_falls_back_to_the_old_name():
    text = "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc 0.7\n"
    scrape = parse_vllm(text)
    assert scrape.models[""].gauges == {"kv_cache_usage": 0.7}
    assert scrape.metric_names_used == {"kv_cache_usage": "vllm:gpu_cache_usage_perc"}


def test_edge_cases_fixture():
    scrape = parse_vllm(read("vllm_edge_cases.txt"))
    fig = scrape.models["m/a,b=c"]
    assert fig.counters == {"generation_tokens": 2000, "request_success": 12, "finished_stop": 10, "finished_length": 2}
    assert fig.gauges == {"requests_running": 7, "kv_cache_usage": 0.125, "engine_count": 2}  # a NaN engine does not hide the other
    assert fig.histograms["ttft"] == Histogram((0.5, 1.0, INF), (5, 8, 10), 10, 8.75)  # engine 0: +Inf from _count
    assert fig.created == {"generation_tokens": 1700000100.0}
    assert "requests_waiting" in scrape.missing  # a family with no samples is absent, not zero
    assert "requests_waiting" not in fig.gauges


def test_iteration_tokens_total_is_a_histogram_not_a_counter():
    # despite its name: one observation per engine step, so its count is the step count (docs/ceiling.md)
    hist = ('vllm:iteration_tokens_total_bucket{le="+Inf"} 5\nvllm:iteration_tokens_total_count 5\n'
            "vllm:iteration_tokens_total_sum 40\n")  # fmt: skip
    scrape = parse_vllm(hist + "vllm:generation_tokens_total 42\n")
    assert scrape.models[""].counters == {"generation_tokens": 42}
    steps = scrape.models[""].histograms["iteration_tokens"]
    assert (steps.count, steps.sum) == (5, 40)


def test_histogram_without_inf_or_count_is_left_out_and_bounds_intersect():
    text = (
        'vllm:time_to_first_token_seconds_bucket{model_name="a",le="1"} 3\n'
        'vllm:e2e_request_latency_seconds_bucket{engine="0",le="1"} 2\n'
        'vllm:e2e_request_latency_seconds_bucket{engine="0",le="2"} 3\n'
        'vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf"} 4\n'
        'vllm:e2e_request_latency_seconds_bucket{engine="1",le="2"} 10\n'
        'vllm:e2e_request_latency_seconds_bucket{engine="1",le="+Inf"} 20\n'
        'vllm:e2e_request_latency_seconds_sum{engine="1"} 9\n'
    )
    scrape = parse_vllm(text)
    assert "a" not in scrape.models  # its only histogram cannot be completed: left out, not zero
    assert scrape.models[""].histograms["e2e"] == Histogram((2.0, INF), (13, 24), None, None)


def test_models_kept_apart_then_totalled():
    text = (
        'vllm:num_requests_running{model_name="a",engine="0"} 1\nvllm:num_requests_running{model_name="b"} 2\n'
        'vllm:kv_cache_usage_perc{model_name="a"} 0.2\nvllm:kv_cache_usage_perc{model_name="b"} 0.6\n'
        'vllm:time_to_first_token_seconds_bucket{model_name="a",le="+Inf"} 3\n'
        'vllm:time_to_first_token_seconds_bucket{model_name="b",le="+Inf"} 4\n'
    )
    scrape = parse_vllm(text)
    assert scrape.models["a"].gauges == {"requests_running": 1, "kv_cache_usage": 0.2}
    total = total_figures(scrape)
    assert total.gauges == {"requests_running": 3, "kv_cache_usage": 0.6}
    assert total.histograms["ttft"].cumulative == (7,)


def test_merge_histograms_needs_every_count_for_a_count():
    a = Histogram((1.0, INF), (1, 2), 2, 1.5)
    b = Histogram((1.0, INF), (3, 4), None, 2.0)
    assert merge_histograms([a, b]) == Histogram((1.0, INF), (4, 6), None, 3.5)
    assert merge_histograms([]) is None


@pytest.mark.parametrize(
    "text, message",
    [
        ("<html><body>Not Found</body></html>", "no vLLM metrics found at this input"),
        ("", "no vLLM metrics found"),
        ("process_start_time_seconds 5\n", "no vLLM metrics found"),
        ('vllm:num_requests_running{model_name="a"} many\n', "line 1: 'many' is not a number"),
        ('vllm:time_to_first_token_seconds_bucket{le="soon"} 1\n', "le='soon' is not a bound"),
        ("vllm:time_to_first_token_seconds_bucket 1\n", "le=None"),
    ],
)
def test_garbage_raises_scrape_error(text, message):
    with pytest.raises(ScrapeError, match=message):
        parse_vllm(text)


def test_a_bad_counter_is_left_out_never_zeroed_and_costs_only_its_engine():
    lone = parse_vllm("vllm:num_preemptions_total NaN\nvllm:num_requests_running 2\n").models[""]
    assert "preemptions" not in lone.counters and lone.gauges["requests_running"] == 2
    for bad in ("NaN", "+Inf", "-3"):
        two = parse_vllm(f'vllm:num_preemptions_total{{engine="0"}} 7\nvllm:num_preemptions_total{{engine="1"}} {bad}\n')
        figures = two.models[""]
        assert figures.counters["preemptions"] == 7 and figures.partial == {"preemptions": "1"}


# --- real HTTP on loopback ------------------------------------------------------------------------


def test_scrape_over_http():
    with serve({"/metrics": (200, "text/plain; version=0.0.4", read("vllm_v1.txt"))}) as base:
        scrape = scrape_vllm(base + "/metrics", timeout_s=5)
    assert scrape.models[MODEL].counters["generation_tokens"] == 2_000_000


def test_scrape_asks_for_the_text_format():
    accepts: list[str] = []

    class Recorder(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            accepts.append(self.headers.get("Accept", ""))
            body = b"vllm:num_requests_running 1\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        scrape_vllm(f"http://127.0.0.1:{server.server_address[1]}/metrics", timeout_s=5)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert accepts and accepts[0].startswith("text/plain")  # not OpenMetrics


def test_unreachable_url():
    url = closed_port_url()
    with pytest.raises(ScrapeError, match="cannot reach") as info:
        scrape_vllm(url, timeout_s=2)
    assert url in str(info.value) and "Check targets[].vllm_url" in info.value.one_line()


def test_server_answering_500_and_garbage():
    routes = {"/500": (500, "text/plain", "oops"), "/garbage": (200, "text/html", "\x00\x01 hello { not metrics"),
              "/bad": (200, "text/plain", "vllm:num_requests_running{a=\"1\" 3\n")}
    with serve(routes) as base:
        with pytest.raises(ScrapeError, match="answered HTTP 500"):
            scrape_vllm(base + "/500", timeout_s=5)
        with pytest.raises(ScrapeError, match=f"no vLLM metrics found at {base}/garbage"):
            scrape_vllm(base + "/garbage", timeout_s=5)
        with pytest.raises(ScrapeError, match=f"^{base}/bad: line 1: "):
            scrape_vllm(base + "/bad", timeout_s=5)


# -- pages of the same sample names and other series --------------------------------------------

def _page(model: str = "m", engines: tuple[str, ...] = ("0",), bounds: tuple[str, ...] = ("1", "2"), n: int = 5) -> str:
    """A small V1 page; every argument changes its series set but not its sample names."""
    lines = []
    for e in engines:
        lines.append(f'vllm:generation_tokens_total{{engine="{e}",model_name="{model}"}} {n * 10}')
        lines.append(f'vllm:kv_cache_usage_perc{{engine="{e}",model_name="{model}"}} 0.{n}')
        for le in (*bounds, "+Inf"):
            value = n + (bounds.index(le) if le in bounds else len(bounds))
            lines.append(f'vllm:time_to_first_token_seconds_bucket{{engine="{e}",le="{le}",model_name="{model}"}} {value}')
        lines.append(f'vllm:time_to_first_token_seconds_count{{engine="{e}",model_name="{model}"}} {n + len(bounds)}')
        lines.append(f'vllm:time_to_first_token_seconds_sum{{engine="{e}",model_name="{model}"}} {n}.5')
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("first", "second", "check"),
    [
        (_page(), _page(n=7), lambda s: s.models["m"].counters["generation_tokens"] == 70),
        (_page(), _page(model="other"), lambda s: list(s.models) == ["other"]),
        (_page(), _page(engines=("1",)), lambda s: s.engines == ("1",)),
        (_page(engines=("0", "1")), _page(engines=("0", "2")), lambda s: s.engines == ("0", "2")),
        (_page(), _page(bounds=("1", "3")), lambda s: s.models["m"].histograms["ttft"].bounds == (1, 3, INF)),
        (_page(), _page(bounds=("0.5", "2")), lambda s: s.models["m"].histograms["ttft"].bounds == (0.5, 2, INF)),
    ],
    ids=["values only", "new model", "new engine", "engine replaced", "bucket layout", "first bound"],
)
def test_a_page_with_the_sample_names_of_another_is_read_for_its_own_series(first, second, check):
    # the pairs have the same sample names in the same order: a reading keyed on names alone fails
    assert [line.split("{")[0] for line in first.splitlines()] == [line.split("{")[0] for line in second.splitlines()]
    parse_vllm(first)
    assert check(parse_vllm(second))
