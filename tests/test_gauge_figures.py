"""A gauge is said once, as a row of db/figures.py FIGURES (issue 42 items 3 and 4): the query
views' columns, the collector's /metrics and what the Overview and the alert e-mail read of a panel
are derived from the table, so a new gauge row reaches them all with no other edit."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from app.telemetry import GAUGES
from db.figures import FIGURES
from db.query_views import BY_NAME

# A figure rules may use (``help``) that is a gauge: a column of the views (per model) and a gauge on /metrics.
RULE_GAUGES = [f for f in FIGURES if f.compute in ("gauge_avg", "gauge_max") and f.help]


def test_every_gauge_rules_may_use_is_a_view_column_and_a_metric():
    assert RULE_GAUGES, "FIGURES has gauge rows with help"
    exported = {key for _, key, _ in GAUGES}
    for view in ("minutes", "hours"):
        columns = {c.name for c in BY_NAME[view].columns}
        missing = [f.name for f in RULE_GAUGES if f.rows == "model" and f.name not in columns]
        assert not missing, f"{view} lacks the gauge figures {missing}"
    assert not [f.name for f in RULE_GAUGES if f.name not in exported]


def test_metric_names_are_unique_and_a_named_row_keeps_its_name():
    names = [name for name, _, _ in GAUGES]
    assert len(names) == len(set(names))
    by_key = {key: name for name, key, _ in GAUGES}
    assert by_key["kv_cache_usage_max"] == "sweetspot_kv_cache_usage_ratio"  # a dashboard's name, from the row
    assert by_key["engines_max"] == "sweetspot_engines_max"  # a gauge row without one


# Run in a child: the row is added before anything derives from the table, as an edit of
# db/figures.py would be, and nothing else is edited.
NEW_GAUGE = textwrap.dedent("""
    import sys
    import db.figures as F
    row = F.Figure("swapped_max", "gauge_max", ("requests_swapped",), unit="requests", label="swapped (max)",
                   help="requests swapped to CPU, max", panel="concurrency")
    F.FIGURES = (*F.FIGURES, row)
    F.BY_NAME[row.name] = row

    from prometheus_client import generate_latest

    from app.alerts.evaluator import Derived
    from app.telemetry import Telemetry
    from db import query_views
    from db.engine import open_engine
    from db.query_runner import Limits, run_query

    url = "sqlite:///" + sys.argv[1]
    open_engine(url).dispose()  # the migrations create the views
    for view in ("minutes", "hours"):
        columns = run_query(url, f"SELECT * FROM {view} LIMIT 1", Limits(timeout_s=30), any_role=True).columns
        assert "swapped_max" in columns, (view, columns)
    assert "| `swapped_max` | requests |" in query_views.reference_markdown()
    t = Telemetry(lambda: 0.0)
    t.read_at_scrape({}, {}, lambda: {"demo": Derived({"swapped_max": 3.0}, "outside", {})}, lambda: [])
    exposition = generate_latest(t.registry).decode()
    assert 'sweetspot_swapped_max{target="demo"} 3.0' in exposition, exposition
    from app.ui import charts  # the Overview reads what its panels draw; the e-mail draws the rule's panel

    assert "swapped_max" in charts.overview_fields(coarse=False)
    assert charts.PANELS["concurrency"].lines["swapped_max"] == "swapped (max)"
    print("reached")
""")


def test_a_new_gauge_row_reaches_the_views_metrics_and_both_panels_with_no_other_edit(tmp_path):
    done = subprocess.run([sys.executable, "-c", NEW_GAUGE, str(tmp_path / "t.db")], capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "reached", done.stderr
