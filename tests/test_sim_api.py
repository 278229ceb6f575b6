"""The OpenAI-compatible API of the simulator, read the way an OpenAI client reads it."""

import json

import httpx
import pytest

from simulator import SimOptions, start_simulator

MODEL = "sweetspot/sim-70b-awq"


@pytest.fixture(scope="module")
def sim():
    running = start_simulator(SimOptions(speed=50, seed=7))
    yield running
    running.stop()


def _events(response: httpx.Response) -> list[str]:
    """SSE payloads; every non-blank line must be a ``data: `` line."""
    payloads = []
    for line in response.iter_lines():
        if not line:
            continue
        assert line.startswith("data: "), line
        payloads.append(line[len("data: "):])
    return payloads


@pytest.mark.parametrize("chat", [True, False])
def test_streaming_is_sse_like_vllm(sim, chat):
    path = "/chat/completions" if chat else "/completions"
    body = {"model": MODEL, "max_tokens": 12, "stream": True, "stream_options": {"include_usage": True}}
    body.update({"messages": [{"role": "user", "content": "how fast is decode"}]} if chat else {"prompt": "a b c d"})
    with httpx.stream("POST", sim.urls["openai_base"] + path, json=body, timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        payloads = _events(response)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert len({c["id"] for c in chunks}) == 1
    assert all(c["object"] == ("chat.completion.chunk" if chat else "text_completion") for c in chunks)
    assert all(c["model"] == MODEL and isinstance(c["created"], int) for c in chunks)
    usage_chunk, content = chunks[-1], chunks[:-1]
    assert usage_chunk["choices"] == []
    finishes = [c["choices"][0]["finish_reason"] for c in content]
    assert finishes[-1] in ("stop", "length") and all(f is None for f in finishes[:-1])
    if chat:
        assert content[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        tokens = [c for c in content[1:] if c["choices"][0]["delta"].get("content")]
    else:
        tokens = [c for c in content if c["choices"][0]["text"]]
    usage = usage_chunk["usage"]
    assert usage["completion_tokens"] == len(tokens) <= 12
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["prompt_tokens"] == (4 + 3 + 3 if chat else 4)


def test_no_usage_chunk_unless_asked(sim):
    body = {"prompt": "hello", "max_tokens": 3, "stream": True}
    with httpx.stream("POST", sim.urls["openai_base"] + "/completions", json=body, timeout=30) as response:
        payloads = _events(response)
    assert payloads[-1] == "[DONE]"
    assert all(json.loads(p).get("usage") is None for p in payloads[:-1])  # vLLM sends "usage": null


@pytest.mark.parametrize("chat", [True, False])
def test_non_streaming_has_usage(sim, chat):
    path = "/chat/completions" if chat else "/completions"
    body = {"model": MODEL, "max_tokens": 8}
    body.update({"messages": [{"role": "user", "content": "hi"}]} if chat else {"prompt": "one two three"})
    data = httpx.post(sim.urls["openai_base"] + path, json=body, timeout=30).json()
    usage = data["usage"]
    choice = data["choices"][0]
    text = choice["message"]["content"] if chat else choice["text"]
    assert usage["completion_tokens"] == len(text.split()) <= 8
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert choice["finish_reason"] in ("stop", "length")


def test_too_long_prompt_is_a_400_like_vllm(sim):
    body = {"model": MODEL, "prompt": "word " * 8000, "max_tokens": 500}
    response = httpx.post(sim.urls["openai_base"] + "/completions", json=body, timeout=30)
    assert response.status_code == 400
    error = response.json()["error"]
    assert "maximum context length is 8192 tokens" in error["message"] and error["code"] == 400


def test_unknown_model_is_a_404(sim):
    body = {"model": "other", "prompt": "x", "max_tokens": 2}
    assert httpx.post(sim.urls["openai_base"] + "/completions", json=body, timeout=30).status_code == 404


def test_models_lists_the_served_model(sim):
    data = httpx.get(sim.urls["openai_base"] + "/models", timeout=30).json()
    assert [m["id"] for m in data["data"]] == [MODEL]


def test_gateway_proxies_the_api(sim):
    body = {"model": MODEL, "prompt": "through the gateway", "max_tokens": 4}
    data = httpx.post(sim.urls["gateway_base"] + "/completions", json=body, timeout=30).json()
    assert data["usage"]["prompt_tokens"] == 3


def test_the_slowdown_knob_slows_every_step_mid_run_and_refuses_a_bad_fraction():
    # its own simulator: the knob changes the engine the module's other tests share
    from simulator.params import EngineParams

    base = EngineParams().step_time_s(16, 0, 5e9)
    assert EngineParams(slowdown=0.3).step_time_s(16, 0, 5e9) == pytest.approx(base / 0.7)
    running = start_simulator(SimOptions(speed=50, seed=3))
    try:
        url = running.urls["openai_base"].removesuffix("/v1") + "/admin/slowdown"
        assert running.live.config.params.slowdown == 0.0
        done = httpx.post(url + "?fraction=0.3", timeout=10)
        assert done.status_code == 200 and done.json() == {"slowdown": 0.3}
        assert running.live.config.params.slowdown == 0.3 and running.live.engine.params.slowdown == 0.3
        bad = httpx.post(url + "?fraction=1.5", timeout=10)
        assert bad.status_code == 400 and "slowdown must be ≥ 0 and < 1" in bad.json()["error"]["message"]
        assert running.live.config.params.slowdown == 0.3  # a refused fraction changes nothing
        assert httpx.post(url + "?fraction=0", timeout=10).status_code == 200
        assert running.live.engine.params.slowdown == 0.0
    finally:
        running.stop()
    started = start_simulator(SimOptions(speed=50, seed=3, slowdown=0.3))  # `sim --slowdown 0.3`: from the start
    try:
        assert started.live.engine.params.slowdown == 0.3
    finally:
        started.stop()


def test_a_client_that_resets_its_connection_leaves_no_traceback(sim, caplog, capfd):
    import logging
    import socket
    import struct
    import time

    caplog.set_level(logging.DEBUG, logger="simulator.http")
    host, port = sim.urls["vllm_metrics"].split("//")[1].split("/")[0].split(":")
    with socket.create_connection((host, int(port))) as client:
        client.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # headers unfinished: the server reads on
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
    deadline = time.monotonic() + 30
    while not any("went away" in r.getMessage() for r in caplog.records):
        assert time.monotonic() < deadline, "the server never saw the reset"
        time.sleep(0.05)
    assert "Traceback" not in capfd.readouterr().err
