"""Per-request decode speed never above the engine's steps/s (issue 28: 112 vs 93 tok/s on a real vLLM).

A request decodes at most one token per step. The running gauge is a time average: over a window
in which the engine idled between requests (a closed-loop client's round trip, tokenization) it
counts the idle seconds as 0 running, while the steps and tokens happen only in the busy ones, so
tok/s ÷ running_avg read above steps/s by the idle share. Each step ran with at least tok/s ÷ steps/s
requests (its tokens), so that is the least the divisor may be.
"""

from __future__ import annotations

import pytest

from app.operating_point import request_speeds
from collectors.records import Histogram, ModelFigures, ScrapeRound, SourceResult, VllmScrape
from core.settings import TargetSettings
from db.engine import open_engine
from db.queries import Reader
from db.writer import Writer

T0 = 1_800_000_000
INF = float("inf")
STEPS_PER_S = 112.0  # one request at a time: one token per step


def write(url: str, busy: list[bool]) -> None:
    """Rounds every 5 s: a busy one saw the engine step 112 times a second with one request running,
    an idle one (between a client's requests) saw no step and 0 running."""
    engine = open_engine(url)
    writer = Writer(engine)
    writer.register_target(TargetSettings(name="t", vllm_url="http://127.0.0.1:1/metrics"))
    steps = 0.0
    for i, on in enumerate([True, *busy]):
        steps += STEPS_PER_S * 5 if on and i else 0.0
        hist = Histogram((1.0, 8.0, INF), (steps, steps, steps), steps, steps)
        figures = ModelFigures(counters={"generation_tokens": steps}, gauges={"requests_running": 1.0 if on else 0.0},
                               histograms={"iteration_tokens": hist})  # fmt: skip
        writer.write_round(ScrapeRound("t", T0 + 5 * i, VllmScrape({"m": figures}), SourceResult(True, None, 0.01)))
    engine.dispose()


@pytest.mark.parametrize("idle", [0, 2, 6])
def test_per_request_speed_is_never_above_steps_per_s(tmp_path, idle):
    url = f"sqlite:///{tmp_path}/d.db"
    write(url, [True] * (12 - idle) + [False] * idle)
    fig = Reader(url).window("t", T0 + 60, 60)
    assert fig.steps_per_s is not None and fig.decode_tok_s_per_request is not None
    assert fig.steps_per_s == pytest.approx(STEPS_PER_S * (12 - idle) / 12)
    assert fig.decode_tok_s_per_request <= fig.steps_per_s + 1e-9
    assert fig.decode_tok_s_per_request == pytest.approx(fig.tokens_per_s / max(fig.running_avg, 1.0))
    # the Operating point page's per-step speeds read the same figure
    points = Reader(url).series("t", T0, T0 + 60, 60.0)
    speeds = request_speeds(points)
    assert speeds and all(s.per_request_tokens_per_s <= p.steps_per_s + 1e-9 for s, p in zip(speeds, points, strict=False))
