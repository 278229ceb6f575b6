"""``rules export --format prometheus`` checked by Debian's promtool: the file loads, and on a storm
recorded from the simulator Prometheus fires the same alerts as Sweetspot's own evaluator, at about
the same time (within two 15 s evaluation steps)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from app.alerts.evaluator import Evaluator
from app.alerts.promql import Options, alert_names, export
from app.alerts.rules import DEFAULT_RULES
from app.backfill import rounds_from_history
from core.settings import GatewaySettings, Settings, SweetSpotOverrides, SweetSpotSettings, TargetSettings
from db.engine import open_engine
from db.writer import Writer
from simulator.history import generate_history
from simulator.pattern import incidents

STEP_S = 15
TOLERANCE_S = 30  # a probe this close to one of Sweetspot's transitions of the rule is not judged


def promtool() -> str:
    found = shutil.which("promtool")
    if found:
        return found
    import os

    if os.environ.get("CI"):
        pytest.fail("promtool not found although CI is set; .ci/run installs prometheus, which ships it")
    pytest.skip("Debian's prometheus (promtool) is not installed")


def run_promtool(*args: str) -> str:
    done = subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_the_file_passes_promtool_check_in_both_name_forms(tmp_path):
    settings = Settings(sweetspot=SweetSpotSettings(concurrency=16),  # configured: exported as a number
                        targets=(TargetSettings(name="big", vllm_url="http://big:8000/metrics",
                                                sweetspot=SweetSpotOverrides(ttft_p95_slo_s=5.0)),))  # fmt: skip
    for names in ("colon", "underscore"):
        text = export(settings, Options(names=names))
        (tmp_path / f"{names}.yml").write_text(text)
        count = sum(len(g["rules"]) for g in yaml.safe_load(text)["groups"])  # alerting and recording rules
        assert f"SUCCESS: {count} rules found" in run_promtool("check", "rules", str(tmp_path / f"{names}.yml"))
        assert ("vllm_num_preemptions_total" in text) == (names == "underscore")
    # the renamed KV-cache gauge: an `or` over the new and the old name, the new first
    assert "max_over_time(vllm:kv_cache_usage_perc[5m]) or max_over_time(vllm:gpu_cache_usage_perc[5m])" in export(settings, Options())
    text = export(settings, Options())
    exprs = [r["expr"] for g in yaml.safe_load(text)["groups"] for r in g["rules"] if r.get("alert") == "ttft_p95"]
    assert exprs == ['sweetspot:ttft_p95_s:5m{instance!~"big"} > 3', 'sweetspot:ttft_p95_s:5m{instance="big"} > 5']
    # without its curve written in, under_delivering is left out; down, asleep, not serving and the
    # gateway queue have their PromQL (up, vllm:engine_sleep_state, num_requests_waiting, the gateway's gauge)
    assert "#   under_delivering: needs curve_share" in text and "#   target_down" not in text
    # every default rule is exported or named with what it needs; the sweet spot's own rules are exported
    exported, skipped = list(alert_names(text)), set(re.findall(r"^#   (\w+): needs ", text, re.M))
    assert set(exported) | skipped == {r.name for r in DEFAULT_RULES} and not set(exported) & skipped
    assert {"preemptions", "kv_cache_critical", "kv_cache", "concurrency", "requests_failing", "requests_aborted"} <= set(exported)
    assert exported.count("ttft_p95") == 2  # the big target's own threshold, and the others'
    assert {"under_delivering", "ttft_slo_cannot_tell"} == skipped
    assert {"target_down", "sleeping", "not_serving", "queue_growing"} <= set(exported)
    # the own curve written in: under_delivering is exported, expected_at in PromQL (checked against it below)
    with_curve = export(settings, Options(curve=((8.0, 85.0), (16.0, 126.0), (32.0, 145.0))))
    assert "under_delivering" in set(alert_names(with_curve))
    # a sweet spot not configured is each target's own (sweep, learned): no number to export
    text = export(Settings(targets=settings.targets), Options())
    assert "#   concurrency: needs concurrency: not configured" in text and "concurrency" not in set(alert_names(text))


def _storm_span() -> tuple[float, float]:
    day = 20400
    while not (storms := [i for i in incidents(0, day) if i.kind == "storm"]):
        day += 1
    return storms[0].start - 20 * 60, storms[0].start + 35 * 60


def _series(samples) -> dict[str, list[str]]:
    """sample name{labels, instance="demo"} → its value at each step ("_" where absent)."""
    out: dict[str, list[str]] = {}
    for i, sample in enumerate(samples):
        for family in text_string_to_metric_families(sample.vllm):
            for s in family.samples:
                if not s.name.startswith("vllm:") or s.name.endswith("_created"):
                    continue
                labels = {**s.labels, "instance": "demo"}
                key = s.name + "{" + ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(labels.items())) + "}"
                out.setdefault(key, ["_"] * len(samples))[i] = repr(float(s.value))
    return out


def _sweetspot_spells(samples, start: float, end: float, tmp_path: Path) -> dict[str, list[tuple[float, float]]]:
    """Each rule's firing spells in Sweetspot's evaluator (seconds since ``start``), evaluated every step."""
    target = TargetSettings(name="demo", vllm_url="http://demo:8000/metrics",
                            gateway=GatewaySettings(preset="sweetspot-sim", kind="prometheus", url="http://demo:9000/metrics"))  # fmt: skip
    settings = Settings(db_url=f"sqlite:///{tmp_path}/storm.db", targets=(target,))
    engine = open_engine(settings.db_url)
    writer = Writer(engine)
    writer.write_rounds(rounds_from_history(target, iter(samples)))
    evaluator = Evaluator(engine, settings, clock=lambda: start)
    spells: dict[str, list[tuple[float, float]]] = {}
    opened: dict[str, float] = {}
    at = start + STEP_S
    while at <= end:
        for t in evaluator.evaluate_once(at):
            if t.to_state == "firing":
                opened[t.rule] = at - start
            elif t.from_state == "firing" and t.rule in opened:
                spells.setdefault(t.rule, []).append((opened.pop(t.rule), at - start))
        at += STEP_S
    for rule, since in opened.items():
        spells.setdefault(rule, []).append((since, end - start + 1))
    writer.close()
    engine.dispose()
    return spells


def test_prometheus_fires_the_same_alerts_as_the_evaluator_on_a_recorded_storm(tmp_path):
    start, end = _storm_span()
    samples = list(generate_history(start, end, float(STEP_S), seed=0))
    spells = _sweetspot_spells(samples, start, end, tmp_path)
    assert {"preemptions", "kv_cache_critical"} <= set(spells), spells  # the storm is one
    rules_text = export(Settings(), Options())
    (tmp_path / "rules.yml").write_text(rules_text)
    alerts = {r["alert"]: r for g in yaml.safe_load(rules_text)["groups"] for r in g["rules"] if "alert" in r}
    tests, judged = [], {name: 0 for name in alerts}
    for t in range(6 * 60, int(end - start) - 60, 60):
        for name, rule in alerts.items():
            changes = [x for spell in spells.get(name, []) for x in spell]
            if any(abs(t - c) <= TOLERANCE_S for c in changes):
                continue
            firing = any(a <= t < b for a, b in spells.get(name, []))
            judged[name] += firing
            expected = [{"exp_labels": {**rule["labels"], "instance": "demo"}, "exp_annotations": rule["annotations"]}] if firing else []
            tests.append({"eval_time": f"{t}s", "alertname": name, "exp_alerts": expected})
    assert judged["preemptions"] and judged["kv_cache_critical"], judged  # probes inside the spells, not only outside
    series = [{"series": k, "values": " ".join(v)} for k, v in _series(samples).items()]
    spec = {"rule_files": ["rules.yml"], "evaluation_interval": f"{STEP_S}s",
            "tests": [{"interval": f"{STEP_S}s", "input_series": series, "alert_rule_test": tests}]}  # fmt: skip
    (tmp_path / "storm_test.yml").write_text(yaml.safe_dump(spec, width=1 << 20))
    run_promtool("test", "rules", str(tmp_path / "storm_test.yml"))


def test_a_rule_changed_or_disabled_for_one_target_gets_its_own_copy(tmp_path):
    from app.loader import load_settings

    path = tmp_path / "s.toml"
    path.write_text("""
[sweetspot]
concurrency = 16

[[targets]]
name = "batch"
vllm_url = "http://batch:8000/metrics"

[[targets]]
name = "chat"
vllm_url = "http://chat:8000/metrics"

[[alerts.rules]]
name = "kv_cache"
targets = ["batch"]
enabled = false

[[alerts.rules]]
name = "concurrency"
targets = ["batch"]
for_s = "10m"
""")
    text = export(load_settings(path, {}), Options())
    (tmp_path / "rules.yml").write_text(text)
    assert "SUCCESS" in run_promtool("check", "rules", str(tmp_path / "rules.yml"))
    rules = [r for g in yaml.safe_load(text)["groups"] for r in g["rules"] if "alert" in r]
    by_name = {}
    for r in rules:
        by_name.setdefault(r["alert"], []).append((r["expr"], r.get("for")))
    assert by_name["kv_cache"] == [('sweetspot:kv_cache_usage_max:5m{instance!~"batch"} >= 0.9', "1m")]
    assert by_name["concurrency"] == [('sweetspot:running_avg:5m{instance!~"batch"} > 16', "5m"),
                                      ('sweetspot:running_avg:5m{instance="batch"} > 16', "10m")]  # fmt: skip
    assert by_name["preemptions"] == [("sweetspot:preemptions:5m > 0", None)]


def test_a_rule_over_the_slo_attainment_is_left_out_saying_why():
    from core.settings import AlertsSettings, RuleSettings

    rule = RuleSettings(name="ttft_slo", expr="ttft_slo_attainment", op="<", threshold="0.95", severity="warning")
    text = export(Settings(alerts=AlertsSettings(rules=(rule,))), Options())
    assert "#   ttft_slo: needs ttft_slo_attainment: the share within each target's SLO is interpolated" in text
    assert "ttft_slo" not in alert_names(text)


def _running(c: float) -> str:
    return f'r{{c="{c:g}"}}'


def test_the_exported_curve_is_the_products_curve(tmp_path):
    # app/alerts/promql.py curve_form in Prometheus' own evaluator against core/learner.py expected_at
    from app.alerts.promql import curve_form
    from core.learner import expected_at

    curve = ((8.0, 85.0), (16.0, 126.0), (32.0, 145.0))
    running = (2.0, 8.0, 12.0, 20.0, 40.0)
    (tmp_path / "rules.yml").write_text("groups: []\n")
    test = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [{"series": f'r{{instance="demo",c="{c:g}"}}', "values": f"{c:g}"} for c in running],
        "promql_expr_test": [{"expr": f"abs({curve_form(curve, _running(c))} - {expected_at(curve, c)!r}) < bool 1e-9",
                              "eval_time": "0m", "exp_samples": [{"labels": f'{{instance="demo",c="{c:g}"}}', "value": 1}]}
                             for c in running],
    }]}  # fmt: skip
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test))
    done = subprocess.run([promtool(), "test", "rules", "test.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
