"""Grouping and timing of alert e-mails (Alertmanager semantics) on synthetic states, no database."""

from __future__ import annotations

import dataclasses

from app.alerts.model import FIRING, NO_DATA, RESOLVED
from app.loader import load_settings
from app.notify.grouping import plan
from app.notify.outbox import GroupLog
from core.settings import EmailRoute, EmailSettings
from tests.notify_helpers import T0, state

EMAIL = EmailSettings(host="h", from_address="f@x", to=("ops@x",))
never = lambda s, now: False  # noqa: E731


class Log:
    """Applies each plan's group logs, as the outbox does, so a test steps through time."""

    def __init__(self, email: EmailSettings = EMAIL, muted=never) -> None:
        self.logs: dict[str, GroupLog] = {}
        self.email, self.muted = email, muted

    def step(self, now: float, *states):
        result = plan(states, self.logs, self.email, self.muted, now)
        for log in result.groups:
            if log.firing or log.held:
                self.logs[log.group_key] = log
            else:
                self.logs.pop(log.group_key, None)
        return result


def test_group_wait_gathers_alerts_that_fire_together_into_one_mail():
    log = Log()
    a, b = state("preemptions"), state("ttft_p95", since=T0 + 10)
    assert log.step(T0 + 5, a).due == []
    assert log.step(T0 + 29, a, b).due == []  # group_wait (30 s) from the first alert
    (due,) = log.step(T0 + 30, a, b).due
    assert due.kind == "firing" and {s.rule for s in due.firing} == {"preemptions", "ttft_p95"}
    assert due.label == "prod-70b"
    assert log.step(T0 + 60, a, b).due == []  # nothing new: no second mail


def test_target_down_waits_for_no_group_wait_and_takes_a_waiting_group_with_it():
    # while a target is down its other rules read no data: nothing to gather (docs/alerts.md)
    (due,) = Log().step(T0, state("target_down")).due
    assert [s.rule for s in due.firing] == ["target_down"]
    log = Log()
    assert log.step(T0 + 5, state("ttft_p95")).due == []  # waits its group_wait (30 s)
    (due,) = log.step(T0 + 10, state("ttft_p95"), state("target_down", since=T0 + 10)).due
    assert {s.rule for s in due.firing} == {"ttft_p95", "target_down"}


def test_new_alert_waits_for_group_interval_and_repeat_after_repeat_interval():
    log = Log()
    a = state("preemptions")
    assert len(log.step(T0 + 30, a).due) == 1
    b = state("ttft_p95", since=T0 + 40)
    assert log.step(T0 + 100, a, b).due == []
    (due,) = log.step(T0 + 30 + 300, a, b).due  # group_interval after the first mail
    assert {s.rule for s in due.firing} == {"preemptions", "ttft_p95"}
    assert log.step(T0 + 330 + 3600, a, b).due == []
    (repeat,) = log.step(T0 + 330 + 4 * 3600, a, b).due  # repeat_interval
    assert len(repeat.firing) == 2


def test_resolved_notice_once_then_the_group_ends():
    log = Log()
    a = state("preemptions")
    log.step(T0 + 30, a)
    done = dataclasses.replace(a, state=RESOLVED, resolved_at=T0 + 100)
    assert log.step(T0 + 200, done).due == []  # waits for group_interval
    (due,) = log.step(T0 + 330, done).due
    assert due.kind == "resolved" and due.firing == () and [s.rule for s in due.resolved] == ["preemptions"]
    assert log.logs == {}
    assert log.step(T0 + 5000, done).due == []  # once


def test_no_data_never_resolves_a_firing_alert():
    log = Log()
    a = state("preemptions")
    log.step(T0 + 30, a)
    blind = dataclasses.replace(a, state=NO_DATA)
    assert log.step(T0 + 1000, blind).due == []
    assert list(log.logs.values())[0].firing  # still logged as firing


def test_a_refire_is_a_new_incident():
    log = Log()
    log.step(T0 + 30, state("preemptions"))
    again = state("preemptions", since=T0 + 200)
    (due,) = log.step(T0 + 330, again).due
    assert due.kind == "firing"


def test_muted_alert_is_held_back_logged_once_and_sent_when_the_silence_ends():
    silenced = {"on": True}
    log = Log(muted=lambda s, now: silenced["on"])
    a = state("preemptions")
    first = log.step(T0 + 30, a)
    assert first.due == [] and len(first.held) == 1 and not first.held[0].resolved
    assert log.step(T0 + 60, a).held == []  # logged once
    silenced["on"] = False
    (due,) = log.step(T0 + 90, a).due
    assert due.kind == "firing"


def test_resolves_while_silenced_sends_nothing():
    silenced = {"on": False}
    log = Log(muted=lambda s, now: silenced["on"])
    a = state("preemptions")
    log.step(T0 + 30, a)  # notified as firing
    silenced["on"] = True
    done = dataclasses.replace(a, state=RESOLVED, resolved_at=T0 + 100)
    result = log.step(T0 + 400, done)
    assert result.due == [] and result.held[0].resolved
    assert log.logs == {}
    silenced["on"] = False
    assert log.step(T0 + 5000, done).due == []


def test_fired_and_resolved_while_silenced_sends_nothing():
    silenced = {"on": True}
    log = Log(muted=lambda s, now: silenced["on"])
    log.step(T0 + 30, state("preemptions"))
    silenced["on"] = False
    assert log.step(T0 + 400, state("preemptions", status=RESOLVED)).due == []


def test_routes_split_groups_by_recipients():
    email = dataclasses.replace(EMAIL, routes=(EmailRoute(severity="critical", to=("oncall@x",)),))
    log = Log(email)
    crit, warn = state("preemptions"), state("concurrency", severity="warning")
    dues = log.step(T0 + 30, crit, warn).due
    assert sorted((d.recipients, tuple(s.rule for s in d.firing)) for d in dues) == [
        (("oncall@x",), ("preemptions",)), (("ops@x",), ("concurrency",))]


ROUTES = """
[alerts.email]
host = "h"
from_address = "f@x"
to = ["ops@x"]

[[alerts.email.routes]]   # every alert of edge, whatever its severity: the first match wins
target = "edge"
to = ["edge-team@x"]

[[alerts.email.routes]]
severity = "critical"
to = ["oncall@x"]

[[alerts.email.routes]]
target = "prod-70b"
severity = "warning"
to = ["prod-team@x", "ops@x"]
"""


def test_routes_by_target_from_the_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(ROUTES)
    email = load_settings(path, {}).alerts.email
    assert [(r.target, r.severity, r.to) for r in email.routes] == [
        ("edge", "", ("edge-team@x",)), ("", "critical", ("oncall@x",)), ("prod-70b", "warning", ("prod-team@x", "ops@x"))]
    states = [state("preemptions", target="edge"), state("concurrency", target="edge", severity="warning"),
              state("preemptions"), state("concurrency", severity="warning"),
              state("concurrency", target="lab", severity="warning")]  # fmt: skip
    dues = Log(email).step(T0 + 30, *states).due
    mails = sorted((d.label, d.recipients, tuple(sorted(s.rule for s in d.firing))) for d in dues)
    assert mails == [
        ("edge", ("edge-team@x",), ("concurrency", "preemptions")),
        ("lab", ("ops@x",), ("concurrency",)),
        ("prod-70b", ("oncall@x",), ("preemptions",)),
        ("prod-70b", ("prod-team@x", "ops@x"), ("concurrency",)),
    ]


def test_group_by_rule_makes_one_group_per_rule():
    log = Log(dataclasses.replace(EMAIL, group_by=("target", "rule")))
    dues = log.step(T0 + 30, state("preemptions"), state("ttft_p95")).due
    assert sorted(d.label for d in dues) == ["prod-70b preemptions", "prod-70b ttft_p95"]


def test_resolved_notices_off():
    log = Log(dataclasses.replace(EMAIL, send_resolved=False))
    log.step(T0 + 30, state("preemptions"))
    assert log.step(T0 + 1000, state("preemptions", status=RESOLVED)).due == []
    assert log.logs == {}


def test_firing_elsewhere_does_not_touch_an_untouched_group():
    assert plan([state(status=FIRING, target="b")], {}, EMAIL, never, T0).groups == []
