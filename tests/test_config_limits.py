"""Hostile and careless settings files (issue 21): each is refused when the settings load, with one
line naming the setting, the bad value and what is allowed; nothing starts, nothing is written."""

from __future__ import annotations

import math
import re
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cli import main
from core.limits import LIMITS, ORDERS, URLS
from tests.test_cli import ROOT, app

TARGET = '[[targets]]\nname = "prod"\nvllm_url = "http://127.0.0.1:1/metrics"\n'

HOSTILE = [
    ("interval_s = nan\n", "interval_s: nan is not a finite duration"),
    ("interval_s = inf\n", "interval_s: inf is not a finite duration"),
    ("interval_s = 1e308\n", "interval_s: 1e+308 is out of range"),
    ('interval_s = "2d"\n', "interval_s: 2d is out of range; it must be ≥ 0.5s and ≤ 1d"),
    ("interval_s = 1e-9\n", "interval_s: 1e-09s is out of range; it must be ≥ 0.5s"),
    ('interval_s = "5s"\nscrape_timeout_s = "5s"\n', "scrape_timeout_s: 5s must be < interval_s (5s)"),
    ('[[targets]]\nname = "p"\nvllm_url = " http://127.0.0.1:1/metrics"\n', "targets[0].vllm_url: ' http://127.0.0.1:1/metrics' holds a space"),
    ('[alerts.webhook]\nurl = "\thttps://hooks.example.test/x"\n', "alerts.webhook.url: '\\thttps://hooks.example.test/x' holds a space"),
    (TARGET + 'http = { proxy = "http://proxy:3128\\n" }\n', "targets[0].http.proxy: 'http://proxy:3128\\n' holds a space"),
    ("[ui]\nport = 70000\n", "ui.port: 70000 is out of range; it must be ≥ 1 and ≤ 65535"),
    ('scrape_timeout_s = "10s"\n', "scrape_timeout_s: 10s must be < interval_s (5s)"),
    (TARGET + "ceiling = { bandwidth_gbps = -900 }\n", "targets[0].ceiling.bandwidth_gbps: -900 is out of range"),
    (TARGET + "ceiling = { weight_gb = nan }\n", "targets[0].ceiling.weight_gb: nan is not a finite number"),
    (TARGET + "ceiling = { tensor_parallel = 0 }\n", "targets[0].ceiling.tensor_parallel: 0 is out of range"),
    ("[sweetspot]\nkv_critical = -1\n", "sweetspot.kv_critical: -1 is out of range; it must be > 0 and ≤ 1"),
    ("[sweetspot]\nkv_warning = 1.5\n", "sweetspot.kv_warning: 1.5 is out of range"),
    ("[sweetspot]\nmin_mbu = -0.1\n", "sweetspot.min_mbu: -0.1 is out of range"),
    (TARGET + "sweetspot = { kv_warning = 0.99 }\n", "targets[0].sweetspot.kv_warning: 0.99 must be ≤ the target's kv_critical"),
    ('[[targets]]\nname = "  "\nvllm_url = "http://127.0.0.1:1/metrics"\n', "targets[0].name: '  ' is empty"),
    (TARGET + TARGET, "targets[1].name: 'prod' is used twice"),
    ("raw_retention_s = 0\n", "raw_retention_s: 0s is out of range; it must be ≥ 1m"),
    ('raw_retention_s = "100d"\n', "raw_retention_s: 100d must be < rollup_retention_s (90d)"),
    ('hourly_retention_s = "30d"\n', "rollup_retention_s: 90d must be < hourly_retention_s (30d)"),
    (TARGET + 'http = { proxy = "notaurl" }\n', "targets[0].http.proxy: 'notaurl' is not an http://, https:// or socks5:// URL"),
    (TARGET + 'gpu = { source = "dcgm", url = "http://h:1/m", http = { proxy = "ftp://p:21" } }\n',
     "targets[0].gpu.http.proxy: 'ftp://p:21' is not an http://"),
    ('[[targets]]\nname = "p"\nvllm_url = "http://127.0.0.1:99999/metrics"\n', "targets[0].vllm_url: 'http://127.0.0.1:99999/metrics' is not a URL"),
    ('[[prometheus]]\nurl = "prometheus:9090"\n', "prometheus[0].url: 'prometheus:9090' is not an http://"),
    ('[alerts.email]\ndashboard_url = "dashboard"\n', "alerts.email.dashboard_url: 'dashboard' is not an http://"),
    ('db_url = "mysql://db/x"\n', "db_url: 'mysql://db/x' is not a database URL"),
    ('[alerts]\nevaluate_every_s = "1m"\nlease_s = "30s"\n', "alerts.evaluate_every_s: 1m must be < alerts.lease_s (30s)"),
    ("intervl_s = 5\n", "unknown setting intervl_s; did you mean interval_s?"),
    (TARGET + 'ceiling = { wieght_gb = 40 }\n', "unknown setting targets[0].ceiling.wieght_gb; did you mean weight_gb?"),
    ('[[alerts.rules]]\nname = "not_serving"\nfro = "3m"\n', "unknown setting alerts.rules[0].fro; did you mean for?"),
    ('[[alerts.rules]]\nname = "not_serving"\nfor = "3m"\nfor_s = "2m"\n', "alerts.rules[0].for: alerts.rules[0].for_s is given too"),
    ("[sweetspot]\nmin_efficiency = 0.6\n", "sweetspot.min_efficiency: no longer read: it judged output tok/s against"
     " the ceiling, a bound on decode steps/s; no default rule has an efficiency floor now"),
    (TARGET + "sweetspot = { min_efficiency = 0.5 }\n", "targets[0].sweetspot.min_efficiency: no longer read"),
    # a sweet spot that cannot be one (issue 28): 0, negative, NaN, above the engine's --max-num-seqs, twice
    (TARGET + "sweet_spot = 0\n", "targets[0].sweet_spot: 0 is out of range; it must be ≥ 1"),
    (TARGET + "sweet_spot = -4\n", "targets[0].sweet_spot: -4 is out of range; it must be ≥ 1"),
    (TARGET + "sweet_spot = nan\n", "targets[0].sweet_spot: expected int, got nan"),
    (TARGET + "sweet_spot = 12.5\n", "targets[0].sweet_spot: expected int, got 12.5"),
    ("[sweetspot]\nconcurrency = 0\n", "sweetspot.concurrency: 0 is out of range; it must be ≥ 1"),
    (TARGET + "sweetspot = { concurrency = -1 }\n", "targets[0].sweetspot.concurrency: -1 is out of range"),
    (TARGET + "sweet_spot = 48\nmax_num_seqs = 32\n", "targets[0].sweet_spot: 48 is above targets[0].max_num_seqs (32)"),
    (TARGET + "sweetspot = { concurrency = 64 }\nmax_num_seqs = 32\n",
     "targets[0].sweetspot.concurrency: 64 is above targets[0].max_num_seqs (32)"),
    ("[sweetspot]\nconcurrency = 40\n" + TARGET + "max_num_seqs = 32\n",
     "sweetspot.concurrency: 40 is above targets[0].max_num_seqs (32)"),
    (TARGET + "sweet_spot = 8\nsweetspot = { concurrency = 8 }\n",
     "targets[0].sweet_spot: targets[0].sweetspot.concurrency is given too; keep one of the two"),
    (TARGET + "max_num_seqs = 0\n", "targets[0].max_num_seqs: 0 is out of range"),
]


@pytest.mark.parametrize(("text", "line"), HOSTILE)
def test_config_refuses_the_file_in_one_line(tmp_path, capsys, text, line):
    path = tmp_path / "sweetspot.toml"
    path.write_text(text)
    assert main(["--config", str(path), "config"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"ERROR: {line}"), err
    assert err.count("\n") == 1 and out == ""


@pytest.mark.parametrize(("text", "line"), [HOSTILE[0], HOSTILE[10], HOSTILE[23], HOSTILE[20], HOSTILE[4], HOSTILE[6]])
def test_collect_once_refuses_it_before_anything_starts(tmp_path, text, line):
    path = tmp_path / "sweetspot.toml"
    path.write_text(text if "targets" in text else text + TARGET)
    db = tmp_path / "s.db"
    done = app("--config", str(path), "collect", "--once", "--db", f"sqlite:///{db}")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"ERROR: {line}") and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr and not db.exists()


def test_collect_interval_flag_is_judged_too(tmp_path):
    done = app("collect", "--once", "--vllm-url", "http://127.0.0.1:1/metrics", "--interval", "0s",
               "--db", f"sqlite:///{tmp_path}/s.db")
    assert done.returncode == 2 and done.stderr.startswith("ERROR: --interval: '0s' is out of range; it must be ≥ 0.5s")


def test_prometheus_names_for_and_keep_firing_for_are_accepted(tmp_path):
    from app.loader import load_settings

    path = tmp_path / "sweetspot.toml"
    path.write_text('[[alerts.rules]]\nname = "not_serving"\nfor = "3m"\nkeep_firing_for = "5m"\n')
    (rule,) = load_settings(path, {}).alerts.rules
    assert (rule.for_s, rule.keep_firing_for_s) == (180.0, 300.0)


def test_a_short_interval_caps_the_default_scrape_timeout(tmp_path):
    from app.loader import load_settings

    path = tmp_path / "sweetspot.toml"
    path.write_text('interval_s = "1s"\n')
    assert load_settings(path, {}).scrape_timeout_s == 0.8  # strictly within the interval: the round is stored after it


def test_every_limit_is_documented():
    doc = (ROOT / "docs" / "configuration.md").read_text()
    for key, limit in LIMITS.items():
        assert f"| `{key}` | {limit.text()} |" in doc, f"limit of {key} is missing from docs/configuration.md"
    for order in ORDERS:
        assert f"`{order.first}` {'≤' if order.equal else '<'} `{order.second}`" in doc
    for key in URLS:
        assert f"`{key}`" in doc


URL_KEYS = {
    "targets[0].vllm_url": lambda u: f'[[targets]]\nname = "p"\nvllm_url = "{u}"\n',
    "alerts.webhook.url": lambda u: f'[alerts.webhook]\nurl = "{u}"\n',
    "alerts.alertmanager.url": lambda u: f'[alerts.alertmanager]\nurl = "{u}"\n',
    "prometheus[0].url": lambda u: f'[[prometheus]]\nurl = "{u}"\n',
    "targets[0].http.proxy": lambda u: TARGET + f'http = {{ proxy = "{u}" }}\n',
    "alerts.email.dashboard_url": lambda u: f'[alerts.email]\ndashboard_url = "{u}"\n',
}


@given(key=st.sampled_from(sorted(URL_KEYS)), at=st.integers(0, 30),
       char=st.sampled_from([" ", "\\t", "\\n", "\\r", "\\u000b", "\\u000c", "\\u0000", "\\u007f", "\\u0085", "\\u00a0", "\\u2028", "\\u3000"]))
@settings(max_examples=60, deadline=None)
def test_a_url_holding_whitespace_or_a_control_character_anywhere_is_refused_naming_it(key, at, char):
    """urlsplit strips or drops these; the URL checked must be the one used."""
    from app.loader import load_settings
    from core.settings import ConfigError

    url = "http://host.example.test:9090/path"
    url = url[: at % (len(url) + 1)] + char + url[at % (len(url) + 1):]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.toml"
        path.write_text(URL_KEYS[key](url))
        with pytest.raises(ConfigError, match=re.escape(key) + ": .*holds a space, tab, line break or control character"):
            load_settings(path, {})


def test_deeply_nested_toml_is_one_line_in_every_command(tmp_path):
    path = tmp_path / "deep.toml"
    path.write_text("x = " + "[" * 50_000 + "]" * 50_000 + "\n")
    for command in (["config"], ["status"], ["alerts", "list"]):
        done = app("--config", str(path), *command)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith(f"ERROR: {path}: nested too deeply") and done.stderr.count("\n") == 1


def test_settings_validation_is_linear_in_targets(tmp_path):
    """20,000 targets took 12 s (each name counted through the list). CPU seconds of 4n against n: a
    linear check costs about 4 ×, a quadratic one 16 ×."""
    from app.loader import load_settings

    def cost(n: int) -> float:
        path = tmp_path / f"t{n}.toml"
        path.write_text("".join(f'[[targets]]\nname = "t{i}"\nvllm_url = "http://10.0.{i // 250}.{i % 250}:8000/metrics"\n'
                                for i in range(n)))  # fmt: skip
        best = math.inf
        for _ in range(2):
            start = time.process_time()
            assert len(load_settings(path, {}).targets) == n
            best = min(best, time.process_time() - start)
        return best

    small, large = cost(1500), cost(6000)
    assert large / small < 8, (small, large)
