"""The outbox against a real SMTP server (aiosmtpd on 127.0.0.1) and a real database."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import select

from app.alerts import lease
from app.alerts.model import RESOLVED
from app.collection import CollectionService
from app.notify.notifier import Notifier
from core.settings import MuteWindowSettings
from db import schema
from db.engine import open_engine
from tests.notify_helpers import T0, email_settings, state, write_states
from tests.support.ports import refused_port, release
from tests.support.smtp_server import Mailbox, serve


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def engine(db_url):
    engine = open_engine(db_url)
    yield engine
    engine.dispose()


def rows(engine, table):
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(select(table).order_by(table.c.id)).mappings()]


def test_one_grouped_mail_with_text_html_and_link(engine):
    mailbox, clock = Mailbox(), Clock(T0 + 30)
    with serve(mailbox) as port:
        notifier = Notifier(engine, email_settings(port), clock)
        write_states(engine, state("preemptions"), state("ttft_p95", threshold=3.0, value=4.8,
                                                         summary="TTFT P95 over 5m 4.8 s > 3 s"))  # fmt: skip
        assert notifier.run_once() == "1 queued, 1 sent, 0 failed"
        clock.now += 60
        assert notifier.run_once() == "0 queued, 0 sent, 0 failed"
    (msg,) = mailbox.messages
    assert msg["Subject"] == "[FIRING:2] prod-70b: preemptions, TTFT P95"
    text = msg.get_body(("plain",)).get_content()
    assert "lower --max-num-seqs" in text and "TTFT P95 over 5m 4.8 s > 3 s" in text
    assert "http://dash.example.test:8501/?target=prod-70b&range=custom&start=" in text
    assert "<a href=" in msg.get_body(("html",)).get_content()
    (row,) = rows(engine, schema.notifications)
    assert row["status"] == "sent" and row["answer"] == "250 2.0.0 Ok: queued as test" and row["attempts"] == 1


def test_smtp_down_then_up_delivers_the_queued_mail_with_its_errors_kept(engine):
    mailbox, clock, port = Mailbox(), Clock(T0 + 30), refused_port()
    notifier = Notifier(engine, email_settings(port), clock)
    write_states(engine, state("preemptions"))
    assert notifier.run_once() == "1 queued, 0 sent, 1 failed"  # nothing listens
    for _ in range(4):  # ten minutes of outage, retried with backoff (10 s, 20 s, 40 s, ...)
        clock.now += 150
        notifier.run_once()
    (row,) = rows(engine, schema.notifications)
    assert row["status"] == "queued" and row["attempts"] == 5 and "connection refused" in row["last_error"]
    assert "SWEETSPOT_SMTP_HOST" in row["last_error"]
    with serve(mailbox, release(port)):
        clock.now += 300
        assert notifier.run_once() == "0 queued, 1 sent, 0 failed"
    assert mailbox.subjects() == ["[FIRING:1] prod-70b: preemptions"]
    attempts = rows(engine, schema.notification_attempts)
    assert [a["ok"] for a in attempts] == [0, 0, 0, 0, 0, 1]
    waits = [b["at"] - a["at"] for a, b in zip(attempts, attempts[1:], strict=False)]
    assert all(w >= 10 for w in waits)


def test_retries_wait_twice_as_long_each_time_up_to_retry_max_s(engine):
    clock = Clock(T0 + 30)
    notifier = Notifier(engine, email_settings(refused_port(), retry_initial_s=10.0, retry_max_s=100.0), clock)
    write_states(engine, state("preemptions"))
    while clock.now < T0 + 30 + 500:  # nothing listens; the notifier runs every second
        notifier.run_once()
        clock.now += 1
    attempts = rows(engine, schema.notification_attempts)
    waits = [b["at"] - a["at"] for a, b in zip(attempts, attempts[1:], strict=False)]
    assert waits == [10, 20, 40, 80, 100, 100, 100]
    assert all(a["ok"] == 0 and "connection refused" in a["answer"] for a in attempts)  # each error kept
    (row,) = rows(engine, schema.notifications)
    assert (row["status"], row["attempts"], row["due_at"]) == ("queued", 8, attempts[-1]["at"] + 100)


def test_gives_up_after_give_up_after_s(engine):
    clock = Clock(T0 + 30)
    settings = email_settings(refused_port(), give_up_after_s=60.0)
    notifier = Notifier(engine, settings, clock)
    write_states(engine, state("preemptions"))
    notifier.run_once()
    clock.now += 100
    notifier.run_once()
    (row,) = rows(engine, schema.notifications)
    assert row["status"] == "failed" and row["attempts"] == 2


def test_resolved_notice_arrives_once(engine):
    mailbox, clock = Mailbox(), Clock(T0 + 30)
    with serve(mailbox) as port:
        notifier = Notifier(engine, email_settings(port), clock)
        write_states(engine, state("preemptions"))
        notifier.run_once()
        write_states(engine, state("preemptions", status=RESOLVED, resolved_at=T0 + 100))
        for _ in range(10):
            clock.now += 120
            notifier.run_once()
    assert mailbox.subjects() == ["[FIRING:1] prod-70b: preemptions", "[RESOLVED] prod-70b: preemptions"]
    assert "resolved at" in mailbox.messages[1].get_body(("plain",)).get_content()


def test_silenced_alert_is_logged_as_suppressed_and_sends_nothing(engine):
    mailbox, clock = Mailbox(), Clock(T0 + 30)
    with serve(mailbox) as port:
        notifier = Notifier(engine, email_settings(port), clock, muted=lambda s, now: True)
        write_states(engine, state("preemptions"))
        notifier.run_once()
        write_states(engine, state("preemptions", status=RESOLVED, resolved_at=T0 + 100))
        clock.now += 600
        notifier.run_once()
    assert mailbox.messages == []
    held, resolved = rows(engine, schema.notifications)
    assert (held["status"], held["kind"], resolved["status"], resolved["kind"]) == ("suppressed", "firing", "suppressed", "resolved")
    assert held["subject"] == "[SILENCED] preemptions on prod-70b: held back by a silence or mute window"
    assert resolved["subject"] == "[SILENCED] preemptions on prod-70b: resolved while silenced: nothing is sent"


def test_a_recurring_mute_window_holds_the_mail_back_until_it_ends(engine, db_url):
    # T0 is a Monday, 17:00 in Paris: the window covers it; the same alert is mailed once it ends at 18:00
    window = MuteWindowSettings(name="deploys", weekdays=("mon",), start="17:00", end="18:00", timezone="Europe/Paris",
                                matchers={"target": "prod-70b"})  # fmt: skip
    mailbox, clock = Mailbox(), Clock(T0 + 30)
    with serve(mailbox) as port:
        settings = email_settings(port)
        settings = dataclasses.replace(settings, db_url=db_url, alerts=dataclasses.replace(settings.alerts, mute_windows=(window,)))
        service = CollectionService(settings, clock)  # its notifier, muted as the collector mutes it
        try:
            lease.acquire(service.engine, lease.EVALUATOR, service.evaluator.holder, clock.now, 86400)
            write_states(engine, state("preemptions"))
            while clock.now < T0 + 3600:
                assert service.notify() == "0 queued, 0 sent, 0 failed"
                clock.now += 60
            assert mailbox.messages == []
            assert service.notify() == "1 queued, 1 sent, 0 failed"  # 18:00:30 in Paris: outside the window
        finally:
            service.close()
    assert mailbox.subjects() == ["[FIRING:1] prod-70b: preemptions"]
    held, mailed = rows(engine, schema.notifications)
    assert (held["status"], held["created_at"]) == ("suppressed", T0 + 30)  # logged once, at the start
    assert held["subject"] == "[SILENCED] preemptions on prod-70b: held back by a silence or mute window"
    assert (mailed["status"], mailed["created_at"]) == ("sent", T0 + 3630)


def test_email_off_sends_nothing_and_says_so(engine):
    settings = dataclasses.replace(email_settings(25), alerts=dataclasses.replace(email_settings(25).alerts, email=dataclasses.replace(email_settings(25).alerts.email, host="")))
    assert Notifier(engine, settings).run_once().startswith("e-mail off")
