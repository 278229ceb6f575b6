"""An alert e-mail's title and chart come from what its rule declares (``panel``, ``title``), never
from the rule's name: a custom rule gets the panel it declares, a per-target override its title."""

from __future__ import annotations

import dataclasses

import pytest

from app.alerts.rules import DEFAULT_RULES
from app.loader import load_settings
from app.notify import hooks, images, message
from app.notify.grouping import Due
from app.notify.notifier import Notifier
from app.panel_names import PANEL_NAMES as PANELS
from app.ui import charts
from core.channels import webhook
from db.engine import open_engine
from db.queries import Reader
from db.writer import Writer
from tests.notify_helpers import T0, email_settings, state
from tests.ui_db import simulated_rounds, target_settings

CONFIG = """
[[targets]]
name = "prod-70b"
vllm_url = "http://127.0.0.1:1/metrics"

[[targets]]
name = "other"
vllm_url = "http://127.0.0.1:2/metrics"

[[alerts.rules]]
name = "ttft_p99_guard"
expr = "ttft_p99_s"
op = ">"
threshold = "6"
panel = "kv_cache"
title = "TTFT P99 guard"

[[alerts.rules]]
name = "ttft_p95_loose"
expr = "ttft_p95_s"
op = ">"
threshold = "9"

[[alerts.rules]]
name = "preemptions"
targets = ["prod-70b"]
title = "work destroyed"
"""


@pytest.fixture
def notifier(tmp_path, db_url):
    path = tmp_path / "s.toml"
    path.write_text(CONFIG)
    settings = load_settings(path)
    settings = dataclasses.replace(settings, alerts=dataclasses.replace(
        settings.alerts, email=email_settings(25).alerts.email), db_url=db_url)  # fmt: skip
    engine = open_engine(db_url)
    yield Notifier(engine, settings, lambda: T0)
    engine.dispose()


def test_every_default_rule_declares_a_title_and_a_known_panel():
    assert all(r.title for r in DEFAULT_RULES)
    assert {r.panel for r in DEFAULT_RULES} - {""} <= set(PANELS) <= set(charts.PANELS)


def test_the_subject_uses_the_declared_titles_and_a_target_override(notifier):
    firing = (state("ttft_p99_guard"), state("preemptions"), state("ttft_p95_loose"))
    due = Due("g", "prod-70b", ("ops@x",), firing, ())
    out = message.compose(due, notifier.email, T0, lambda s: None, notifier.rule_of)
    # declared, overridden for this target only, and a rule without a title named by its name
    assert out.subject == "[FIRING:3] prod-70b: TTFT P99 guard, work destroyed, ttft p95 loose"
    other = Due("g", "other", ("ops@x",), (state("preemptions", target="other"),), ())
    assert message.subject(other, notifier.rule_of) == "[FIRING:1] other: preemptions"
    hook = hooks.compose(webhook.CHANNEL, due, "", T0, notifier.rule_of)
    assert "- TTFT P99 guard (critical) on prod-70b" in hook.body_text


def test_a_custom_rule_gets_the_panel_it_declares_and_none_without(notifier):
    writer = Writer(notifier.engine)
    writer.register_target(target_settings("prod-70b"))
    writer.write_rounds(simulated_rounds("prod-70b", T0 - 600, T0, 15.0))
    reader = Reader(engine=notifier.engine)
    guard = notifier.rule_of(state("ttft_p99_guard"))
    assert guard is not None and guard.panel == "kv_cache"
    spec = images._spec(reader, notifier.settings, state("ttft_p99_guard"), guard.panel, T0)
    assert spec is not None and "KV-cache usage" in str(spec)
    # named like the TTFT rule, but it declares no panel: no chart (a name prefix no longer picks one)
    assert images.alert_chart(reader, notifier.settings, state("ttft_p95_loose"), T0) is None
    png = images.alert_chart(reader, notifier.settings, state("ttft_p99_guard"), T0)
    assert png is not None and png.startswith(b"\x89PNG")


def test_a_declared_title_with_control_characters_stays_one_line_in_the_subject():
    # a title comes from the settings file: a CR/LF in it must not start a header of its own
    rule = dataclasses.replace(DEFAULT_RULES[0], title="ttft\r\nBcc: all@example.com\x1b[2J")
    due = Due("g", "prod-70b", ("ops@x",), (state(rule.name),), ())
    subject = message.subject(due, lambda s: rule)
    assert "\r" not in subject and "\n" not in subject and "\x1b" not in subject
    assert "Bcc: all@example.com" in subject  # shown as typed, on the subject's one line


def test_only_a_firing_mail_says_how_to_silence_it(notifier):
    # a RESOLVED mail ended "Silence it: python -m app alerts silence add": nothing is left to silence
    fired = message.compose(Due("g", "prod-70b", ("ops@x",), (state("preemptions"),), ()), notifier.email, T0,
                            lambda s: None, notifier.rule_of)  # fmt: skip
    resolved = message.compose(Due("g", "prod-70b", ("ops@x",), (), (state("preemptions"),)), notifier.email, T0,
                               lambda s: None, notifier.rule_of)  # fmt: skip
    assert "Silence it" in fired.body_text and "Silence it" in fired.body_html
    assert resolved.subject.startswith("[RESOLVED]")
    assert "Silence it" not in resolved.body_text and "Silence it" not in resolved.body_html
    assert resolved.body_text.rstrip().endswith("Sent by Sweetspot.")


@pytest.mark.parametrize("panel", ["ttft", "kv_cache", "concurrency", "throughput"])
def test_the_mail_chart_is_drawn_at_the_width_it_is_shown(panel):
    # drawn 1,050 px wide (its plot 560 + axes + legend, × 1.5) and shown at 560: labels of 6-9 px
    import struct

    from app.ui import charts
    from core.settings import SweetSpotSettings
    from tests.builders import END, point

    points = [point(END - 30 * (120 - i)) for i in range(120)]
    frame = charts.Frame(END - 3600, END, 30.0)
    chart = charts.PANELS[panel].draw(points, frame, charts.Against(SweetSpotSettings(concurrency=16), None, for_alert=True))
    png = images.png(images.sized(chart))
    width = struct.unpack(">II", png[16:24])[0]  # the PNG header's IHDR width
    assert width == pytest.approx(images.WIDTH * images.SCALE, abs=2)
    assert f"width='{images.WIDTH}'" in message._html(state("preemptions"), "x", False, "", "chart1")
