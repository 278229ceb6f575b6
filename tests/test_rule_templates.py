"""A rule's label, detail and recommendation are templates ({window}, {concurrency}): a stray brace
passed `config` and then failed the whole alerts job, `status` and `rules export`. Refused at load
naming the key; and a text that reaches evaluation anyway costs nothing but itself."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from app.alerts import store
from app.alerts.evaluator import Evaluator
from app.alerts.model import FIRING
from app.alerts.promql import Options, export
from app.alerts.rules import TEMPLATE_FIELDS, _Fields, fill, template_problem
from core.settings import AlertsSettings, RuleSettings, Settings, TargetSettings
from db.engine import open_engine
from db.writer import Writer
from tests.store_helpers import vllm_round
from tests.test_cli import app

T0 = 1_800_000_000
BAD = ["{", "}", "queue {", "} done", "{0}", "{}", "{window.x}", "{window:d}", "{window!z}", "{{{", "a {b"]
braces = st.text(alphabet=st.sampled_from(list("{}ab0.:![]! w")), max_size=12)


@given(text=braces)
@hsettings(max_examples=300, deadline=None)
def test_fill_never_raises_and_the_loaders_check_agrees_with_it(text):
    fields = _Fields({"concurrency": "24"}, 300.0)  # as evaluation fills them
    filled = fill(text, fields)
    if template_problem(text):
        assert filled == text  # shown as written
    else:  # what the loader accepts, evaluation fills
        assert filled == string.Formatter().vformat(text, (), fields)


@pytest.mark.parametrize("field", TEMPLATE_FIELDS)
@pytest.mark.parametrize("text", BAD[:6])
def test_config_refuses_a_stray_brace_naming_the_key(tmp_path, field, text):
    path = tmp_path / "s.toml"
    path.write_text(f'[[alerts.rules]]\nname = "preemptions"\n{field} = "{text}"\n')
    done = app("--config", str(path), "config")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"ERROR: alerts.rules[0].{field}: ") and "{{ and }}" in done.stderr


def test_doubled_braces_and_fields_are_accepted(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('[[alerts.rules]]\nname = "preemptions"\nlabel = "preemptions {{x}} over {window}"\n')
    done = app("--config", str(path), "config")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("text", BAD)
def test_a_bad_text_that_reaches_evaluation_costs_only_its_own_words(tmp_path, text):
    """Settings built past the loader (as an older file read by a newer build could be): every rule
    still evaluates, the bad one fires with its text as written, export and status render."""
    db_url = f"sqlite:///{tmp_path}/r.db"
    engine = open_engine(db_url)
    writer = Writer(engine)
    target = TargetSettings(name="t", vllm_url="http://127.0.0.1:1/metrics")
    writer.register_target(target)
    for ts in range(T0, T0 + 120, 5):
        writer.write_round(vllm_round(ts, gen=float(ts - T0) * 100, running=4.0,
                                      preemptions=0.0 if ts < T0 + 90 else float((ts - T0 - 90) // 5 + 1)))
    writer.close()
    rules = (RuleSettings(name="preemptions", label=text, detail=text, recommendation=text),)
    cfg = Settings(db_url=db_url, targets=(target,), alerts=AlertsSettings(rules=rules))
    Evaluator(engine, cfg, clock=lambda: T0 + 120).evaluate_once()
    states = store.load_states(engine)
    fired = states[("preemptions", "t", "")]
    assert fired.state == FIRING and fired.summary.startswith(text) and fired.recommendation == text
    assert len({rule for rule, _, _ in states}) > 3  # the other rules were evaluated too
    assert "alert: " in export(cfg, Options()).replace("- alert:", "alert:")
    engine.dispose()


def test_status_rules_export_and_the_alerts_commands_say_one_line(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(f'db_url = "sqlite:///{tmp_path}/s.db"\n[[alerts.rules]]\nname = "preemptions"\ndetail = "x {{ y"\n')
    for command in (["status"], ["rules", "export"], ["alerts", "list"]):
        done = app("--config", str(path), *command)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith("ERROR: alerts.rules[0].detail: ") and done.stderr.count("\n") == 1
