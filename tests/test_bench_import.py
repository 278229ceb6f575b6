"""``bench import``: vLLM's ``vllm bench serve --save-result`` JSON (written for real against the
simulator, tests/data/bench/README.md) and GuideLLM's report, through the CLI as a process into a real
SQLite file; every bad file refused with one line and nothing written; and the imported levels drawn
on the Operating point page in Chromium beside production minutes."""

from __future__ import annotations

import calendar
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select

from db import schema
from tests.browser import CHROMIUM

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "bench"
VLLM_C8, VLLM_C16, GUIDELLM = DATA / "vllm_bench_serve_c8.json", DATA / "vllm_bench_serve_c16.json", DATA / "guidellm_report.json"


def app(*args: str, db: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TZ": "UTC", "SWEETSPOT_DB_URL": db}
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env=env)  # fmt: skip


@pytest.fixture
def store(tmp_path: Path) -> tuple[str, Path]:
    """A config of two targets (so a file that names none needs --target) and its database URL."""
    cfg = tmp_path / "sweetspot.toml"
    cfg.write_text('[[targets]]\nname = "prod"\nvllm_url = "http://127.0.0.1:8000/metrics"\n'
                   '[[targets]]\nname = "other"\nvllm_url = "http://10.0.0.9:8000/metrics"\n')  # fmt: skip
    return f"sqlite:///{tmp_path}/s.db", cfg


def count(db: str, table) -> int:
    engine = create_engine(db)
    with engine.connect() as conn:
        n = int(conn.execute(select(func.count()).select_from(table)).scalar_one())
    engine.dispose()
    return n


def test_a_vllm_bench_result_is_stored_with_its_date_settings_and_figures(store):
    db, cfg = store
    done = app("--config", str(cfg), "bench", "import", str(VLLM_C8), "--target", "prod", db=db)
    assert done.returncode == 0, done.stderr
    source = json.loads(VLLM_C8.read_text())
    assert "vllm bench serve of 2026-12-06 03:01" in done.stdout and "max_concurrency 8: 728 tok/s" in done.stdout
    listed = app("--config", str(cfg), "bench", "list", "--json", db=db)
    (run,) = json.loads(listed.stdout)
    assert run["tool"] == "vllm bench serve" and run["target"] == "prod" and run["model"] == source["model_id"]
    # the file's date is the benchmarking machine's local time (UTC here)
    assert run["run_at"] == calendar.timegm(time.strptime("20261206-030122", "%Y%m%d-%H%M%S"))
    assert run["settings"]["max_concurrency"] == 8 and run["settings"]["backend"] == "vllm"
    (point,) = run["points"]
    assert point["tokens_per_s"] == source["output_throughput"] and point["concurrency"] == 8
    assert point["ttft_p95_s"] == pytest.approx(source["p95_ttft_ms"] / 1000)
    assert point["itl_p95_s"] == pytest.approx(source["p95_itl_ms"] / 1000)
    assert point["requests"] == source["completed"] and point["failed"] == source["failed"] == 0


def test_a_guidellm_report_gives_one_level_per_benchmark_at_its_measured_concurrency(store):
    db, cfg = store
    # the report's target URL (127.0.0.1:8000) is prod's server: no --target needed
    done = app("--config", str(cfg), "bench", "import", str(GUIDELLM), db=db)
    assert done.returncode == 0, done.stderr
    (run,) = json.loads(app("--config", str(cfg), "bench", "list", "--json", db=db).stdout)
    report = json.loads(GUIDELLM.read_text())
    assert run["tool"] == "guidellm" and run["target"] == "prod" and run["settings"]["profile"] == "concurrent"
    assert run["run_at"] == report["benchmarks"][0]["start_time"]
    for point, bench in zip(run["points"], report["benchmarks"], strict=True):
        metrics = bench["metrics"]
        assert point["concurrency"] == metrics["request_concurrency"]["successful"]["mean"]
        assert point["concurrency_source"] == "measured mean"
        assert point["tokens_per_s"] == metrics["output_tokens_per_second"]["successful"]["mean"]
        assert point["ttft_p95_s"] == pytest.approx(metrics["time_to_first_token_ms"]["successful"]["percentiles"]["p95"] / 1000)
        assert point["label"] == f"concurrent {bench['config']['strategy']['streams']} streams"


def _variants(tmp: Path) -> dict[str, tuple[str, str]]:
    """Bad files: (contents, what the one line must say)."""
    vllm = json.loads(VLLM_C8.read_text())
    guide = json.loads(GUIDELLM.read_text())
    no_throughput = {k: v for k, v in vllm.items() if k != "output_throughput"}
    no_date = {k: v for k, v in vllm.items() if k != "date"}
    text_rate = {**vllm, "output_throughput": "fast"}
    no_concurrency = {k: v for k, v in vllm.items() if k not in ("max_concurrency", "mean_e2el_ms")}
    guide_no_tps = json.loads(json.dumps(guide))
    del guide_no_tps["benchmarks"][1]["metrics"]["output_tokens_per_second"]
    return {
        "not-json": ("db_url = 'x'\n", "is not JSON"),
        "nan": (VLLM_C8.read_text().replace('"output_throughput": 728.0497975528666', '"output_throughput": NaN'),
                "holds NaN, which is not a number"),
        "infinity": (json.dumps(vllm).replace("728.0497975528666", "Infinity"), "holds Infinity"),
        "negative": (json.dumps({**vllm, "output_throughput": -3.0}), "`output_throughput` is -3.0, not a finite number ≥ 0"),
        "sweep": (json.dumps({"levels": [], "recommendation": {}}), "is a Sweetspot load sweep"),
        "other-tool": (json.dumps({"experiments": [{"perf_metrics": {}}]}), "looks like genai-perf"),
        "list": ("[1, 2]", "holds a JSON list"),
        "missing-throughput": (json.dumps(no_throughput), "(vllm bench serve): no `output_throughput`"),
        "missing-date": (json.dumps(no_date), "(vllm bench serve): no `date`"),
        "text-number": (json.dumps(text_rate), "`output_throughput` is 'fast', not a number"),
        "no-concurrency": (json.dumps(no_concurrency), "neither max_concurrency nor mean_e2el_ms"),
        "bad-date": (json.dumps({**vllm, "date": "yesterday"}), "date 'yesterday' is not %Y%m%d-%H%M%S"),
        "empty-guidellm": (json.dumps({**guide, "benchmarks": []}), "(GuideLLM report): `benchmarks` is empty"),
        "guidellm-missing": (json.dumps(guide_no_tps), "benchmark 2: no metrics.output_tokens_per_second.successful.mean"),
    }  # fmt: skip


def test_a_bad_or_foreign_file_is_one_line_and_nothing_is_written(store, tmp_path):
    db, cfg = store
    assert app("--config", str(cfg), "bench", "import", str(VLLM_C16), "--target", "prod", db=db).returncode == 0
    before = count(db, schema.bench_runs), count(db, schema.bench_points)
    for name, (text, says) in _variants(tmp_path).items():
        path = tmp_path / f"{name}.json"
        path.write_text(text)
        done = app("--config", str(cfg), "bench", "import", str(path), "--target", "prod", db=db)
        assert done.returncode == 2, (name, done.stdout)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ERROR: ") and says in lines[0], (name, done.stderr)
        assert f"{name}.json" in lines[0] or name == "not-json", (name, lines)
    assert (count(db, schema.bench_runs), count(db, schema.bench_points)) == before


def test_which_target_a_file_measured_is_asked_when_it_cannot_be_told(store, tmp_path):
    db, cfg = store
    done = app("--config", str(cfg), "bench", "import", str(VLLM_C8), db=db)  # no URL in the file, two targets
    assert done.returncode == 2 and "does not say which target it measured (known: other, prod)" in done.stderr
    done = app("--config", str(cfg), "bench", "import", str(VLLM_C8), "--target", "nope", db=db)
    assert done.returncode == 2 and "no target 'nope' (known: other, prod)" in done.stderr
    assert not (tmp_path / "s.db").exists()  # nothing written: not even an empty database
    done = app("--config", str(cfg), "bench", "import", str(tmp_path / "absent.json"), "--target", "prod", db=db)
    assert done.returncode == 2 and "cannot read" in done.stderr and "No such file" in done.stderr


# --- the page, in Chromium -------------------------------------------------------------------------

browser_only = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"Debian's chromium is not installed at {CHROMIUM}")


@pytest.fixture(scope="module")
def page_url():
    from tests import ui_db
    from tests.browser import streamlit_server

    folder = Path(tempfile.mkdtemp(prefix="sweetspot-bench-"))
    from db.engine import open_engine
    from db.sweeps import store_sweep

    now = time.time()
    db = ui_db.fill(folder / "sweetspot.db", now)
    engine = open_engine(db, migrate=False)  # a sweep of demo's server too: its legend beside the benchmarks'
    store_sweep(engine, ui_db.demo_sweep(now - 86400, "http://127.0.0.1:8000/v1", "demo"))
    engine.dispose()
    for path, target in ((VLLM_C8, "demo"), (VLLM_C16, "demo"), (GUIDELLM, "demo"), (VLLM_C8, "edge")):
        done = app("bench", "import", str(path), "--target", target, db=db)
        assert done.returncode == 0, done.stderr
    with streamlit_server(db) as base:
        yield base


@pytest.mark.browser
@browser_only
def test_imported_benchmarks_are_drawn_on_the_operating_point_page(browser, page_url):
    from tests.browser import (
        SCREENSHOTS,
        chart_layout,
        chart_panels,
        layout_defects,
        new_page,
        screenshot,
        wait_rendered,
    )

    page = new_page(browser)
    page.goto(page_url + "/operating_point?target=demo")
    wait_rendered(page, 3)
    page.get_by_text("Squares: imported benchmarks").first.wait_for(timeout=20000)
    body = page.inner_text("body")
    # each with its date, file and settings
    assert "vllm_bench_serve_c8.json; backend=vllm" in body and "max_concurrency=16" in body
    assert "guidellm of" in body and "profile=concurrent" in body and "concurrency from measured mean" in body
    # demo's three imports, not edge's: three runs, four levels, on both charts (tok/s and TTFT P95)
    assert body.count("vllm bench serve of") == 2, body[:3000]
    page.wait_for_timeout(300)  # Vega lays out once more after the first draw
    layout = chart_layout(page)  # at 1440 px, before the screenshot grows the viewport
    screenshot(page, SCREENSHOTS / "operating-point-benchmarks.png")
    # the sweep's and the benchmarks' legend whole, inside the chart (side by side they ran past its
    # right edge: "vllm bench serve 2026-12-0" cut off, issue 39), no label cut short with "…"
    assert layout_defects(layout) == []
    for chart in layout[:2]:
        names = [n for n in chart["legends"] if n.startswith(("vllm bench serve 2026-12-06 ", "guidellm 2026-12-06 "))]
        assert len(names) == 3 and all(len(n) == len("vllm bench serve 2026-12-06 03:01") or n.startswith("guidellm")
                                       for n in names), chart["legends"]  # fmt: skip
    charts = chart_panels(page)
    for chart in charts[:2]:
        marks = [m for panel in chart["panels"] for m in panel["marks"]]
        squares = [m for m in marks if m["type"] == "symbol" and m["drawn"] == 4]
        assert squares, marks
        assert chart["fits"] is True, chart["fits"]  # nothing drawn past the element's box
    assert page.locator('[data-testid="stException"]').count() == 0
    page.close()


def test_the_figures_of_docs_plan_are_the_files():
    doc = (ROOT / "docs" / "plan.md").read_text()
    vllm = json.loads(VLLM_C8.read_text())
    rate, e2e = vllm["request_throughput"], vllm["mean_e2el_ms"] / 1000
    assert f"{rate:.1f} req/s × {e2e:.3f} s = {rate * e2e:.2f}" in doc  # 17.9 req/s × 0.407 s = 7.28
    assert f"{vllm['output_throughput']:.0f} tok/s at 8 concurrent, TTFT P95 {vllm['p95_ttft_ms'] / 1000:.3f} s" in doc
    guide = json.loads(GUIDELLM.read_text())["benchmarks"]
    assert f"at {guide[0]['metrics']['request_concurrency']['successful']['mean']:.2f} concurrent" in doc
