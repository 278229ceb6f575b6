"""Bad input at the command line, as a new user meets it (issue 14): non-zero exit, one clear line
naming what to fix (the setting, or the flag that was used), nothing started by mistake."""

from __future__ import annotations

import pytest

from tests.test_cli import app

NO_URL = '[[targets]]\nname = "prod"\n'
BAD_URL = '[[targets]]\nname = "prod"\nvllm_url = "notaurl"\n'
SPACED_URL = '[[targets]]\nname = "prod"\nvllm_url = "not a url"\n'


@pytest.mark.parametrize("text, key", [(NO_URL, "required"), (BAD_URL, "'notaurl' is not an http:// or https:// URL"),
                                       (SPACED_URL, "'not a url' holds a space")])
@pytest.mark.parametrize("command", [("config",), ("run", "--no-ui")])
def test_a_target_without_a_usable_vllm_url_fails_naming_the_key(tmp_path, text, key, command):
    path = tmp_path / "sweetspot.toml"
    path.write_text(text)
    db = tmp_path / "sweetspot.db"
    done = app("--config", str(path), *command, *(("--db", f"sqlite:///{db}") if command[0] == "run" else ()))
    assert done.returncode == 2, done.stdout
    assert done.stderr.startswith(f"ERROR: targets[0].vllm_url: {key}"), done.stderr
    assert "simulator" not in done.stdout and not db.exists()  # no demo started writing into the database


def test_a_gateway_url_that_is_no_url_names_its_key(tmp_path):
    path = tmp_path / "sweetspot.toml"
    path.write_text('[[targets]]\nname = "p"\nvllm_url = "http://127.0.0.1:1/metrics"\n'
                    'gateway = { kind = "prometheus", url = "localhost:4000", metric = "m" }\n')  # fmt: skip
    done = app("--config", str(path), "config")
    assert done.returncode == 2 and done.stderr.startswith("ERROR: targets[0].gateway.url: 'localhost:4000'")


def test_collect_once_against_a_down_target_exits_non_zero_naming_the_flag(tmp_path):
    from tests.support.ports import refused_port

    url = f"http://127.0.0.1:{refused_port()}/metrics"  # it refuses
    done = app("collect", "--once", "--vllm-url", url, "--db", f"sqlite:///{tmp_path}/s.db")
    assert done.returncode == 1
    assert f"ERROR: target default is down: cannot reach {url} (connection refused)" in done.stderr
    # every line, the collector's logged warning included, names the flag the user typed, none the setting
    lines = (done.stdout + done.stderr).splitlines()
    assert [line for line in lines if "targets[" in line] == [], lines
    (warning,) = [line for line in done.stderr.splitlines() if " WARNING " in line]
    assert warning.endswith("Check --vllm-url"), warning


def test_a_url_flag_that_is_no_url_names_the_flag(tmp_path):
    done = app("collect", "--once", "--vllm-url", "notaurl", "--db", f"sqlite:///{tmp_path}/s.db")
    assert done.returncode == 2
    assert done.stderr.startswith("ERROR: --vllm-url: 'notaurl' is not an http:// or https:// URL")


def test_inspect_names_its_argument_not_a_setting():
    from tests.support.ports import refused_port

    done = app("inspect", f"http://127.0.0.1:{refused_port()}/metrics")
    assert done.returncode == 2
    assert "Check the SOURCE given to inspect" in done.stderr and "targets[]" not in done.stderr


def test_status_of_an_unknown_target_exits_non_zero(tmp_path):
    from tests import ui_db

    url = ui_db.empty(tmp_path / "s.db")
    done = app("status", "--target", "nope", "--db", url)
    assert done.returncode == 2
    assert done.stderr.startswith("ERROR: --target: no target named 'nope'"), done.stderr


def test_a_zero_byte_database_file_says_what_it_is_and_how_to_migrate(tmp_path):
    path = tmp_path / "s.db"
    path.touch()
    done = app("status", "--db", f"sqlite:///{path}")
    assert done.returncode == 2
    line = done.stderr.strip()
    assert f"{path} is an empty file (0 bytes, not yet a Sweetspot database)" in line
    assert "python -m app db migrate" in line and len(done.stderr.splitlines()) == 1


TRUNCATED = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="llama"} 3
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="llama"} 4
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="llama"} 9
vllm:time_to_first_token_seconds_sum{engine="0",model_name="llama"} 6.5
"""


def test_inspect_prints_engine_labels_not_a_count_that_reads_like_one(tmp_path):
    path = tmp_path / "page.txt"
    path.write_text(TRUNCATED)
    done = app("inspect", str(path))
    assert done.returncode == 0, done.stderr
    assert 'engines  1: engine="0"' in done.stdout


@pytest.mark.parametrize("cut, missing, effect", [
    ("", "no +Inf bucket, no _count", "quantiles unknown"),
    ('vllm:time_to_first_token_seconds_count{engine="0",model_name="llama"} 10\n', "no +Inf bucket", "its _count stands in"),
])  # fmt: skip
def test_inspect_shows_a_histogram_lacking_inf_or_count_with_a_diagnostic(tmp_path, cut, missing, effect):
    import json

    path = tmp_path / "page.txt"
    path.write_text(TRUNCATED.replace('vllm:num_requests_running{engine="0",model_name="llama"} 3\n', "") + cut)
    done = app("inspect", str(path))
    assert done.returncode == 0, done.stderr
    assert "models   llama" in done.stdout  # the model is not lost with its one histogram
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("WARNING")]
    assert "ttft (vllm:time_to_first_token_seconds) model llama" in line and "le=0.5: 4, le=1.0: 9" in line
    assert f"{missing}: {effect}" in line
    (report,) = [json.loads(app("inspect", str(path), "--json").stdout)]
    assert report["incomplete_histograms"][0]["buckets"] == [["0.5", 4.0], ["1.0", 9.0]]


def test_health_spells_the_rounds_age_as_every_age(tmp_path):
    import re
    import time

    from app.commands.health import collector_health
    from core.settings import Settings
    from db.engine import open_engine
    from db.writer import Writer
    from tests.store_helpers import vllm_round

    settings = Settings(db_url=f"sqlite:///{tmp_path}/h.db", interval_s=5.0)
    writer = Writer(open_engine(settings.db_url))
    last = float(int(time.time()) - 10)  # a whole second: stored exactly, whatever the column keeps
    writer.write_rounds([vllm_round(last, 10.0)])
    writer.close()
    healthy, reason = collector_health(settings, last + 3.41234)
    assert healthy and reason == "the latest round is 3 s old (limit 15s)", reason
    healthy, reason = collector_health(settings, last + 4000.5)
    assert not healthy and reason.startswith("the latest round is 1 h 6 min old (more than 3 × interval_s = 15s)")
    assert not re.search(r"\d\.\d", reason)  # no raw float seconds
