"""The scenarios' series through Prometheus' own rule tester, against a rule file.

Each scrape of a scenario becomes samples of ``input_series`` (parsed by the reference parser,
``prometheus_client``, with ``instance="demo"`` and ``job="vllm"`` as Prometheus adds them, and
``up`` 0 where the scrape failed), kept to the families the rule file names. One
``promql_expr_test`` per evaluation asks for ``ALERTS{alertstate="firing"}`` expecting nothing, so
promtool's failure report lists every alert firing at every evaluation; :func:`firing_of` reads
that report back into transitions, scored as the product's are (app/scenarios/score.py). Rule
files other than the product's are in :data:`COPIED_RULES` with their provenance.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from app.alerts.model import FIRING, INACTIVE, RESOLVED, Transition
from app.scenarios.library import EPOCH, Scenario
from app.scenarios.runner import Run, samples

INSTANCE = "demo"
TIMEOUT_S = 600

# The alerting rules of vLLM's own example, examples/online_serving/prometheus_grafana/k8s-monitoring/
# prometheusrule.yaml (vllm-project/vllm at commit cf6f12c20b258469cb45d5d0f2fe3edb110aed43), as a team
# would copy them: names, expressions, thresholds and `for` as there. Two changes, both to fit one
# replica: the fleet rule's "fewer than 40 replicas up" reads "fewer than 1", and per-pod labels are
# this instance. The example's preemption rule reads `vllm:num_preemptions` (no `_total`), a name
# vLLM's Prometheus series do not have: copied as written, it can never fire. vllm-project/production-stack
# ships no vLLM alerting rules (observability/kube-prom-stack.yaml at commit 74d734df: kube-prometheus-stack's
# defaults and one commented-out example for another application), so nothing of it is copied.
VLLM_EXAMPLE = """groups:
  - name: vllm-example
    rules:
      - alert: VllmE2ELatencyP99TooHigh
        expr: histogram_quantile(0.99, sum by (le, model_name) (rate(vllm:e2e_request_latency_seconds_bucket[5m]))) > 120
        for: 2m
      - alert: VllmTTFTP99TooHigh
        expr: histogram_quantile(0.99, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 30
        for: 2m
      - alert: VllmITLP99TooHigh
        expr: histogram_quantile(0.99, sum by (le, model_name) (rate(vllm:inter_token_latency_seconds_bucket[5m]))) > 1
        for: 2m
      - alert: VllmSlowRequestsPresent
        expr: increase(vllm:e2e_request_latency_seconds_bucket{le="120.0"}[5m]) < increase(vllm:e2e_request_latency_seconds_count[5m])
        for: 1m
      - alert: VllmKVCacheNearFull
        expr: vllm:kv_cache_usage_perc > 0.95
        for: 5m
      - alert: VllmHighQueueDepth
        expr: vllm:num_requests_waiting > 50
        for: 3m
      - alert: VllmPreemptionSpike
        expr: rate(vllm:num_preemptions[5m]) > 1
        for: 3m
      - alert: VllmReplicaDown
        expr: count(up{job="vllm"} == 1) < 1
        for: 2m
"""
# The rule most teams write first: the clients' SLO on the engine's TTFT histogram.
PLAIN_TTFT = """groups:
  - name: plain-ttft
    rules:
      - alert: TTFTP95AboveSLO
        expr: histogram_quantile(0.95, sum by (instance, le) (rate(vllm:time_to_first_token_seconds_bucket[5m]))) > 3
        for: 5m
"""
COPIED_RULES = {"vllm_example": VLLM_EXAMPLE, "plain_ttft_p95": PLAIN_TTFT}
# Which copied alert names the scenarios' clauses (a copied rule set has its own names for them).
CLAUSE_OF = {
    "VllmTTFTP99TooHigh": "ttft_p95", "TTFTP95AboveSLO": "ttft_p95", "VllmE2ELatencyP99TooHigh": "ttft_p95",
    "VllmSlowRequestsPresent": "ttft_p95", "VllmITLP99TooHigh": "under_delivering",
    "VllmKVCacheNearFull": "kv_cache_critical", "VllmHighQueueDepth": "queue_growing",
    "VllmPreemptionSpike": "preemptions", "VllmReplicaDown": "target_down",
}  # fmt: skip
_GOT = re.compile(r'time: ([0-9hms.]+),\s*\n\s*exp: nil\s*\n\s*got: (.*)')
_ALERTNAME = re.compile(r'alertname="([^"]+)"')
_GO_DURATION = re.compile(r"([0-9.]+)(h|m|s)")


def go_seconds(text: str) -> float:
    """A Go duration as promtool prints an evaluation time (``1h2m30s``), in seconds."""
    return sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in _GO_DURATION.findall(text))


def _labels(labels: dict[str, str]) -> str:
    inner = ",".join(f'{k}={yaml.safe_dump(v, default_style=chr(34)).strip()}' for k, v in sorted(labels.items()))
    return "{" + inner + "}"


def input_series(scenario: Scenario, families: Iterable[str]) -> list[dict[str, str]]:
    """promtool's ``input_series`` of the scenario's scrapes, for the families named (and ``up``): the
    engine's page as job ``vllm``, the gateway's as job ``gateway`` (its queue for queue_growing), both
    of this one target (``instance``)."""
    wanted = set(families)
    by_series: dict[str, list[str]] = {}
    up_key = f'up{_labels({"instance": INSTANCE, "job": "vllm"})}'
    steps = 0
    for i, s in enumerate(samples(scenario)):
        steps = i + 1
        seen: dict[str, str] = {up_key: "1" if s.sample else "0"}
        if s.sample is not None:
            for job, text in (("vllm", s.sample.vllm), ("gateway", s.sample.gateway)):
                for family in text_string_to_metric_families(text):
                    for sample in family.samples:
                        if sample.name in wanted or family.name in wanted:
                            key = sample.name + _labels({**sample.labels, "instance": INSTANCE, "job": job})
                            seen[key] = repr(float(sample.value))
        for key in seen.keys() - by_series.keys():
            by_series[key] = ["_"] * i
        for key, values in by_series.items():
            values.append(seen.get(key, "_"))
    return [{"series": k, "values": " ".join(v[:steps])} for k, v in by_series.items()]


def families_in(rules_text: str) -> set[str]:
    """The metric names a rule file reads (``vllm:…`` names and the gateway's, with and without their suffixes)."""
    names = set(re.findall(r"vllm:[a-zA-Z0-9_:]+|sweetspot_gateway_[a-z_]+", rules_text))
    return names | {re.sub(r"_(bucket|count|sum|total)$", "", n) for n in names}


def run_promtool(scenario: Scenario, rules_text: str, promtool: str | None = None) -> Run:
    """The rule file's alerts over the scenario, as a :class:`Run` without stored verdicts."""
    binary = promtool or shutil.which("promtool")
    if binary is None:
        raise FileNotFoundError("promtool not found: install Debian's prometheus package (it ships /usr/bin/promtool)")
    every = scenario.evaluate_every_s
    ticks = [every * k for k in range(1, int(scenario.duration_s // every) + 1)]
    test = {
        "rule_files": ["rules.yml"], "evaluation_interval": f"{every:g}s",
        "tests": [{"interval": f"{scenario.step_s:g}s", "input_series": input_series(scenario, families_in(rules_text)),
                   "promql_expr_test": [{"expr": 'ALERTS{alertstate="firing"}', "eval_time": f"{t:g}s", "exp_samples": []}
                                        for t in ticks]}],
    }  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="scenario-promtool-") as tmp:
        Path(tmp, "rules.yml").write_text(rules_text, encoding="utf-8")
        Path(tmp, "test.yml").write_text(yaml.safe_dump(test, sort_keys=False, width=1 << 30), encoding="utf-8")
        done = subprocess.run([binary, "test", "rules", "test.yml"], cwd=tmp, capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode not in (0, 1) or ("FAILED" not in done.stdout + done.stderr and done.returncode):
        raise RuntimeError(f"promtool test rules failed: {(done.stderr or done.stdout)[-2000:]}")
    return Run(scenario, EPOCH, tuple(firing_of(done.stdout + done.stderr, ticks)), (), len(ticks))


def firing_of(report: str, ticks: list[float]) -> list[Transition]:
    """Transitions (inactive → firing, firing → resolved) from promtool's failure report, at the
    scenario's clock (``EPOCH`` + the evaluation's offset)."""
    firing: dict[float, set[str]] = {}
    for when, got in _GOT.findall(report):
        firing.setdefault(go_seconds(when), set()).update(_ALERTNAME.findall(got))
    out, before = [], set[str]()
    for t in ticks:
        now = firing.get(t, set())
        at = int(EPOCH + t)
        out += [Transition(CLAUSE_OF.get(n, n), INSTANCE, "", INACTIVE, FIRING, at, "") for n in sorted(now - before)]
        out += [Transition(CLAUSE_OF.get(n, n), INSTANCE, "", FIRING, RESOLVED, at, "") for n in sorted(before - now)]
        before = now
    return out
