"""docs/metrics.md documents every catalogue row (key and exposed names)."""

from __future__ import annotations

from pathlib import Path

from collectors.catalogue import CATALOGUE

DOC = Path(__file__).resolve().parent.parent / "docs" / "metrics.md"


def catalogue_rows() -> dict[str, str]:
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = line
    return rows


def test_every_catalogue_key_and_name_is_documented():
    rows = catalogue_rows()
    for spec in CATALOGUE:
        assert spec.key in rows, f"catalogue key {spec.key!r} missing from docs/metrics.md"
        for name in spec.names:
            assert f"`{name}`" in rows[spec.key], f"{name} (key {spec.key}) missing from its docs/metrics.md row"
        assert f"| {spec.kind} | {spec.unit} | {spec.agg} |" in rows[spec.key], f"{spec.key}: kind/unit/agg differ"


def test_no_documented_key_outside_the_catalogue():
    assert set(catalogue_rows()) == {spec.key for spec in CATALOGUE}
