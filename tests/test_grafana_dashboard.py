"""deploy/grafana/sweetspot.json: every query parses in Debian's Prometheus and names only series the
collector's own /metrics exposes, and every named derived figure has a panel."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from app.alerts.evaluator import Derived
from app.telemetry import GAUGES, NAMED, Telemetry
from collectors.records import ScrapeRound, SourceResult
from tests.prometheus_server import PrometheusServer

DASHBOARD = Path(__file__).resolve().parent.parent / "deploy" / "grafana" / "sweetspot.json"
# Grafana's variables, as it fills them in before a query leaves for Prometheus
VARIABLES = {"$__rate_interval": "1m", "$target": ".*"}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}


def queries() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    out = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    out += [v["query"]["query"].replace("label_values(", "group by (target) (").replace(", target)", ")")
            for v in board["templating"]["list"] if v["type"] == "query"]  # fmt: skip
    for name, value in VARIABLES.items():
        out = [q.replace(name, value) for q in out]
    return out


def metric_names(promql: str) -> set[str]:
    """The series names a query reads: identifiers that are not functions, keywords or label names."""
    text = re.sub(r'"[^"]*"', "", promql)  # label values
    text = re.sub(r"\{[^}]*\}", "", text)  # matchers
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)  # label lists
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    found = {m.group() for m in re.finditer(r"(?<![\w:.])[A-Za-z_:][\w:]*", text) if not text[m.end():].lstrip().startswith("(")}
    return found - PROMQL_WORDS


def exposed() -> set[str]:
    """Every sample name the collector's /metrics exposes once each kind of event happened."""
    t = Telemetry(lambda: 1000.0)
    names = {key: 1.0 for _, key, _ in GAUGES}
    t.read_at_scrape({"samples": 1}, {("email", "sent"): 1, ("email", "failed"): 1},
                     lambda: {"demo": Derived(names, "outside", {"critical": 1})}, lambda: [("email", 1, 900.0)])  # fmt: skip
    t.ran("collect", 0.1, 0.2)
    t.missed("collect")
    t.observe_round(ScrapeRound("demo", 0.0, None, SourceResult(False, "down", 0.1)))
    t.observe_evaluation(0.3)
    text = generate_latest(t.registry).decode()
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def test_every_query_names_only_our_series_and_every_figure_has_a_panel():
    ours = exposed()
    used = set()
    for q in queries():
        names = metric_names(q)
        assert names and names <= ours, (q, names - ours)
        used |= names
    # the named gauges (a figure row's ``metric``, the thresholds); a gauge figure exported under
    # its own name (sweetspot_<name>) is there for a panel a user adds
    assert NAMED | {"sweetspot_verdict", "sweetspot_alerts_firing"} <= used


def test_every_query_parses_in_prometheus(tmp_path):
    server = PrometheusServer(tmp_path, [])
    try:
        for q in queries():
            body = server.client.get("/api/v1/query", params={"query": q}).json()
            assert body["status"] == "success", (q, body.get("error"))
        bad = server.client.get("/api/v1/query", params={"query": "sum by (target (sweetspot_verdict"}).json()
        assert bad["status"] == "error"  # the check can fail
    finally:
        server.stop()
