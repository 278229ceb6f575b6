import io
import json

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
    assert lines[0] == "level 1/2: concurrency 8 for 90s (3:00 left)"
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


def test_the_time_left_counts_the_drain_of_the_levels_done():
    # 3 levels of 22 s announced as 66 s; the first took 47 s (25 s of requests running past the window)
    now = [0.0]
    out = io.StringIO()
    progress = SweepProgress(levels=3, level_s=22.0, stream=out, tty=False, clock=lambda: now[0])
    progress.start_level(0, 8)
    assert out.getvalue().splitlines()[-1] == "level 1/3: concurrency 8 for 22s (1:06 left)"
    now[0] = 47.0
    progress.finish_level(0, REPORT[0])
    progress.start_level(1, 16)
    assert progress.drain_s == 25.0
    assert out.getvalue().splitlines()[-1] == "level 2/3: concurrency 16 for 22s (1:34 left)"  # 2 × (22 + 25)
