"""The scenarios' series through Debian's promtool (issue 40 item 3): the product's exported rules
catch an error burst as the evaluator does, and the plain "TTFT P95 > SLO for 5 m" rule on the
engine's histogram cannot see requests waiting in the gateway."""

from __future__ import annotations

import os
import shutil

import pytest

from app.commands.scenarios import exported_rules
from app.scenarios.library import BY_NAME
from app.scenarios.promtool import PLAIN_TTFT, VLLM_EXAMPLE, families_in, input_series, run_promtool
from app.scenarios.score import score

pytestmark = pytest.mark.slow  # promtool over 45 simulated minutes, ~10 s a run


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool not found although CI is set; .ci/run installs prometheus, which ships it")
        pytest.skip("Debian's prometheus (promtool) is not installed")
    return found


def test_the_exported_rules_catch_an_error_burst(promtool):
    s = score(run_promtool(BY_NAME["error_burst"], exported_rules(), promtool))
    assert (s.caught, s.right_clause) == (True, "requests_failing")
    assert s.detect_s is not None and s.detect_s <= 120.0 and s.false_firings == 0


def test_the_plain_ttft_rule_misses_a_queue_held_in_the_gateway(promtool):
    s = score(run_promtool(BY_NAME["surge_gateway"], PLAIN_TTFT, promtool))
    assert s.caught is False and s.false_firings == 0


def test_input_series_mark_failed_scrapes_and_keep_only_the_rules_families():
    series = input_series(BY_NAME["scrapes_failing_near"], families_in(VLLM_EXAMPLE))
    names = {s["series"].split("{")[0] for s in series}
    assert "up" in names and "vllm:e2e_request_latency_seconds_bucket" in names and "vllm:kv_cache_usage_perc" in names
    assert "vllm:generation_tokens_total" not in names  # no rule of the file reads it
    up = next(s["values"].split() for s in series if s["series"].startswith("up{"))
    step = BY_NAME["scrapes_failing_near"].step_s
    assert up[int(600 / step)] == "0" and up[int(600 / step) - 1] == "1" and up.count("0") == 180 / step
