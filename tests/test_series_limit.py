"""One target's huge page cannot starve the others: a limit on series per target (Prometheus'
``sample_limit`` idea), the excess dropped with one logged line and a warning on the Targets page."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from app.collection import CollectionService
from collectors.vllm import parse_vllm
from core.settings import DEFAULT_MAX_SERIES, Settings, TargetSettings
from db.queries import Reader
from simulator import SimOptions, start_simulator
from tests.support.collector_process import collector, two_targets, wait_until
from tests.support.http_server import serve
from tests.test_ui_app import open_app

ROOT = Path(__file__).resolve().parent.parent
V1 = (ROOT / "tests" / "data" / "vllm_v1.txt").read_text()
MODELS = 50_000


def models_page(models: int, engines: int = 1, families: tuple[str, ...] = ("num_requests_running", "generation_tokens_total")) -> str:
    """vLLM's page of one model, then ``models`` more (a gauge and a counter each, per engine)."""
    lines = [f'vllm:{name}{{model_name="m{m:05d}",engine="{e}"}} {m}'
             for name in families for m in range(models) for e in range(engines)]  # fmt: skip
    return V1 + "\n".join(lines) + "\n"


def test_the_first_series_of_the_page_are_kept_and_the_rest_counted():
    # the page's own 5 series (its model on engines 0 and 1, cache_config_info on each, the process
    # start), then 10: five models on two engines
    page = models_page(5, engines=2)
    whole = parse_vllm(page)
    cut = parse_vllm(page, max_series=8)
    assert (len(whole.models), whole.series_dropped) == (6, 0)
    assert list(cut.models) == ["m00000", "m00001", "meta-llama/Llama-3.3-70B-Instruct-AWQ"]
    assert (cut.series_dropped, cut.series_limit) == (7, 8)
    assert cut.models["m00001"].gauges["requests_running"] == 1.0  # engine 0 only: engine 1 was the 9th
    assert cut.models["m00000"].counters["generation_tokens"] == 0.0
    assert cut.models["meta-llama/Llama-3.3-70B-Instruct-AWQ"] == whole.models["meta-llama/Llama-3.3-70B-Instruct-AWQ"]
    assert parse_vllm(page, max_series=8) == cut  # the same page keeps the same series
    assert parse_vllm(V1, max_series=DEFAULT_MAX_SERIES).models == parse_vllm(V1).models


def test_an_over_the_limit_page_is_logged_once_not_every_round(tmp_path, caplog):
    with serve({"/metrics": (200, "text/plain", models_page(30))}) as base:
        settings = Settings(db_url=f"sqlite:///{tmp_path}/s.db", max_series=10,
                            targets=(TargetSettings(name="wide", vllm_url=f"{base}/metrics"),
                                     TargetSettings(name="own", vllm_url=f"{base}/metrics", max_series=40)))  # fmt: skip
        service = CollectionService(settings)
        try:
            with caplog.at_level(logging.INFO, logger="app.jobs"):
                for _ in range(3):
                    service.collect_once()
        finally:
            service.close()
    lines = [r.getMessage() for r in caplog.records if "max_series" in r.getMessage()]
    assert lines == ["wide vllm: 25 series over max_series = 10 dropped (the page's first 10 are kept; raise"
                     " targets[].max_series to keep them all)"]  # fmt: skip
    info = {t.name: t for t in Reader(settings.db_url).targets()}
    assert (info["wide"].series_dropped, info["wide"].series_limit, len(info["wide"].models)) == (25, 10, 6)
    assert (info["own"].series_dropped, len(info["own"].models)) == (0, 31)  # its own limit holds them all


@pytest.fixture(scope="module")
def sim():
    with start_simulator(SimOptions(port=0, load=2, speed=10.0, seed=3)) as running:
        yield running


def test_a_50000_series_target_starves_no_other(sim, tmp_path, monkeypatch):
    # The collector as users run it: the 50,000-model page (3 MB) costs its own target the models
    # over the limit; every round stores the healthy target beside it, and a round's work fits in
    # its interval many times over. Work is the collector's CPU time per round (from /proc), which a
    # loaded machine stretches far less than the wall time: without the limit it was over 10 s.
    db = f"sqlite:///{tmp_path}/wide.db"
    with serve({"/metrics": (200, "text/plain", models_page(MODELS, families=("num_requests_running",)))}) as base:
        cfg = two_targets(tmp_path / "sweetspot.toml", f'db_url = "{db}"\ninterval_s = "3s"',
                          ("wide", f"{base}/metrics"), ("healthy", sim.urls["vllm_metrics"]))  # fmt: skip
        log = tmp_path / "collector.log"
        proc = collector(cfg, log)
        try:
            wait_until(lambda: len(round_times(db, "wide")) >= 2, "the first rounds")  # the start's work done
            before = (cpu_s(proc.pid), len(round_times(db, "wide")))
            wait_until(lambda: len(round_times(db, "wide")) >= before[1] + 4, "four more rounds", timeout=300)
            after = (cpu_s(proc.pid), len(round_times(db, "wide")))
            peak_kib = int(proc_status(proc.pid)["VmHWM"].split()[0])
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        finally:
            proc.kill()
    wide, healthy = round_times(db, "wide"), round_times(db, "healthy")
    assert [ts for ts in wide if ts <= healthy[-1]] == healthy  # every round stored the healthy target
    per_round_s = (after[0] - before[0]) / (after[1] - before[1])
    assert per_round_s < 1.0, f"{per_round_s:.2f} s of CPU a round"
    assert_read_whatever_the_pace(db, "wide", "healthy")
    info = {t.name: t for t in Reader(db).targets()}
    kept = len(info["wide"].models)  # the page's own model, then one series a model up to the limit
    assert kept == DEFAULT_MAX_SERIES - 4 and info["wide"].series_dropped == MODELS - (kept - 1)
    assert peak_kib < 600 * 1024, f"the collector peaked at {peak_kib / 1024:.0f} MiB"
    text = log.read_text()
    assert text.count("series over max_series") == 1 and "Traceback" not in text
    status = subprocess.run([sys.executable, "-m", "app", "status", "--db", db, "--target", "wide", "--json"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert json.loads(status.stdout)["series_dropped"] == info["wide"].series_dropped
    at = open_app(monkeypatch, db)
    at.switch_page("views/targets.py").run()
    assert not at.exception, at.exception
    assert any(f"{info['wide'].series_dropped:,} series over max_series = 1,000" in w.body for w in at.warning)


def proc_status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of the process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def round_times(db: str, target: str) -> list[int]:
    """The stored rounds' times of ``target``, oldest first ([] before the database is made)."""
    return [ts for ts, _, _ in rounds(db, target)]


def rounds(db: str, target: str) -> list[tuple[int, bool, str | None]]:
    """The stored rounds of ``target`` as (time, up, error), oldest first ([] before the database is made)."""
    from sqlalchemy import text

    from db.engine import open_reader

    try:
        engine = open_reader(db)
    except Exception:
        return []
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT s.ts, s.up, s.error FROM scrapes s JOIN targets t ON t.id = s.target_id"
                                     " WHERE t.name = :n ORDER BY s.ts"), {"n": target})  # fmt: skip
            return [(int(ts), bool(up), error) for ts, up, error in rows]
    except Exception:
        return []
    finally:
        engine.dispose()


# A round given up at its deadline (collectors/fetch.py): what a busy machine's pace may cost a round.
# Its pages are the same every round, so any other failure (a refused page, a parse error) is real.
DEADLINE = re.compile(r"(no answer|was not complete) within [0-9.]+ s")


def up_rounds(db: str, target: str) -> int:
    return sum(up for _, up, _ in rounds(db, target))


def assert_read_whatever_the_pace(db: str, *targets: str) -> None:
    """Each target's pages were read and stored (a round up), and a round down was down only for its
    deadline: "up" at the end would have said how fast the last round's 10-20 MB came at load 20."""
    for target in targets:
        got = rounds(db, target)
        assert any(up for _, up, _ in got), (target, got[-3:])
        assert all(up or DEADLINE.search(error or "") for _, up, error in got), (target, [r for r in got if not r[1]])


def test_the_careful_pass_keeps_the_same_series():
    # a timestamp on one line sends the whole page through the careful pass: the same cut
    page = models_page(5, engines=2)
    careful = page.replace('engine="1"} 4\n', 'engine="1"} 4 1700000000000\n', 1)
    assert careful != page
    assert parse_vllm(careful, max_series=8) == parse_vllm(page, max_series=8)


# -- bounds below max_series: one series' buckets, one label value, one line (collectors/expfmt.py) --
def buckets_page(buckets: int, model: str = "wide") -> str:
    lines = [f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="{i / 1000:g}",model_name="{model}"}} {i}'
             for i in range(buckets)]  # fmt: skip
    return V1 + "\n".join(lines) + f'\nvllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf",model_name="{model}"}} {buckets}\n'


def long_name_page(chars: int) -> str:
    return V1 + f'vllm:num_requests_running{{model_name="{"m" * chars}",engine="0"}} 7\n'


def test_a_250000_bucket_histogram_costs_only_itself():
    import time

    from collectors.expfmt import MAX_BUCKETS

    start = time.process_time()
    scrape = parse_vllm(buckets_page(250_000))
    took = time.process_time() - start
    assert scrape.lines_refused == 250_001 - MAX_BUCKETS
    ttft = scrape.models["meta-llama/Llama-3.3-70B-Instruct-AWQ"]
    assert ttft == parse_vllm(V1).models["meta-llama/Llama-3.3-70B-Instruct-AWQ"]  # the page's own model untouched
    wide = scrape.models.get("wide")  # its +Inf was past the bound: that histogram is incomplete, not read
    assert wide is None or "ttft" not in wide.histograms
    assert took < 5.0, f"{took:.2f} s of CPU"


@pytest.mark.parametrize("extra, refused", [(0, 0), (1, 1)])
def test_the_bucket_bound_holds_at_its_bound(extra, refused):
    from collectors.expfmt import MAX_BUCKETS

    scrape = parse_vllm(buckets_page(MAX_BUCKETS - 1 + extra))  # the +Inf line is the last of MAX_BUCKETS (+ extra)
    assert scrape.lines_refused == refused


@pytest.mark.parametrize("chars", [10_000_000, 20_000, 1025])
def test_a_huge_model_name_costs_only_its_line(chars):
    scrape = parse_vllm(long_name_page(chars))
    assert scrape.lines_refused == 1 and not any(len(m) > 1024 for m in scrape.models)
    assert scrape.models == parse_vllm(V1).models


def test_a_label_value_at_its_bound_is_kept():
    from collectors.expfmt import MAX_LABEL_VALUE_CHARS

    scrape = parse_vllm(long_name_page(MAX_LABEL_VALUE_CHARS))
    assert scrape.lines_refused == 0 and "m" * MAX_LABEL_VALUE_CHARS in scrape.models


@given(at=st.integers(0, 3), escapes=st.integers(0, 40), over=st.booleans())
@hsettings(max_examples=40, deadline=None)
def test_the_label_bound_holds_wherever_the_long_value_is_and_whatever_it_holds(at, escapes, over):
    """Escaped quotes and backslashes count as one character each, as the value read holds them."""
    from collectors.expfmt import MAX_LABEL_VALUE_CHARS, SelectiveParser

    body = '\\"' * escapes + "v" * (MAX_LABEL_VALUE_CHARS - escapes + (1 if over else 0))
    labels = ['a="1"', 'b="2"', 'c="3"']
    labels.insert(at, f'x="{body}"')
    parser = SelectiveParser(["m"])
    (names, _, _), _, refused = parser.parse_bounded(f"m{{{','.join(labels)}}} 1\nm{{a=\"ok\"}} 2\n", None)
    assert (len(names), refused) == ((1, 1) if over else (2, 0))


def test_a_line_at_the_line_bound_is_kept_and_one_over_is_not():
    from collectors.expfmt import MAX_LINE_CHARS, SelectiveParser

    def line(length: int) -> str:
        labels = ",".join(f'l{i:02d}="{"v" * 1000}"' for i in range(16))  # 16 × 1006 characters
        pad = length - len(f"{{{labels}}} 1") - len(',p=""')
        assert 0 <= pad <= 1000  # every value within the label bound: only the line's length is over
        return "m" + f'{{{labels},p="{"w" * pad}"}} 1'

    parser = SelectiveParser(["m"])
    for length, kept in ((MAX_LINE_CHARS, 1), (MAX_LINE_CHARS + 1, 0)):
        text = line(length)
        assert len(text) - 1 == length
        (names, _, _), _, refused = parser.parse_bounded(text + "\n", None)
        assert (len(names), refused) == (kept, 1 - kept)


def test_hostile_pages_starve_no_other_target(sim, tmp_path):
    """The collector as users run it: a 10 MB model name on one target, 250,000 buckets on another;
    the healthy one is stored every round they are."""
    db = f"sqlite:///{tmp_path}/hostile.db"
    routes = {"/name": (200, "text/plain", long_name_page(10_000_000)), "/buckets": (200, "text/plain", buckets_page(250_000))}
    with serve(routes) as base:
        path = tmp_path / "sweetspot.toml"
        # the longest deadline a 3-s interval allows: the 10-20 MB pages come from this busy process
        two_targets(path, f'db_url = "{db}"\ninterval_s = "3s"\nscrape_timeout_s = "2.9s"', ("name", f"{base}/name"),
                    ("healthy", sim.urls["vllm_metrics"]))  # fmt: skip
        path.write_text(path.read_text() + f'[[targets]]\nname = "buckets"\nvllm_url = "{base}/buckets"\n')
        log = tmp_path / "collector.log"
        proc = collector(path, log)
        try:
            # four rounds each, one of them read in full at least (the condition, not the pace)
            wait_until(lambda: min(min(len(round_times(db, t)), 4 * up_rounds(db, t)) for t in ("name", "buckets", "healthy")) >= 4,
                       "four rounds each, one of them up", timeout=300)  # fmt: skip
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        finally:
            proc.kill()
    healthy = round_times(db, "healthy")
    for hostile in ("name", "buckets"):
        assert [ts for ts in round_times(db, hostile) if healthy[0] <= ts <= healthy[-1]] == healthy
    assert_read_whatever_the_pace(db, "name", "buckets", "healthy")
    assert "Traceback" not in log.read_text()
