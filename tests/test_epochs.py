"""Configuration epochs and restarts (db/epochs.py): stored by the writer from what the vLLM page says,
compared before against after (app/epochs.py), listed by ``epochs`` and the ``config_changes`` view,
and marked on the time charts in Chromium.

The real path: the simulator and the collector as processes; the simulator restarted by SIGHUP, then
replaced on its port by one started with ``--gpu-memory-utilization 0.95``."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from app.epochs import compare, comparisons
from collectors.records import ScrapeRound, SourceResult
from collectors.vllm import parse_vllm
from db.engine import open_engine
from db.queries import Reader
from db.rollup import rollup
from db.writer import Writer
from simulator.history import generate_history
from simulator.params import EngineConfig, EngineParams
from tests.browser import CHROMIUM
from tests.support.collector_process import wait_until

ROOT = Path(__file__).resolve().parent.parent
NOON = 1796472000.0  # 2026-12-05 12:00 UTC: the daily pattern's busy hours
OK = SourceResult(True, duration_s=0.004)
WIDER = EngineConfig(params=EngineParams(gpu_memory_utilization=0.95))


def rounds(target: str, start: float, end: float, config: EngineConfig | None = None, step_s: float = 15.0):
    for sample in generate_history(start, end, step_s, seed=1, config=config, peak_clients=40):
        yield ScrapeRound(target, sample.ts, parse_vllm(sample.vllm), OK)


def two_configs(url: str, target: str = "t", hours: float = 2.0, after: EngineConfig = WIDER) -> float:
    """``hours`` of the default engine, then as long of one restarted with ``after`` (0.95); returns the
    change's time."""
    engine = open_engine(url)
    writer = Writer(engine)
    change = NOON + hours * 3600
    writer.write_rounds(rounds(target, NOON, change - 15, None))
    writer.write_rounds(rounds(target, change, change + hours * 3600, after))
    rollup(engine, change + hours * 3600 + 120)
    engine.dispose()
    return change


def test_a_changed_configuration_is_one_epoch_with_what_changed(tmp_path):
    url = f"sqlite:///{tmp_path}/e.db"
    change = two_configs(url)
    reader = Reader(url)
    first, second = reader.epochs("t")  # 960 rounds, two epochs: nothing stored while nothing changes
    assert (first.kind, first.ts) == ("first", NOON)
    assert first.config["gpu_memory_utilization"] == "0.92" and first.config["models"] == "sweetspot/sim-70b-awq"
    assert (second.kind, second.ts) == ("config+restart", change)
    # the simulator's pool is set in bytes (--kv-cache-memory-bytes): 0.95 leaves its blocks as they were,
    # a value that did not change is no change
    blocks = EngineParams().num_gpu_blocks()
    assert WIDER.params.num_gpu_blocks() == blocks
    assert first.config["num_gpu_blocks"] == second.config["num_gpu_blocks"] == str(blocks)
    assert second.changes == (("gpu_memory_utilization", "0.92", "0.95"),)
    assert second.text() == "gpu_memory_utilization 0.92 → 0.95 (restart)"
    assert second.process_start_s is not None and second.process_start_s != first.process_start_s
    # a pool sized by gpu_memory_utilization (no kv_cache_memory_bytes) grows with it: both are listed
    resized = EngineConfig(params=EngineParams(gpu_memory_utilization=0.95, kv_cache_memory_bytes=None))
    url = f"sqlite:///{tmp_path}/resized.db"
    change = two_configs(url, hours=0.5, after=resized)
    first, second = Reader(url).epochs("t")
    grown = (blocks, resized.params.num_gpu_blocks())
    assert grown[1] > grown[0]
    assert (second.kind, second.ts) == ("config+restart", change)
    assert second.changes == (("gpu_memory_utilization", "0.92", "0.95"), ("num_gpu_blocks", *map(str, grown)))
    assert second.text() == f"gpu_memory_utilization 0.92 → 0.95, num_gpu_blocks {grown[0]} → {grown[1]} (restart)"


def test_the_comparison_is_the_facade_windows_on_each_side(tmp_path):
    url = f"sqlite:///{tmp_path}/e.db"
    change = two_configs(url)
    reader = Reader(url)
    (compared,) = comparisons(reader, "t", reader.epochs("t"), 3600.0, change + 7200)
    assert compared.before == (change - 3600, change) and compared.after == (change, change + 3600)
    before = reader.window("t", change - 1, 3600 - 1, gpus=False)
    after = reader.window("t", change + 3600, 3600 + 1, gpus=False)
    assert compared.figures == tuple(compare(before, after))
    by_label = {c.label: c for c in compared.figures}
    assert by_label["output tok/s"].before == before.tokens_per_s and by_label["output tok/s"].after == after.tokens_per_s
    assert by_label["KV usage max"].after == pytest.approx(after.kv_cache_usage_max * 100)
    assert compared.text().startswith("since gpu_memory_utilization 0.92 → 0.95")


def test_changes_read_as_relative_or_absolute_with_their_sign():
    from db.results import WindowFigures

    base = {f.name: None for f in dataclasses.fields(WindowFigures) if f.default is dataclasses.MISSING}
    base.update(target="t", model=None, start=0.0, end=3600.0, window_s=3600.0, ttft_p95_in_inf_bucket=False)
    before = WindowFigures(**{**base, "preemptions": 12.0, "ttft_p95_s": 1.2, "tokens_per_s": 100.0})
    after = WindowFigures(**{**base, "preemptions": 0.0, "ttft_p95_s": 0.8, "tokens_per_s": 100.0})
    said = {c.label: c.change for c in compare(before, after)}
    assert said == {"preemptions/h": "−100 %", "TTFT P95": "−0.4 s", "output tok/s": "±0 %"}
    assert {c.label: c.change for c in compare(after, before)}["preemptions/h"] == "from 0 to 12"


def test_a_page_without_cache_config_makes_no_epoch_and_a_restart_alone_is_one(tmp_path):
    url = f"sqlite:///{tmp_path}/e.db"
    engine = open_engine(url)
    writer = Writer(engine)
    samples = list(rounds("t", NOON, NOON + 600))
    bare = dataclasses.replace(samples[5].vllm, cache_config={})  # a page that lost cache_config_info
    restarted = dataclasses.replace(samples[6].vllm, process_start_time_s=samples[6].vllm.process_start_time_s + 500)
    samples[5], samples[6] = dataclasses.replace(samples[5], vllm=bare), dataclasses.replace(samples[6], vllm=restarted)
    writer.write_rounds(samples[:20])
    # a new writer (a restarted collector) takes the stored epoch up: the same configuration is no change
    Writer(engine).write_rounds(samples[20:])
    kinds = [(e.kind, e.ts - NOON, e.text()) for e in Reader(url).epochs("t")]
    assert kinds == [("first", 0, "first configuration seen"), ("restart", 90, "restart (same configuration)"),
                     ("restart", 105, "restart (same configuration)")]  # fmt: skip
    with Reader(url).engine.connect() as conn:  # the view for SQL, with when each epoch ended
        rows = conn.execute(text("SELECT kind, ts, until_ts, changes FROM config_changes ORDER BY ts")).all()
    assert [(r.kind, r.ts - NOON, r.until_ts and r.until_ts - NOON, json.loads(r.changes)) for r in rows] == [
        ("first", 0, 90, []), ("restart", 90, 105, []), ("restart", 105, None, [])]  # fmt: skip
    engine.dispose()


# --- the real path: the simulator and the collector as processes ---------------------------------------


def _sim(*flags: str) -> tuple[subprocess.Popen[str], dict[str, str]]:
    proc = subprocess.Popen([sys.executable, "-m", "app", "sim", "--speed", "20", "--load", "4", *flags], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    return proc, json.loads(proc.stdout.readline())  # type: ignore[union-attr]


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)


def _kinds(db: str) -> list[str]:
    try:
        return [e.kind for e in Reader(db).epochs("default")]
    except Exception:  # the collector has not made the database yet
        return []


def test_the_collector_stores_a_restart_and_a_new_gpu_memory_utilization(tmp_path):
    db = f"sqlite:///{tmp_path}/s.db"
    sim, urls = _sim("--port", "0")
    port = urls["vllm_metrics"].split(":")[2].split("/")[0]
    collector = subprocess.Popen([sys.executable, "-m", "app", "collect", "--db", db, "--interval", "1s", "--vllm-url",
                                  urls["vllm_metrics"]], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_until(lambda: _kinds(db) == ["first"], "the first configuration")
        sim.send_signal(signal.SIGHUP)  # the simulator restarts vLLM: a new process start, the same settings
        wait_until(lambda: _kinds(db) == ["first", "restart"], "the restart")
        restart = int(Reader(db).epochs("default")[-1].ts)
        wait_until(lambda: Reader(db).window("default", restart + 60, 61).scrapes >= 6, "rounds after the restart")
        _stop(sim)
        sim, _ = _sim("--port", port, "--gpu-memory-utilization", "0.95")
        wait_until(lambda: _kinds(db) == ["first", "restart", "config+restart"], "the new configuration")
        since = int(Reader(db).epochs("default")[-1].ts)
        wait_until(lambda: Reader(db).window("default", since + 60, 61).scrapes >= 6, "rounds after it")
    finally:
        collector.send_signal(signal.SIGTERM)
        collector.wait(timeout=30)
        _stop(sim)
    done = subprocess.run([sys.executable, "-m", "app", "epochs", "default", "--db", db], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "first configuration seen" in lines[0] and "restart (same configuration)" in lines[1]
    changed = next(i for i, line in enumerate(lines) if "config+restart" in line)
    # the simulator's pool is set in bytes (--kv-cache-memory-bytes): num_gpu_blocks stayed, no change
    assert lines[changed].endswith("config+restart gpu_memory_utilization 0.92 → 0.95 (restart)"), lines
    after = lines[changed + 1].strip()
    assert after.startswith("since gpu_memory_utilization 0.92 → 0.95") and "output tok/s" in after, lines
    assert lines[-1].startswith("now: ") and "gpu_memory_utilization=0.95" in lines[-1]
    listed = json.loads(subprocess.run([sys.executable, "-m", "app", "epochs", "default", "--db", db, "--json"], cwd=ROOT,
                                       capture_output=True, text=True, timeout=60).stdout)  # fmt: skip
    assert [e["kind"] for e in listed] == ["first", "restart", "config+restart"]
    assert listed[2]["changes"][0] == ["gpu_memory_utilization", "0.92", "0.95"] and listed[2]["comparison"]


def test_epochs_of_an_unknown_target_is_one_line(tmp_path):
    url = f"sqlite:///{tmp_path}/e.db"
    two_configs(url, hours=0.1)
    done = subprocess.run([sys.executable, "-m", "app", "epochs", "nope", "--db", url], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and done.stderr.strip() == (
        "ERROR: no target 'nope' in the database. `python -m app status --all` lists them")


# --- the marks, in Chromium ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def overview_url():
    from tests.browser import streamlit_server

    folder = Path(tempfile.mkdtemp(prefix="sweetspot-epochs-"))
    url = f"sqlite:///{folder}/e.db"
    now = time.time()
    change = now - 1800
    engine = open_engine(url)
    writer = Writer(engine)
    writer.write_rounds(rounds("t", now - 3600, change - 15, None, step_s=15.0))
    writer.write_rounds(rounds("t", change, now, WIDER, step_s=15.0))
    rollup(engine, now)
    engine.dispose()
    marked = [e for e in Reader(url).epochs("t") if e.kind != "first"]  # the change, and the daily pattern's restarts
    with streamlit_server(url) as base:
        yield base, len(marked)


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"Debian's chromium is not installed at {CHROMIUM}")
def test_the_epoch_is_marked_on_every_overview_panel(browser, overview_url):
    from tests.browser import SCREENSHOTS, chart_panels, new_page, screenshot, wait_rendered

    base, marked = overview_url
    assert marked >= 1
    page = new_page(browser)
    page.goto(base + "/?target=t&range=1h")
    wait_rendered(page, 1)
    page.get_by_text("Configuration changes and restarts").first.wait_for(timeout=20000)
    body = page.inner_text("body")
    assert "gpu_memory_utilization 0.92 → 0.95" in body and "since gpu_memory_utilization" in body
    screenshot(page, SCREENSHOTS / "overview-epochs.png")
    (chart,) = chart_panels(page)
    for panel in chart["panels"]:  # a dotted rule per epoch drawn on each panel
        rules = [m for m in panel["marks"] if m["type"] == "rule" and m["drawn"] == marked]
        assert rules, panel
    assert page.locator('[data-testid="stException"]').count() == 0
    page.close()


def test_every_time_chart_carries_the_marks_with_what_changed_on_hover():
    from app.ui import charts
    from core.settings import SweetSpotSettings
    from db.results import ConfigEpoch, GpuPoint

    frame = charts.Frame(NOON, NOON + 3600, 60.0)
    epochs = [ConfigEpoch("t", NOON - 60, "first", {}),
              ConfigEpoch("t", NOON + 1800, "config", {}, (("block_size", "16", "32"),))]  # fmt: skip
    overview = charts.overview_chart([], frame, [], frame, SweetSpotSettings(), None, epochs=epochs).to_dict()
    gpu = charts.gpu_chart([GpuPoint(NOON, "GPU-1", *([None] * 5), 300.0, None)], frame, "power_w", "Power", "W", {}, epochs=epochs).to_dict()
    for spec, panels in ((overview, overview["vconcat"]), (gpu, [gpu])):
        for panel in panels:
            (rule,) = [layer for layer in panel["layer"] if layer.get("mark", {}).get("type") == "rule"
                       and layer["mark"].get("color") == charts.EPOCH_COLOR]  # fmt: skip
            values = spec["datasets"][rule["data"]["name"]]
            assert [v["changed"] for v in values] == ["block_size 16 → 32"]  # the first seen is no change
            assert {t["title"] for t in rule["encoding"]["tooltip"]} == {"time", "epoch", "what changed"}
            # under every other layer: drawn over them, a restart's rule crossed out a line's label
            assert panel["layer"][0] is rule or panel["layer"].index(rule) == 0


def test_the_worked_example_of_docs_plan_is_what_the_command_prints(tmp_path):
    url = f"sqlite:///{tmp_path}/e.db"
    two_configs(url)
    done = subprocess.run([sys.executable, "-m", "app", "epochs", "t", "--db", url], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "TZ": "UTC"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = (ROOT / "docs" / "plan.md").read_text()
    for line in done.stdout.splitlines():
        assert line in doc, f"docs/plan.md's epochs example drifted: paste {line!r}"
    (_, second) = Reader(url).epochs("t")
    assert second.changes == (("gpu_memory_utilization", "0.92", "0.95"),)
    assert f"The KV pool stayed at {second.config['num_gpu_blocks']} blocks of 16 tokens" in doc
