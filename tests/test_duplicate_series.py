"""A page that repeats a sample (same name, same labels, whatever their order or spacing) counts it
once: the first is kept and the repeats are counted as a diagnostic, never summed (1,000 copies of
`running 9` used to read as 9,016). Read by the collector from a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors.vllm import scrape_vllm
from tests.support.http_server import serve

PAGE = (Path(__file__).parent / "data" / "vllm_real_0_32.txt").read_text()
RUNNING = 'vllm:num_requests_running{engine="0",model_name="tiny-llama"} 0.0'
assert RUNNING in PAGE


def _spelling(draw: st.DrawFn, value: float) -> str:
    """One spelling of the running sample of the same series: labels in either order, blanks, trailing comma."""
    pairs = ['engine="0"', 'model_name="tiny-llama"']
    if draw(st.booleans()):
        pairs.reverse()
    sep = draw(st.sampled_from([",", ", "]))
    block = sep.join(pairs) + draw(st.sampled_from(["", ","]))
    return f"vllm:num_requests_running{{{block}}}{draw(st.sampled_from([' ', '  ', chr(9)]))}{value:g}"


@st.composite
def pages(draw: st.DrawFn) -> tuple[str, float, int]:
    first = draw(st.integers(0, 64))
    copies = draw(st.integers(1, 1000))
    repeats = [_spelling(draw, draw(st.integers(0, 64))) for _ in range(min(copies, 50))] * (copies // 50 + 1)
    repeats = repeats[:copies]
    page = PAGE.replace(RUNNING, "\n".join([f'{RUNNING.rsplit(" ", 1)[0]} {first}', *repeats]))
    return page, float(first), copies


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=pages())
def test_repeated_samples_count_once_the_first_kept(case: tuple[str, float, int]) -> None:
    page, first, copies = case
    with serve({"/metrics": (200, "text/plain", page)}) as base:
        scrape = scrape_vllm(base + "/metrics", 5.0)
    assert scrape.models["tiny-llama"].gauges["requests_running"] == first
    assert scrape.duplicate_samples == copies


def test_a_page_without_repeats_reports_none_and_reads_as_before() -> None:
    with serve({"/metrics": (200, "text/plain", PAGE)}) as base:
        scrape = scrape_vllm(base + "/metrics", 5.0)
    assert scrape.duplicate_samples == 0
    assert scrape.models["tiny-llama"].gauges["requests_running"] == float(re.search(r"running\{[^}]*\} (\S+)", PAGE)[1])
