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
