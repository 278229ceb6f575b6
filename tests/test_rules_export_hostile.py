"""``rules export`` on hostile names: whatever a target name or a label value holds, the file is YAML a
library wrote (no line of it can be forged), each expression is PromQL promtool accepts and matches
exactly the target it names; a rule or label name a rule cannot have is refused when the settings load."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.alerts.promql import Options, export
from core.settings import AlertsSettings, RuleSettings, Settings, SweetSpotOverrides, TargetSettings
from tests.test_rules_export import run_promtool

ROOT = Path(__file__).resolve().parent.parent
_NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=24).filter(
    lambda n: n.strip() == n and n.strip())
_HOSTILE = st.sampled_from(['a"b', "a\\b", 'x"} or vector(1) #', "a\nb", "a|b.*", "- alert: evil", "a\u2028b", "é\\\""])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(own=st.one_of(_HOSTILE, _NAMES), other=st.one_of(_HOSTILE, _NAMES), value=st.one_of(_HOSTILE, _NAMES))
def test_hostile_names_give_a_file_promtool_accepts_matching_each_target_exactly(tmp_path, own, other, value) -> None:
    if own == other:
        return
    targets = (TargetSettings(name=own, vllm_url="http://a:8000/metrics", sweetspot=SweetSpotOverrides(ttft_p95_slo_s=5.0)),
               TargetSettings(name=other, vllm_url="http://b:8000/metrics"))
    rules = (RuleSettings(name="preemptions", labels={"team": value}),)
    text = export(Settings(targets=targets, alerts=AlertsSettings(rules=rules)), Options())
    (tmp_path / "rules.yml").write_text(text)
    groups = yaml.safe_load(text)["groups"]
    count = sum(len(g["rules"]) for g in groups)
    assert f"SUCCESS: {count} rules found" in run_promtool("check", "rules", str(tmp_path / "rules.yml"))
    alerts = [r for g in groups for r in g["rules"] if "alert" in r]
    assert all(set(r) <= {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"} for r in alerts)
    assert {r["labels"]["team"] for r in alerts if r["alert"] == "preemptions"} == {value}
    exprs = [r["expr"] for r in alerts if r["alert"] == "ttft_p95"]
    assert len(exprs) == 2
    # the PromQL string literals read back (PromQL and JSON share these escapes) as exactly the name
    equal = re.search(r'instance="((?:[^"\\]|\\.)*)"', exprs[1])
    assert equal and json.loads(f'"{equal[1]}"') == own
    regex = re.search(r'instance!~"((?:[^"\\]|\\.)*)"', exprs[0])
    assert regex and re.fullmatch(json.loads(f'"{regex[1]}"'), own, re.S) and not re.fullmatch(json.loads(f'"{regex[1]}"'), other, re.S)


@pytest.mark.parametrize(("entry", "key"), [
    ('name = "x\\n- alert: injected"\nexpr = "preemptions"\nop = ">"\nthreshold = "1"', "alerts.rules[0].name"),
    ('name = " padded"\nexpr = "preemptions"\nop = ">"\nthreshold = "1"', "alerts.rules[0].name"),
    ('name = "preemptions"\nlabels = { "bad-name" = "x" }', "alerts.rules[0].labels"),
    ('name = "preemptions"\nlabels = { "__reserved" = "x" }', "alerts.rules[0].labels"),
])  # fmt: skip
def test_a_name_a_rule_cannot_have_is_refused_by_the_cli_naming_the_key(tmp_path, entry: str, key: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(f"[[alerts.rules]]\n{entry}\n")
    done = subprocess.run([sys.executable, "-m", "app", "--config", str(path), "rules", "export"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and key in done.stderr, done.stderr
    assert "- alert: injected" not in done.stdout
