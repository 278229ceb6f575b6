"""``[alerts]`` settings: rule changes and additions, per-target thresholds, one-line errors."""

from __future__ import annotations

import dataclasses

import pytest

from app.alerts.rules import DEFAULT_RULES, FILE_SOURCE, TARGET_SOURCE, by_name, rule_set
from app.loader import load_settings
from core.settings import ConfigError, SweetSpotOverrides, SweetSpotSettings, effective_sweetspot

TARGETS = """
[[targets]]
name = "a"
vllm_url = "http://127.0.0.1:1/metrics"
sweetspot = { ttft_p95_slo_s = "5s", concurrency = 24 }

[[targets]]
name = "b"
vllm_url = "http://127.0.0.1:2/metrics"
"""


def load(tmp_path, text: str):
    path = tmp_path / "s.toml"
    path.write_text(TARGETS + text)
    return load_settings(path)


def test_overrides_have_the_same_keys_as_the_thresholds():
    assert [f.name for f in dataclasses.fields(SweetSpotOverrides)] == [f.name for f in dataclasses.fields(SweetSpotSettings)]


def test_a_target_has_its_own_thresholds_and_the_others_the_global_ones(tmp_path):
    settings = load(tmp_path, "[sweetspot]\nkv_warning = 0.8\n")
    a, b = effective_sweetspot(settings, "a"), effective_sweetspot(settings, "b")
    assert (a.ttft_p95_slo_s, a.concurrency, a.kv_warning) == (5.0, 24, 0.8)
    assert (b.ttft_p95_slo_s, b.concurrency, b.kv_warning) == (3.0, None, 0.8)  # no borrowed 16: unknown
    assert effective_sweetspot(settings, "gone") == settings.sweetspot


def test_rules_are_changed_disabled_added_and_overridden_per_target(tmp_path):
    settings = load(tmp_path, """
[alerts]
evaluate_every_s = "30s"

[[alerts.rules]]
name = "ttft_p95"
for_s = "5m"

[[alerts.rules]]
name = "efficiency"
enabled = false

[[alerts.rules]]
name = "itl_slow"
expr = "itl_p95_s"
op = ">"
threshold = 0.5
labels = { team = "serving" }

[[alerts.rules]]
name = "concurrency"
targets = ["b"]
threshold = "concurrency + 4"
""")
    assert settings.alerts.evaluate_every_s == 30.0
    a, b = rule_set(settings, "a"), rule_set(settings, "b")
    assert by_name(a, "ttft_p95").for_s == 300.0 and by_name(a, "ttft_p95").source == FILE_SOURCE
    assert by_name(a, "efficiency") is None
    new = by_name(a, "itl_slow")
    assert (new.threshold, new.severity, dict(new.labels)) == ("0.5", "warning", {"team": "serving"})
    assert by_name(a, "concurrency") == by_name(DEFAULT_RULES, "concurrency")
    assert by_name(b, "concurrency").threshold == "concurrency + 4" and by_name(b, "concurrency").source == TARGET_SOURCE


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('expr = "ttft"', "alerts.rules[0].expr: unknown name 'ttft'"),
        ('op = "=>"', "alerts.rules[0].op: '=>' is not one of"),
        ('severity = "page"', "alerts.rules[0].severity: 'page' is not one of warning, critical"),
        ('threshold = "ttft_p95_slo_s +"', "alerts.rules[0].threshold: 'ttft_p95_slo_s +' is not an expression"),
        ('when = "__import__(1)"', "alerts.rules[0].when: only max, min, abs may be called"),
        ('targets = ["c"]', "alerts.rules[0].targets: no target named 'c'"),
        ('for_s = "soon"', "alerts.rules[0].for_s: not a duration"),
        ("threshold = true", "alerts.rules[0].threshold: expected a number or an expression"),
        ('panel = "ttft_chart"', "alerts.rules[0].panel: 'ttft_chart' is not one of ttft, throughput, mbu, preemptions"),
    ],
)
def test_an_invalid_rule_names_its_key(tmp_path, entry, message):
    with pytest.raises(ConfigError) as exc:
        load(tmp_path, f'[[alerts.rules]]\nname = "ttft_p95"\n{entry}\n')
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_a_new_rule_needs_its_condition(tmp_path):
    with pytest.raises(ConfigError, match=r"alerts.rules\[0\].expr: required for the new rule 'x'"):
        load(tmp_path, '[[alerts.rules]]\nname = "x"\n')


def test_the_lease_outlives_the_evaluation_period(tmp_path):
    with pytest.raises(ConfigError, match="alerts.lease_s"):
        load(tmp_path, '[alerts]\nevaluate_every_s = "1m"\nlease_s = "30s"\n')
