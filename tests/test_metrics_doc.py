"""docs/reference.md's catalogue table is generated from the catalogue (every key, its exposed names,
kind, unit, how engines combine, description): a new metric adds no hand-written row."""

from __future__ import annotations

from pathlib import Path

from app import reference_doc
from collectors.catalogue import CATALOGUE, catalogue_markdown

ROOT = Path(__file__).resolve().parent.parent

def test_the_catalogue_table_is_the_reference_pages():
    assert catalogue_markdown() in reference_doc.render().split("## The catalogue", 1)[1]
    assert "reference.md#the-catalogue" in (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")


def test_every_catalogue_key_and_name_is_in_the_table():
    table = catalogue_markdown()
    for spec in CATALOGUE:
        assert f"| `{spec.key}` | {spec.kind} | {spec.unit} | {spec.agg} |" in table
        assert all(f"`{name}`" in table for name in spec.names), spec.key
