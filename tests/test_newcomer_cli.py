"""The command line as a newcomer meets it: help and docs that say what the commands print."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def app(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_a_failed_query_reads_as_docs_query_md_says(tmp_path):
    from db.engine import open_engine

    db = f"sqlite:///{tmp_path}/q.db"
    open_engine(db).dispose()  # an empty, migrated database
    done = app("query", "--db", db, "SELECT tok_s FROM scrapes")
    assert done.returncode == 2
    line = done.stderr.strip()
    assert line.startswith("ERROR: the query failed: no such column: tok_s")
    doc = (ROOT / "docs" / "query.md").read_text()
    assert "`ERROR: the query failed: no such column: tok_s. Check the SQL against docs/query.md's views`" in " ".join(doc.split())
    assert line == "ERROR: the query failed: no such column: tok_s. Check the SQL against docs/query.md's views"


def test_config_help_says_what_it_prints_without_json(tmp_path):
    help_text = " ".join(app("config", "--help").stdout.split())
    done = app("config")
    assert done.returncode == 0 and len(done.stdout.strip().splitlines()) == 1  # one line, as the help says
    assert "one line" in help_text and "--json prints the effective settings" in help_text
    assert "(--json prints every effective setting)" in done.stdout


def test_docs_promise_no_later_issue():
    assert "later issue" not in (ROOT / "docs" / "ui.md").read_text()


def test_status_prints_gpu_memory_in_gib_as_the_gpus_page(tmp_path):
    # A V100 "32 GB" card: NVML says 34,359,738,368 bytes total; status printed "31.9 GB" used, the page GiB
    from collectors.records import GpuReading, ScrapeRound, SourceResult, VllmScrape
    from core.settings import TargetSettings
    from db.engine import open_engine
    from db.writer import Writer

    db = f"sqlite:///{tmp_path}/g.db"
    writer = Writer(open_engine(db))
    writer.register_target(TargetSettings(name="t", vllm_url="http://127.0.0.1:1/metrics"))
    gpu = GpuReading(uuid="GPU-0", index=0, name="V100", memory_used_bytes=31.9e9, memory_total_bytes=32 * 2**30)
    import time

    now = time.time()
    for ts in (now - 10, now - 5):
        writer.write_round(ScrapeRound("t", ts, VllmScrape({}), SourceResult(True), gpus=(gpu,)))
    writer.close()
    done = app("status", "--db", db, "--window", "1m")
    assert done.returncode == 0, done.stderr
    assert "memory 29.7 GiB / 32 GiB" in done.stdout and " GB," not in done.stdout
