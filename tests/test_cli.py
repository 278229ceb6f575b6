"""The entry point: one-line errors with the next step, exit status 2, global options anywhere."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def app(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_malformed_config_is_one_line_naming_the_key(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[[targets]]\nname = "x"\nvllm_url = "http://127.0.0.1:1/metrics"\ngpu = { source = "nvm" }\n')
    for args in (("--config", str(path), "status"), ("status", "--config", str(path))):
        done = app(*args)
        assert done.returncode == 2
        assert done.stderr.strip() == "ERROR: targets[0].gpu.source: 'nvm' is not one of nvml, dcgm, none"


def test_config_command_prints_effective_settings_and_masks_secrets(tmp_path):
    path = tmp_path / "ok.toml"
    path.write_text('interval_s = "10s"\n')
    done = subprocess.run([sys.executable, "-m", "app", "config", "--config", str(path), "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env={"SWEETSPOT_UI_PASSWORD": "s3cret", "PATH": ""})
    assert done.returncode == 0, done.stderr
    assert '"interval_s": 10.0' in done.stdout
    assert "s3cret" not in done.stdout and '"ui_password": "***"' in done.stdout


def test_describe_lists_every_setting():
    done = app("config", "--describe")
    assert done.returncode == 0
    assert "targets[].ceiling.bandwidth_gbps" in done.stdout and "SWEETSPOT_DB_URL" in done.stdout


def test_every_command_has_help():
    for command in ("run", "collect", "inspect", "status", "sim", "sweep", "config", "db", "ui"):
        done = app(command, "--help")
        assert done.returncode == 0 and "usage: python -m app " + command in done.stdout


def test_a_bad_duration_flag_is_one_line_before_anything_starts(tmp_path):
    done = app("run", "--no-ui", "--backfill", "a week", "--db", f"sqlite:///{tmp_path}/x.db")
    assert done.returncode == 2
    assert done.stderr.strip() == "ERROR: not a duration: 'a week' (write it like 90s, 5m, 2h or 7d)"
    assert done.stdout == ""  # the simulator was not started


SECRET_CONFIG = """
db_url = "postgresql://sweetspot:dbpw-1@127.0.0.1:1/sweetspot"

[[targets]]
name = "t"
vllm_url = "http://reader:vllmpw-2@vllm.test:8000/metrics"
http = { bearer_token_env = "CFG_TARGET_TOKEN", headers = { X-Api-Key = "hdr-3" }, proxy = "http://p:proxypw-4@proxy.test:3128" }
gateway = { kind = "prometheus", url = "http://gw:gwpw@5@gw.test/metrics", metric = "q", http = { bearer_token_env = "CFG_GW_TOKEN" } }
gpu = { source = "dcgm", url = "https://gpu:gpupw-6@dcgm.test:9400/metrics" }

[[prometheus]]
url = "http://prom:prompw-7@prometheus.test:9090"
http = { bearer_token_env = "CFG_PROM_TOKEN" }
"""


def test_config_never_prints_a_password_a_token_or_a_header_value(tmp_path):
    path = tmp_path / "secrets.toml"
    path.write_text(SECRET_CONFIG)
    tokens = {"CFG_TARGET_TOKEN": "tok-8", "CFG_GW_TOKEN": "tok-9", "CFG_PROM_TOKEN": "tok-10"}
    env = {**tokens, "SWEETSPOT_SMTP_PASSWORD": "smtppw-11", "PATH": ""}
    outputs = []
    for flags in ((), ("--json",)):
        done = subprocess.run([sys.executable, "-m", "app", "config", "--config", str(path), *flags], cwd=ROOT,
                              capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout + done.stderr)
    for secret in ("dbpw", "vllmpw", "hdr-3", "proxypw", "gwpw", "@5", "gpupw", "prompw", *tokens.values(), "smtppw"):
        assert not [out for out in outputs if secret in out], secret
    text, as_json = outputs
    assert "database postgresql://sweetspot:***@127.0.0.1:1/sweetspot" in text
    target = json.loads(as_json)["targets"][0]
    assert target["vllm_url"] == "http://reader:***@vllm.test:8000/metrics"
    assert target["gateway"]["url"] == "http://gw:***@gw.test/metrics"
    assert target["http"]["bearer_token_env"] == "CFG_TARGET_TOKEN" and target["http"]["bearer_token"] == "***"
    assert target["http"]["headers"] == {"X-Api-Key": "***"}


def test_reading_commands_need_no_scrape_token_only_scraping_does(tmp_path):
    import os

    path = tmp_path / "tok.toml"
    path.write_text('[[targets]]\nname = "t"\nvllm_url = "http://127.0.0.1:1/metrics"\n'
                    'http = { bearer_token_env = "SWEETSPOT_TEST_SCRAPE_TOKEN" }\n')
    db = f"sqlite:///{tmp_path}/s.db"
    env = {k: v for k, v in os.environ.items() if k != "SWEETSPOT_TEST_SCRAPE_TOKEN"}

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "app", "--config", str(path), *args, "--db", db], cwd=ROOT,
                              capture_output=True, text=True, timeout=60, env={**env, **extra})

    refused = run("collect", "--once")
    assert refused.returncode == 2 and refused.stderr == (
        "ERROR: targets[0].http.bearer_token_env: the environment variable SWEETSPOT_TEST_SCRAPE_TOKEN is not set "
        "(export it, or remove bearer_token_env)\n")
    assert run("collect", "--once", SWEETSPOT_TEST_SCRAPE_TOKEN="tok").returncode == 1  # target down, database made
    done = run("status", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["target"] == "t"
