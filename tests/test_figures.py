"""db/figures.py's FIGURES against the result records, the catalogue, and the docs generated from it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from app import reference_doc
from app.alerts import names as rule_names_table
from app.commands.status import ROWS
from app.ui import charts
from collectors.catalogue import BY_KEY, CATALOGUE
from db import figures, pipeline
from db.figures import BY_NAME, FIGURES, SERIES_RECORDS, record_fields
from db.results import SeriesPoint, WindowFigures

ROOT = Path(__file__).resolve().parent.parent
SERIES = record_fields(SeriesPoint) - {"ts"}
WINDOW = record_fields(WindowFigures)


def test_every_figure_the_engine_computes_is_a_series_field_and_back():
    computed = {f.name for f in FIGURES if f.compute != "record"}
    assert computed == SERIES - SERIES_RECORDS
    assert set(pipeline.POINT_KEYS) == SERIES - SERIES_RECORDS
    assert all(BY_NAME[name].compute == "record" for name in SERIES_RECORDS)


def test_every_figure_is_a_field_of_a_record():
    for f in FIGURES:
        assert f.name in SERIES | WINDOW, f"{f.name}: in FIGURES but in no result record (db/results.py)"


def test_every_catalogue_rate_and_quantile_is_a_figure():
    names = {f.name: f for f in FIGURES}
    for spec in CATALOGUE:
        for name in [spec.rate] * bool(spec.rate) + [n for _, n in spec.quantiles]:
            assert names[name].inputs[0] == spec.key


def test_inputs_are_stored_columns():
    for f in FIGURES:
        if f.rows == "model":
            assert all(i in BY_KEY or i == "covered_ms" for i in f.inputs), f.name
            assert (f.compute == "derived") == (f.fn is not None), f.name


def test_rule_names_status_lines_and_hints_follow_the_table():
    assert set(rule_names_table.FIGURE_NAMES) == {f.name for f in FIGURES if f.help}
    assert rule_names_table.FIGURE_NAMES["kv_cache_usage_max"] == "KV-cache usage, max (0–1)"
    assert ROWS[0] == ("up", "target up", "", None) and ("kv_cache_usage_max", "KV-cache usage (max)", "%", 100.0) in ROWS
    assert figures.MISSING_HINTS["engine_read_bytes"] == "vLLM ≥ 0.32 with --enable-mfu-metrics"
    assert figures.MISSING_HINTS["spec_decode_drafts"] == "speculative decoding off"
    assert "covered_ms" not in figures.MISSING_HINTS and set(figures.MISSING_HINTS) <= set(BY_KEY)


def test_status_lines_and_rule_names_are_the_reference_pages_tables():
    page = reference_doc.render()
    assert figures.alert_names_markdown() in page.split("## Names alert rules may use", 1)[1]
    assert figures.status_markdown() in page.split("## status lines", 1)[1]
    for doc, anchor in (("alerts.md", "names-alert-rules-may-use"), ("commands.md", "status-lines")):
        assert f"reference.md#{anchor}" in (ROOT / "docs" / doc).read_text(), doc


def test_a_rows_panel_line_is_drawn_on_that_panel():
    drawn = {f.name: f for f in FIGURES if f.panel}
    for f in drawn.values():
        assert f.panel in charts.PANELS, f"{f.name}: panel {f.panel!r} is not one of app/ui/charts.py PANELS"
        assert charts.PANELS[f.panel].lines[f.name] == (f.line or f.label), f.name
    for name, panel in charts.PANELS.items():
        table = {k for k, v in panel.lines.items() if k in drawn}
        assert table == {f.name for f in drawn.values() if f.panel == name}, name


def test_a_panel_line_of_the_table_reaches_the_panel(monkeypatch):
    """A row with ``panel`` adds its line (legend: ``line``, else its label) with no edit of the charts."""
    row = dataclasses.replace(BY_NAME["tpot_p95_s"], panel="ttft", line="TPOT P95")
    monkeypatch.setattr(charts, "FIGURES", tuple(row if f.name == row.name else f for f in FIGURES))
    assert charts.table_lines("ttft")["tpot_p95_s"] == "TPOT P95"
    assert "tpot_p95_s" not in charts.table_lines("kv_cache")
