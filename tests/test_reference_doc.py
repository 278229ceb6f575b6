"""docs/reference.md is generated from the tables (the catalogue, the figures table, the query views):
the committed page is what ``make docs`` writes, ``--check`` fails on a page that drifted and names the
command that fixes it, and every link the guides make into it lands on one of its headings."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from app import doc_tables, reference_doc

ROOT = Path(__file__).resolve().parent.parent


def test_the_committed_page_is_the_generated_one():
    assert reference_doc.PATH.read_text(encoding="utf-8") == reference_doc.render(), (
        f"docs/reference.md differs from the tables: run {reference_doc.COMMAND}"
    )


def test_check_fails_on_a_drifted_page_naming_the_command_and_the_writer_fixes_it(tmp_path, monkeypatch, capsys):
    page = tmp_path / "reference.md"
    page.write_text(reference_doc.render().replace("| `ttft_p95_s` |", "| `ttft_p95` |", 1), encoding="utf-8")
    monkeypatch.setattr(reference_doc, "PATH", page)
    assert reference_doc.main(["--check"]) == 1
    assert "make docs" in capsys.readouterr().err
    assert reference_doc.main([]) == 0
    assert page.read_text(encoding="utf-8") == reference_doc.render()
    assert reference_doc.main(["--check"]) == 0


def test_the_module_runs_as_the_makefile_calls_it():
    done = subprocess.run([sys.executable, "-m", "app.reference_doc", "--check"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "$(PY) -m app.reference_doc" in (ROOT / "Makefile").read_text()


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces to ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_into_the_page_lands_on_a_heading():
    page = reference_doc.render()
    anchors = {_anchor(h) for h in re.findall(r"^#+ (.+)$", page, re.M)}
    links = [(doc.name, a) for doc in sorted((ROOT / "docs").glob("*.md"))
             for a in re.findall(r"\(reference\.md#([\w-]+)\)", doc.read_text(encoding="utf-8"))]  # fmt: skip
    assert {doc for doc, _ in links} >= {"metrics.md", "alerts.md", "commands.md", "query.md"}
    assert [link for link in links if link[1] not in anchors] == []


@pytest.mark.parametrize("name", list(doc_tables.BLOCKS))
def test_the_generated_tables_of_the_hand_written_pages_are_current(name):
    page = (doc_tables.DOCS / name).read_text(encoding="utf-8")
    assert page == doc_tables.render(page, name), f"docs/{name}'s generated tables differ: run {reference_doc.COMMAND}"


def test_a_drifted_table_fails_the_check_and_is_rewritten(tmp_path, monkeypatch, capsys):
    for name in doc_tables.BLOCKS:
        (tmp_path / name).write_text((doc_tables.DOCS / name).read_text(encoding="utf-8"), encoding="utf-8")
    page = tmp_path / "configuration.md"
    page.write_text(page.read_text(encoding="utf-8").replace("| `alerts.chat.url` |", "| `alerts.chat.uri` |"), encoding="utf-8")
    monkeypatch.setattr(doc_tables, "DOCS", tmp_path)
    assert reference_doc.main(["--check"]) == 1
    assert "docs/configuration.md differs" in capsys.readouterr().err
    assert reference_doc.main([]) == 0 and reference_doc.main(["--check"]) == 0
    assert "| `alerts.chat.url` |" in page.read_text(encoding="utf-8")


def test_every_posting_channel_limit_and_default_rule_is_in_the_generated_tables():
    from app.alerts.rules import DEFAULT_RULES
    from core.channels import HTTP_CHANNELS
    from core.limits import LIMITS

    assert all(f"| `alerts.{c.name}.url` |" in doc_tables.channels_markdown() for c in HTTP_CHANNELS)
    assert all(f"| `{key}` |" in doc_tables.limits_markdown() for key in LIMITS)
    assert all(f"| `{rule.name}` |" in doc_tables.default_rules_markdown() for rule in DEFAULT_RULES)
