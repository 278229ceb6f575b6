"""The notification log: ``alerts history --notifications`` and the Alerts page's rows."""

from __future__ import annotations

import json
import time

from app.cli import main
from app.notify.notifier import Notifier
from app.ui.notification_log import rows
from db.engine import open_engine
from db.queries import Reader
from tests.notify_helpers import email_settings, state, write_states
from tests.support.ports import refused_port, release
from tests.support.smtp_server import Mailbox, serve


def test_log_shows_retries_sent_and_held_back(tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/log.db"
    engine = open_engine(url)
    now = time.time()
    port = refused_port()
    clock = [now - 600]
    notifier = Notifier(engine, email_settings(port), lambda: clock[0], muted=lambda s, t: s.rule == "ttft_p95")
    write_states(engine, state("preemptions", target="a", since=int(now - 700)), state("ttft_p95", target="b", since=int(now - 700)))
    notifier.run_once()  # SMTP down: a's mail waits, b's alert is held back
    clock[0] += 60
    with serve(Mailbox(), release(port)):
        notifier.run_once()
    engine.dispose()
    assert main(["alerts", "history", "--notifications", "--since", "1h", "--db", url]) == 0
    out = capsys.readouterr().out
    assert "sent       firing   [FIRING:1] a: preemptions" in out and "after 2 attempts: 250 2.0.0 Ok" in out
    assert "suppressed firing   [SILENCED] TTFT P95 on b: held back" in out
    assert main(["alerts", "history", "--notifications", "--json", "--db", url]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {(d["status"], d["attempts"]) for d in data} == {("sent", 2), ("suppressed", 0)}
    page = rows(Reader(url).notifications(now - 3600))
    assert [r["status"] for r in page] == ["held back", "sent"]  # newest first
    assert any("250 2.0.0 Ok" in r["outcome"] for r in page)


def test_alerts_page_shows_email_state_and_the_log(monkeypatch, tmp_path):
    from app.notify import outbox
    from tests import ui_db
    from tests.test_ui_app import ALERTS, open_app
    from tests.test_ui_pages import texts

    url = ui_db.fill(tmp_path / "ui.db", time.time(), hours=0.25)
    engine = open_engine(url)
    with engine.begin() as conn:
        outbox.record(conn, [outbox.Outgoing("target=edge to ops@x", "firing", ("ops@x",), "[FIRING:1] edge: target down",
                                             "text", "<p>html</p>")], (), int(time.time()))  # fmt: skip
    engine.dispose()
    monkeypatch.delenv("SWEETSPOT_SMTP_HOST", raising=False)
    at = open_app(monkeypatch, url)
    at.switch_page(ALERTS).run()
    assert not at.exception, at.exception
    assert "e-mail off: alerts are evaluated and stored but not sent" in texts(at)
    (table,) = [d for d in at.dataframe if "subject" in d.value.columns]
    assert list(table.value["subject"]) == ["[FIRING:1] edge: target down"] and list(table.value["status"]) == ["queued"]
