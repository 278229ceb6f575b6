"""The sweep fits its prompts to the engine's context, or refuses before any load (sweep/fit.py).

Unit cases on the arithmetic, then ``python -m app sweep`` against the simulator served with a short
``--max-model-len``: its ``/v1/models`` says the context and its ``/tokenize`` counts as vLLM's does.
"""

import json
import subprocess
import sys

import httpx
import pytest

from core.errors import UsageError
from simulator import SimOptions, start_simulator
from sweep.fit import RATIO_SLACK, Context, fit_mix, prompt_cap, sized_note
from sweep.workload import CLASSES, parse_mix

SPEED = 50.0


def test_a_mix_that_fits_is_left_alone():
    mix = parse_mix("short:0.6,long:0.4")
    assert fit_mix(mix, Context(8192)) == (mix, [])
    assert fit_mix(mix, Context(None)) == (mix, [])  # an engine that does not say its context


def test_the_long_class_is_sized_to_a_short_context():
    # 4,096 tokens with 1.2 engine tokens a prompt token: 3,000 + 800 no longer fits
    context = Context(4096, 1.2, "the engine's /tokenize")
    (short, _), (long, _) = fit_mix(parse_mix("short:0.6,long:0.4"), context)[0]
    cap = int((4096 - 800) / (1.2 * (1 + RATIO_SLACK)))
    assert long.input_tokens == (2000, cap) and long.max_tokens == (500, 800) and short == CLASSES["short"]
    assert cap * 1.2 + 800 <= 4096  # the longest prompt, counted by the engine, plus the longest output
    _, sized = fit_mix(parse_mix("long:1"), context)
    assert sized_note(sized, context) == (
        f"class long sized to the engine's max_model_len 4,096: prompts of 2,000-{cap:,} tokens instead of "
        "2,000-3,000 (1.20 engine tokens a prompt token, by the engine's /tokenize)"
    )


def test_a_class_that_cannot_fit_is_refused_naming_it_and_the_limit():
    # the engine: 4,096 tokens, a tokenizer counting about two tokens a word
    with pytest.raises(UsageError) as caught:
        fit_mix(parse_mix("short:0.6,long:0.4"), Context(4096, 2.0, "the engine's /tokenize"))
    text = caught.value.one_line()
    assert "class long needs at least 4,800 tokens" in text and "max_model_len 4,096" in text
    assert "nothing was sent" in text and "--max-model-len 5120" in text and "--mix short:1" in text
    assert prompt_cap(CLASSES["short"], Context(4096, 2.0)) >= 300  # short still fits: only long is named


@pytest.fixture
def short_context_sim(request):
    running = start_simulator(SimOptions(speed=SPEED, seed=4, max_model_len=getattr(request, "param", 3600)))
    yield running
    running.stop()


def _sweep(*args):
    return subprocess.run([sys.executable, "-m", "app", "sweep", *args], capture_output=True, text=True, timeout=90)


def _prompt_tokens(sim):
    page = httpx.get(sim.urls["vllm_metrics"]).text
    return sum(float(line.split()[-1]) for line in page.splitlines() if line.startswith("vllm:prompt_tokens_total{"))


def test_a_sweep_of_a_short_context_engine_sends_only_prompts_that_fit(short_context_sim, tmp_path):
    out = tmp_path / "sweep.json"
    done = _sweep("--url", short_context_sim.urls["openai_base"], "--mix", "long:1", "--concurrency", "2",
                  "--duration", "2s", "--server-speed", str(SPEED), "--no-store", "--json", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "class long sized to the engine's max_model_len 3,600" in done.stderr
    doc = json.loads(out.read_text())
    (level,) = doc["levels"]
    assert level["requests"] > 0 and level["errors"] == 0  # before: every long prompt over 2,800 was an HTTP 400
    fit = doc["recommendation"]
    assert fit["max_model_len"] == 3600 and fit["sized_classes"]["long"]["asked"] == [2000, 3000]
    assert 2000 <= fit["sized_classes"]["long"]["sent"][1] < 2800


@pytest.mark.parametrize("short_context_sim", [2048], indirect=True)
def test_a_class_that_cannot_fit_is_refused_before_any_load(short_context_sim, tmp_path):
    sim = short_context_sim
    done = _sweep("--url", sim.urls["openai_base"], "--mix", "short:0.6,long:0.4", "--concurrency", "1",
                  "--duration", "2s", "--no-store", "--api", "chat")  # fmt: skip
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("ERROR: --mix: class long needs at least") and "max_model_len 2,048" in line
    assert _prompt_tokens(sim) == 0  # nothing was sent
