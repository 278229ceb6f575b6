"""The model's shape read, not typed (core/model_shape.py, app/model_shapes.py): weight bytes, KV bytes
per token and active parameters from a config.json, the Hugging Face cache or the table of known
architectures, quantisation counted with its scales and zeros, replicated and compressed KV; a bad
config.json costs one line naming it and falls back; the collector fills unset inputs on the real path."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from app.collection import CollectionService
from core import model_shape as ms
from core.settings import CeilingSettings, Settings, TargetSettings
from db.queries import Reader
from tests.data.make_vllm_fixtures import ITERATION_TOKENS, counter, gauge, histogram, render
from tests.support.http_server import serve

H200 = json.loads((Path(__file__).parent / "data" / "h200" / "decode_mbu_bench.json").read_text())
LLAMA3_8B = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
             "intermediate_size": 14336, "vocab_size": 128256, "torch_dtype": "bfloat16"}  # fmt: skip
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}


def test_llama3_8b_is_the_h200_benchs_model_to_the_byte():
    shape = ms.shape_of(LLAMA3_8B)
    assert shape.weight_bytes == H200["weight_bytes"] == 16_060_522_496
    assert shape.step_weight_bytes == H200["step_weight_bytes"]  # less the input embedding table
    assert shape.kv_bytes_per_token == H200["kv_bytes_per_token"] == 131_072
    assert shape.params == shape.active_params == pytest.approx(8.03e9, rel=1e-3)


def test_awq_counts_its_scales_and_zeros():
    """Llama-3-70B AWQ: 39.8 GB on disk, ~37.7 GB read a step; 0.5 B a weight alone is 3.8 % short."""
    _, fields = ms.known_architecture("casperhansen/llama-3-70b-instruct-awq") or ("", {})
    shape = ms.shape_of({**fields, "quantization_config": AWQ}, tensor_parallel=8)
    assert shape.weight_bytes / 1e9 == pytest.approx(39.77, abs=0.01)
    assert shape.step_weight_bytes / 1e9 == pytest.approx(37.67, abs=0.01)
    linear = shape.params - 2 * 128_256 * 8192 - (2 * 80 + 1) * 8192  # the quantised weights
    unquantised = (2 * 128_256 * 8192 + (2 * 80 + 1) * 8192) * 2  # embeddings, LM head, norms in bf16
    # a 2-byte scale and a 4-bit zero per 128 weights: 2.5 bytes a group on top of 0.5 B a weight
    assert shape.weight_bytes == pytest.approx(linear * 0.5 + linear / 128 * 2.5 + unquantised)
    half_byte = shape.step_weight_bytes - linear / 128 * 2.5  # what 0.5 B a weight alone counts
    assert 1 - half_byte / shape.step_weight_bytes == pytest.approx(0.036, abs=0.003)
    assert shape.kv_bytes_per_token == 327_680  # Llama-70B grouped-query, the docs' and the demo's shape


def test_kv_heads_fewer_than_tp_are_replicated_and_mla_is_compressed_and_whole_on_every_gpu():
    assert ms.shape_of(LLAMA3_8B, tensor_parallel=8).kv_bytes_per_token == 131_072  # 8 heads over 8 GPUs
    assert ms.shape_of(LLAMA3_8B, tensor_parallel=16).kv_bytes_per_token == 2 * 32 * 16 * 128 * 2  # one head each
    assert ms.shape_of(LLAMA3_8B, kv_cache_dtype="fp8").kv_bytes_per_token == 65_536
    name, fields = ms.known_architecture("deepseek-ai/DeepSeek-V3") or ("", {})
    assert name == "DeepSeek-V3"
    for tp in (1, 8):
        shape = ms.shape_of(fields, tensor_parallel=tp)
        assert shape.kv_bytes_per_token / tp == 61 * (512 + 64) * 2  # 70,272 B a token on each GPU
    v3 = ms.shape_of(fields)
    assert v3.params / 1e9 == pytest.approx(671, abs=1) and v3.active_params / 1e9 == pytest.approx(37.5, abs=0.6)


def test_moe_active_parameters():
    _, fields = ms.known_architecture("mistralai/Mixtral-8x7B-Instruct-v0.1") or ("", {})
    shape = ms.shape_of(fields)
    assert shape.params / 1e9 == pytest.approx(46.7, abs=0.1) and shape.active_params / 1e9 == pytest.approx(12.9, abs=0.1)


@pytest.mark.parametrize("served", ["meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-13b-chat-hf", "meta-llama/Llama-2-70b-hf",
                                    "meta-llama/Meta-Llama-3-8B", "meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-405B",
                                    "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-14B", "Qwen/Qwen2.5-32B-Instruct",
                                    "Qwen/Qwen2.5-72B-Instruct", "mistralai/Mistral-7B-Instruct-v0.2",
                                    "mistralai/Mixtral-8x7B-v0.1", "deepseek-ai/DeepSeek-V3"])  # fmt: skip
def test_the_table_knows_the_usual_models_and_their_published_sizes(served):
    sizes = {"Llama 2 7B": 6.74, "Llama 2 13B": 13.0, "Llama 2 70B": 69.0, "Llama 3/3.1/3.3 8B": 8.03,
             "Llama 3/3.1/3.3 70B": 70.6, "Llama 3.1 405B": 405.9, "Qwen2.5 7B": 7.6, "Qwen2.5 14B": 14.7,
             "Qwen2.5 32B": 32.8, "Qwen2.5 72B": 72.7, "Mistral 7B (v0.1, v0.2)": 7.24, "Mixtral 8x7B": 46.7,
             "DeepSeek-V3": 671.0}  # the model cards' parameter counts, billions  # fmt: skip
    name, fields = ms.known_architecture(served) or ("", {})
    assert ms.shape_of(fields).params / 1e9 == pytest.approx(sizes[name], rel=0.01), name


def _bad(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "not-json.json").write_text("{'hidden_size': 4096")
    (tmp_path / "lacking.json").write_text(json.dumps({"hidden_size": 4096, "num_hidden_layers": 32}))
    (tmp_path / "a-directory.json").mkdir()
    return {"missing": tmp_path / "nowhere.json", "unreadable": tmp_path / "a-directory.json",
            "not JSON": tmp_path / "not-json.json", "lacking fields": tmp_path / "lacking.json"}  # fmt: skip


@pytest.mark.parametrize("case", ["missing", "unreadable", "not JSON", "lacking fields"])
def test_a_bad_config_json_is_one_line_naming_the_file_and_the_next_source_answers(tmp_path, case):
    path = _bad(tmp_path)[case]
    with pytest.raises(ms.ShapeError) as caught:
        ms.load_config(path)
    line = str(caught.value)
    assert line.startswith(str(path)) and "\n" not in line
    assert {"missing": "no such file", "unreadable": "unreadable", "not JSON": "not JSON",
            "lacking fields": "lacks num_attention_heads, vocab_size"}[case] in line  # fmt: skip
    shape, problems = ms.resolve("meta-llama/Meta-Llama-3-8B-Instruct", 1, path, None)
    assert problems == [line]
    assert shape is not None and shape.source == "table of known architectures (Llama 3/3.1/3.3 8B)"
    assert ms.resolve("someone/unknown-model", 1, path, None) == (None, [line])


def test_the_hugging_face_cache_is_searched_by_the_served_name(tmp_path):
    snapshot = tmp_path / "models--acme--tiny-llama" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({**LLAMA3_8B, "num_hidden_layers": 2}))
    shape, problems = ms.resolve("acme/tiny-llama", 1, None, tmp_path)
    assert problems == [] and shape is not None and shape.source == "config.json (Hugging Face cache, acme/tiny-llama)"
    assert shape.kv_bytes_per_token == 2 * 2 * 8 * 128 * 2


def _page(scrape: int) -> str:
    eng = {"model_name": "meta-llama/Llama-3.1-8B-Instruct", "engine": "0"}
    steps = 1000 + scrape * 2000
    iteration = [0.0] * (len(ITERATION_TOKENS) + 1)
    iteration[0] = steps
    return render([
        gauge("vllm:num_requests_running", "Running.", [(eng, 1.0)]),
        counter("vllm:generation_tokens", "Generated.", [(eng, 1e6 + scrape * 2000.0)], True),
        histogram("vllm:iteration_tokens_total", "Tokens per step.", ITERATION_TOKENS, [(eng, iteration, steps)], True),
    ])  # fmt: skip


def test_the_collector_fills_unset_inputs_from_the_shape_and_says_where(tmp_path, caplog):
    """On the real path: the page names the served model; the target gave TP and bandwidth only and a
    config.json that is not JSON: one line names it, the table answers, the stored ceiling says so."""
    bad = tmp_path / "config.json"
    bad.write_text("not json")
    url, now = f"sqlite:///{tmp_path}/shape.db", [1_800_000_000.0]
    routes = {"/metrics": (200, "text/plain", _page(0))}
    with serve(routes) as base:
        target = TargetSettings(name="h200", vllm_url=f"{base}/metrics", model_config=str(bad),
                                ceiling=CeilingSettings(tensor_parallel=1, bandwidth_gbps=4800.0))  # fmt: skip
        service = CollectionService(Settings(db_url=url, targets=(target,), hf_cache_dir=str(tmp_path / "hub")),
                                    clock=lambda: now[0])  # fmt: skip
        try:
            with caplog.at_level(logging.WARNING, logger="app.model_shapes"):
                service.collect_once()
            now[0] += 10
            routes["/metrics"] = (200, "text/plain", _page(1))
            service.collect_once()
        finally:
            service.close()
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "app.model_shapes"]
    assert warning.startswith(f"h200: {bad}: not JSON") and "next source" in warning
    f = Reader(url).window("h200", now[0], 60)
    assert f.ceiling is not None and f.ceiling.shape_source == "table of known architectures (Llama 3/3.1/3.3 8B)"
    assert f.ceiling.weight_gb == pytest.approx(H200["step_weight_bytes"] / 1e9)
    assert (f.ceiling.kv_bytes_per_token, f.ceiling.kv_source) == (131_072, "config")
    assert f.ceiling.active_params_b == pytest.approx(8.03, abs=0.01)
    assert f.mbu is not None and f.steps_per_s == pytest.approx(200.0)  # the step model now has its inputs
