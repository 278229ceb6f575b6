"""Every vLLM naming era and SGLang 0.5: generated pages, checked against prometheus_client, read right."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from collectors.vllm import parse_vllm, total_figures
from tests.data import make_engine_fixtures as fixtures

DATA = Path(__file__).parent / "data"
PAGES = sorted(fixtures.EXPECTED)


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_committed_fixtures_match_their_generator():
    for name, text in fixtures.payloads().items():
        assert read(name) == text, f"{name} is stale: run python -m tests.data.make_engine_fixtures"
    assert set(fixtures.payloads()) == set(PAGES)


def _samples(text: str) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    return {(s.name, tuple(sorted(s.labels.items())), s.value)
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.mark.parametrize("name", PAGES)
def test_prometheus_client_reads_every_sample_the_generator_meant(name):
    meant = {(s.name, tuple(sorted(s.labels.items())), s.value)
             for family in fixtures.families()[name] for s in family.samples}
    assert len(meant) > 50
    assert _samples(read(name)) == meant


@pytest.mark.parametrize("name", PAGES)
def test_each_era_gives_its_values(name):
    expected = fixtures.EXPECTED[name]
    scrape = parse_vllm(read(name))
    total = total_figures(scrape)
    assert scrape.engine == expected["engine"]
    for key in ("generation_tokens", "prompt_tokens", "preemptions", "request_success", "prefix_cache_hits",
                "engine_read_bytes", "engine_write_bytes", "admission_rejections", "spec_decode_drafts",
                "spec_decode_draft_tokens", "spec_decode_accepted_tokens"):
        if key in expected:
            assert total.counters[key] == expected[key], key
    for key in ("kv_cache_usage", "requests_running", "requests_waiting", "kv_capacity_tokens", "waiting_capacity",
                "waiting_deferred"):
        if key in expected:
            assert total.gauges[key] == expected[key], key
    for reason, count in expected.get("finished", {}).items():
        if reason != "repetition":
            assert total.counters[f"finished_{reason}"] == count
    for key, exposed in expected.get("names", {}).items():
        assert scrape.metric_names_used[key] == exposed
    if "process_start" in expected:
        assert (scrape.process_start_time_s is not None) == expected["process_start"]


def test_v0_4_and_0_6_differ_by_the_phase_histograms_and_lora():
    old, new = parse_vllm(read("engine_vllm_0_4.txt")), parse_vllm(read("engine_vllm_0_6.txt"))
    assert {"queue_time", "prefill_time", "lora_requests"} <= set(old.missing)
    assert not {"queue_time", "prefill_time", "lora_requests"} & set(new.missing)
    assert old.engines == new.engines == ()


def test_0_10_reads_each_renamed_figure_once():
    scrape = parse_vllm(read("engine_vllm_0_10.txt"))
    total = total_figures(scrape)
    # the old names carry the same values on the page; read once, they are not doubled
    assert total.counters["prefix_cache_queries"] == 1_700_000 and total.gauges["kv_cache_usage"] == 0.57
    assert "tpot" in scrape.missing  # request_time_per_output_token_seconds comes with 0.11


def test_0_15_has_no_tpot_histogram_by_its_old_name():
    text = read("engine_vllm_0_15.txt")
    assert "vllm:time_per_output_token_seconds" not in text
    assert parse_vllm(text).metric_names_used["itl"] == "vllm:inter_token_latency_seconds"
    assert "vllm:time_per_output_token_seconds_bucket" in read("engine_vllm_0_11.txt")


def test_0_33_new_figures():
    scrape = parse_vllm(read("engine_vllm_0_33.txt"))
    total = total_figures(scrape)
    assert total.gauges["kv_capacity_tokens"] == 2 * 30210 * 16
    assert total.gauges["kv_capacity_bytes"] == 2 * 30210 * 16 * 327680
    assert (total.gauges["sleep_weights_offloaded"], total.gauges["sleep_discard_all"]) == (0, 0)
    # the newest lora_requests_info sample (largest timestamp), not the page's last
    assert scrape.lora["running_lora_adapters"] == "sql-lora"
    assert (total.gauges["lora_running_adapters"], total.gauges["lora_waiting_adapters"]) == (1, 2)
    assert total.created["engine_read_bytes"] == 1764490000.25
    assert "tpot" in total.histograms and "prefill_time" in total.histograms
    assert scrape.metric_names_used["kv_capacity_tokens"] == "vllm:cache_config_info"


def test_0_33_multiprocess_reads_the_same_figures_without_created_or_process_start():
    single, multi = (parse_vllm(read(n)) for n in ("engine_vllm_0_33.txt", "engine_vllm_0_33_mp.txt"))
    assert multi.process_start_time_s is None
    assert all(not f.created for f in multi.models.values())
    a, b = total_figures(single), total_figures(multi)
    assert a.counters == b.counters and a.gauges == b.gauges
    assert a.histograms == b.histograms  # _sum before the buckets changes nothing


def test_sleeping_engine_states():
    for state, offloaded, discarded in (("weights_offloaded", 1, 0), ("discard_all", 0, 1), ("awake", 0, 0)):
        gauges = total_figures(parse_vllm(fixtures.v33_sleeping_page(state))).gauges
        assert (gauges["sleep_weights_offloaded"], gauges["sleep_discard_all"]) == (offloaded, discarded)


def test_sglang_ranks_are_not_double_counted():
    scrape = parse_vllm(read("engine_sglang_0_5.txt"))
    total = total_figures(scrape)
    assert scrape.engines == ("0", "1")  # dp ranks
    assert total.gauges["requests_running"] == 22  # 12 + 10, tp_rank 1's copies dropped
    assert total.gauges["kv_capacity_tokens"] == 960_000
    assert math.isclose(total.gauges["prefix_cache_hit_rate"], 0.30)
    assert total.counters["preemptions"] == 9  # retractions
    assert total.counters["finished_abort"] == 25
    assert total.histograms["queue_time"].count == 9000  # 4500 per dp rank, not per tp rank
    assert scrape.process_start_time_s is None and scrape.cache_config == {}


@pytest.mark.parametrize("name", PAGES)
def test_inspect_json_names_every_new_figure(name, capsys):
    from app.cli import main

    assert main(["inspect", "--json", str(DATA / name)]) == 0
    report = json.loads(capsys.readouterr().out)
    expected = fixtures.EXPECTED[name]
    assert report["engine"] == expected["engine"]
    assert report["generation_tokens_total"] == expected["generation_tokens"]
    for key in ("engine_read_bytes", "engine_write_bytes", "admission_rejections"):
        assert report[f"{key}_total"] == expected.get(key, report[f"{key}_total"])
    if "finished" in expected:
        assert report["requests_finished_by_reason"] == {k: v for k, v in expected["finished"].items()
                                                         if k != "repetition"}
    if "kv_capacity_tokens" in expected:
        assert report["kv_capacity_tokens"] == expected["kv_capacity_tokens"]
    assert set(report["metric_versions"]) == set(report["metric_names_used"])


def test_inspect_json_0_33_and_sglang_details(capsys):
    from app.cli import main

    main(["inspect", "--json", str(DATA / "engine_vllm_0_33.txt")])
    v33 = json.loads(capsys.readouterr().out)
    assert v33["sleep_state"] == "awake"
    assert math.isclose(v33["prefix_cache_hit_rate"], 550_000 / 1_700_000)
    assert math.isclose(v33["spec_decode_acceptance_rate"], 144_000 / 210_000)
    assert math.isclose(v33["spec_decode_mean_acceptance_length"], 1 + 144_000 / 70_000)
    assert v33["lora"] == {"running": ["sql-lora"], "waiting": ["chat-lora", "summ-lora"], "max_lora": "4"}
    assert v33["metric_versions"]["engine_read_bytes"] == "vLLM ≥ 0.32 with --enable-mfu-metrics"
    main(["inspect", "--json", str(DATA / "engine_vllm_0_4.txt")])
    v04 = json.loads(capsys.readouterr().out)
    assert v04["sleep_state"] is None and v04["engine_read_bytes_total"] is None
    assert v04["metric_versions"]["kv_cache_usage"].startswith("vLLM ≤ 0.10.2")
    main(["inspect", "--json", str(DATA / "engine_sglang_0_5.txt")])
    sg = json.loads(capsys.readouterr().out)
    assert sg["engine"] == "sglang" and sg["prefix_cache_hit_rate"] == pytest.approx(0.30)
    assert sg["metric_names_used"]["preemptions"] == "sglang:num_retracted_requests_total"
    main(["inspect", str(DATA / "engine_vllm_0_33_mp.txt")])
    table = capsys.readouterr().out
    assert "vLLM ≥ 0.32 with --enable-mfu-metrics" in table and "start time not exposed" in table
