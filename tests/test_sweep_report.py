import io
import json

import pytest

from core.progress import SweepProgress
from db.results import SweepRun
from sweep.report import format_verdict, to_json
from sweep.verdict import recommend
from tests.test_sweep_verdict import REPORT


def test_terminal_bar_shows_percent_and_eta():
    out = io.StringIO()
    progress = SweepProgress(levels=3, level_s=60.0, stream=out, tty=True)
    progress.start_level(1, 16)
    progress.update(1, 16, 30.0, requests=12, errors=1)
    text = out.getvalue()
    assert "50%" in text and "ETA 1:30" in text and "level 2/3 concurrency 16" in text
    assert "12 requests, 1 errors" in text
    progress.finish_level(1, REPORT[1])
    assert out.getvalue().endswith(
        "level 2/3 done: concurrency 16, 126.0 tok/s, TTFT P95 2.60 s, 100 requests, 0 errors\n"
    )


def test_log_output_has_one_line_per_level_event():
    out = io.StringIO()
    progress = SweepProgress(levels=2, level_s=90.0, stream=out, tty=False)
    progress.start_level(0, 8)
    progress.update(0, 8, 45.0, 3, 0)
    progress.finish_level(0, REPORT[0], [("HTTP 429: busy", 4), ("timeout", 1)])
    lines = out.getvalue().splitlines()
    assert lines[0] == "level 1/2: concurrency 8 for 90s (3:00 + drains left)"
    assert lines[2:] == ["  4 × HTTP 429: busy", "  1 × timeout"]
    assert len(lines) == 4 and "\r" not in out.getvalue()


def test_json_document_has_the_issue_keys():
    verdict = recommend(REPORT, 3.0)
    run = SweepRun(0.0, "http://127.0.0.1:8000/v1", "m", "short:0.6,long:0.4", 3.0, tuple(REPORT), verdict)
    doc = json.loads(json.dumps(to_json(run)))
    keys = {"concurrency", "tokens_per_s", "qps", "ttft_p50_s", "ttft_p95_s", "ttft_p99_s", "itl_p95_s"}
    keys |= {"e2e_mean_s", "e2e_p95_s", "error_rate"}
    assert keys <= set(doc["levels"][0])
    assert doc["recommendation"]["sweet_spot_concurrency"] == 16
    assert format_verdict(verdict).startswith("Sweet spot: concurrency 16, gateway limit 16")


def test_the_verdict_names_the_limit_the_target_has():
    # a target with no gateway got "set the gateway limit to 4": it has no such knob
    verdict = recommend(REPORT, 3.0)
    bare = format_verdict(verdict, gateway=False).splitlines()[0]
    assert "gateway limit 16" not in bare and "vLLM's --max-num-seqs 16" in bare and "no gateway" in bare
    assert "gateway" not in format_verdict(verdict, gateway=False).splitlines()[1]  # nor in the reason under it
    unknown = format_verdict(verdict, gateway=None).splitlines()[0]
    assert "gateway's concurrency limit to 16" in unknown and "--max-num-seqs 16" in unknown


def test_the_time_left_counts_the_drain_of_the_levels_done():
    # 3 levels of 22 s announced as 66 s; the first took 47 s (25 s of requests running past the window)
    now = [0.0]
    out = io.StringIO()
    progress = SweepProgress(levels=3, level_s=22.0, stream=out, tty=False, clock=lambda: now[0])
    progress.start_level(0, 8)
    assert out.getvalue().splitlines()[-1] == "level 1/3: concurrency 8 for 22s (1:06 + drains left)"
    now[0] = 47.0
    progress.finish_level(0, REPORT[0])
    progress.start_level(1, 16)
    assert progress.drain_s == 25.0
    assert out.getvalue().splitlines()[-1] == "level 2/3: concurrency 16 for 22s (1:34 left)"  # 2 × (22 + 25)


def test_the_drains_to_come_grow_with_concurrency():
    # drains measured against the simulator: 5.5 s at 8, then larger at 16 and 32 (docs/sweep.md)
    now = [0.0]
    progress = SweepProgress(levels=3, level_s=33.0, stream=io.StringIO(), tty=False, clock=lambda: now[0],
                             concurrencies=(8, 16, 32))  # fmt: skip
    progress.start_level(0, 8)
    now[0] = 38.0
    progress.finish_level(0, REPORT[0])
    assert progress.expected_drain_s(1) == pytest.approx(5.0 * 2**0.5)
    assert progress.expected_drain_s(2) == pytest.approx(10.0)
    assert progress._left(1, 0.0) == pytest.approx(33 + 5 * 2**0.5 + 33 + 10)


def test_off_a_terminal_a_line_comes_at_least_every_30_s_inside_a_level():
    # a level of 10 minutes printed nothing for 6 minutes: now a line every 30 s, the drain's too
    now = [0.0]
    out = io.StringIO()
    progress = SweepProgress(levels=1, level_s=600.0, stream=out, tty=False, clock=lambda: now[0])
    progress.start_level(0, 32)
    for tick in range(0, 1300):  # the runner ticks every half second
        now[0] = tick / 2
        progress.update(0, 32, now[0], requests=tick // 10, errors=0, in_flight=32 if now[0] < 600 else 3)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 + 650 // 30
    assert lines[1] == "level 1/1 concurrency 32: 0:30 in, 6 requests ended, 0 errors, about 9:30 left"
    assert "10:30 in, draining 3 in flight" in lines[-1]
