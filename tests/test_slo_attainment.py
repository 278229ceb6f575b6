"""TTFT SLO attainment end to end: a real vLLM 0.32 page, then the same page 40 requests later, through
the collector's parser into a real SQLite file; ``status`` (text and --json) and the query view
against the shares worked out by hand from the buckets' increases."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collectors.records import ScrapeRound, SourceResult
from collectors.vllm import parse_vllm
from core.settings import SweetSpotSettings, TargetSettings
from db.engine import open_engine
from db.queries import Reader
from db.query_runner import Limits, run_query
from db.rollup import rollup
from db.thresholds import EVERY_TARGET, write_thresholds
from db.writer import Writer

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "tests" / "data" / "vllm_real_0_32.txt").read_text()  # 16 requests, all ≤ 0.25 s
# The requests between the two pages, per bucket (le → new requests in (previous le, le]): 20 in
# (0.75, 1], 10 in (1, 2.5], 8 in (2.5, 5], 2 in (5, 7.5]: 40 in all.
ADDED = {"1.0": 20, "2.5": 10, "5.0": 8, "7.5": 2}
# By hand, over the 40: 30 within 2.5 s (75 %), 38 within 5 s (95 %). A 3 s SLO lies between:
# 0.75 + (0.95 − 0.75) × (3 − 2.5) / (5 − 2.5) = 0.79. P95: rank 38 → (2.5, 5], 2.5 + 2.5 × 8/8 = 5 s.
SHARE_3S, BOUNDS_3S = 0.79, [2.5, 0.75, 5.0, 0.95]


def later_page(page: str) -> str:
    """``page`` with the TTFT histogram grown by :data:`ADDED` (cumulative buckets, count, sum)."""
    bounds = re.findall(r'vllm:time_to_first_token_seconds_bucket\{[^}]*le="([^"]+)"', page)
    grown, running = {}, 0
    for le in bounds:
        running += ADDED.get(le, 0)
        grown[le] = running

    def bucket(m: re.Match[str]) -> str:
        return f"{m.group(1)}{float(m.group(3)) + grown[m.group(2)]}"

    page = re.sub(r'(vllm:time_to_first_token_seconds_bucket\{[^}]*le="([^"]+)"[^}]*\} )(\S+)', bucket, page)
    total = sum(ADDED.values())
    page = re.sub(r"(vllm:time_to_first_token_seconds_count\{[^}]*\} )(\S+)", lambda m: f"{m.group(1)}{float(m.group(2)) + total}", page)
    return re.sub(r"(vllm:time_to_first_token_seconds_sum\{[^}]*\} )(\S+)", lambda m: f"{m.group(1)}{float(m.group(2)) + 100}", page)


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Path, str]:
    """Two rounds of the target ``real`` ending 10 s ago, and a config whose global SLO (10 s) the
    target overrides with 3 s."""
    db = f"sqlite:///{tmp_path / 'slo.db'}"
    engine = open_engine(db)
    writer = Writer(engine)
    writer.register_target(TargetSettings(name="real", vllm_url="http://127.0.0.1:1/metrics"))
    # status reads the window ending now: the rounds are placed just before it
    now = int(time.time())
    for ts, page in ((now - 40, PAGE), (now - 10, later_page(PAGE))):
        writer.write_round(ScrapeRound("real", ts, parse_vllm(page), SourceResult(True, None, 0.01)))
    # what a collector started on this config stores for the query views
    write_thresholds(engine, [(EVERY_TARGET, SweetSpotSettings(ttft_p95_slo_s=10.0)),
                              ("real", SweetSpotSettings(ttft_p95_slo_s=3.0))])  # fmt: skip
    rollup(engine, now + 120)  # the query views read the minute rollups: both minutes finished
    engine.dispose()
    config = tmp_path / "sweetspot.toml"
    config.write_text(f'db_url = "{db}"\n[sweetspot]\nttft_p95_slo_s = "10s"\n'
                      '[[targets]]\nname = "real"\nvllm_url = "http://127.0.0.1:1/metrics"\n'
                      '[targets.sweetspot]\nttft_p95_slo_s = "3s"\n'
                      # a rule over the figure, as docs/metrics.md suggests
                      '[[alerts.rules]]\nname = "ttft_slo"\nexpr = "ttft_slo_attainment"\nop = "<"\nthreshold = 0.95\n'
                      'severity = "warning"\n')  # fmt: skip
    return config, db


def status(config: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "app", "--config", str(config), "status", "--window", "10m", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_status_json_gives_the_share_within_the_targets_slo_and_the_bounds_either_side(stored):
    data = json.loads(status(stored[0], "--json"))
    assert data["ttft_slo_s"] == 3.0  # the target's override, not the global 10 s
    assert data["ttft_slo_attainment"] == pytest.approx(SHARE_3S)
    assert data["ttft_slo_bounds"] == pytest.approx(BOUNDS_3S)
    assert data["ttft_p95_s"] == pytest.approx(5.0) and data["ttft_p95_bucket"] == [2.5, 5.0]
    assert data["ttft_slo_in_p95_bucket"] is True  # 3 s inside (2.5, 5]: the P95 cannot be judged
    assert "ttft_slo 0.79 < 0.95" in data["reasons"]  # a rule over the figure judges it


def test_status_text_says_the_share_how_it_was_read_and_why_the_p95_cannot_be_judged(stored):
    text = status(stored[0])
    assert re.search(r"TTFT SLO attainment +79\.0 %", text), text
    assert "TTFT ≤ 3 s: 79.0 % of requests, interpolated between ≤ 2.5 s: 75.0 % and ≤ 5 s: 95.0 %" in text
    assert "TTFT P95 lies in vLLM's bucket (2.5, 5] s, which holds the 3 s SLO" in text
    assert "--custom-histogram-buckets (vLLM ≥ 0.32" in text


def test_an_slo_on_a_bucket_bound_is_exact_and_one_above_the_last_bound_a_floor(stored):
    reader = Reader(stored[1])
    end = time.time()
    exact = reader.window("real", end, 600, ttft_slo_s=2.5)
    assert exact.ttft_slo_attainment == pytest.approx(0.75) and exact.ttft_slo_bounds is None
    assert exact.ttft_slo_in_p95_bucket() is None  # 2.5 is the bucket's lower bound, not inside it
    above = reader.window("real", end, 600, ttft_slo_s=3000.0)
    assert above.ttft_slo_attainment == pytest.approx(1.0)  # all 40 within the last finite bound, 2560 s
    stored_slo = reader.window("real", end, 600)  # no SLO given: the one stored for the target
    assert stored_slo.ttft_slo_s == 3.0 and stored_slo.ttft_slo_attainment == pytest.approx(SHARE_3S)
    empty = reader.window("real", end - 3600, 600, ttft_slo_s=3.0)  # no request in that window
    assert empty.ttft_slo_attainment is None and empty.ttft_slo_s == 3.0


def test_the_minutes_view_gives_the_share_within_the_stored_slo(stored):
    sql = ("SELECT ttft_slo_attainment_pct AS pct, bucket_share(2.5, ttft_bounds, ttft_buckets) AS at_bound"
           " FROM minutes WHERE target = 'real' AND ttft_buckets IS NOT NULL")  # fmt: skip
    result = run_query(stored[1], sql, Limits(timeout_s=20, row_limit=10, max_timeout_s=30), {}, any_role=True)
    assert [tuple(r) for r in result.rows] == [pytest.approx((100 * SHARE_3S, 0.75))]  # the minute of the 40 requests
