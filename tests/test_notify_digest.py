"""The digest on a database filled by the simulator: its figures are the query facade's, its
incidents the alert history's; the CLI prints, writes HTML and mails it; the schedule sends it once."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil

import pytest
from sqlalchemy import delete, func, insert, select

from app.alerts.evaluator import Evaluator
from app.cli import main
from app.formatting import percent
from app.notify import digest
from app.notify.notifier import Notifier, digest_once
from core.settings import AlertsSettings, DigestSettings, Settings
from db import schema, verdicts
from db.engine import open_engine
from db.queries import Reader
from db.verdicts import IN_SWEET_SPOT, NO_DATA, OUTSIDE
from tests import ui_db
from tests.notify_helpers import email_settings, state, write_states
from tests.support.smtp_server import Mailbox, serve

# A fixed instant, not the wall clock's: the simulator's load follows the time of day, and at 10:20 UTC
# its queue grew for eleven minutes, a third incident this test's data does not hold (a CI run).
NOW = 1_796_547_600.0  # 2026-12-06 09:00 UTC
PERIOD = 2 * 3600.0
UNJUDGED = 20  # minutes


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """``demo`` (2 h of the simulator's history) and ``edge`` (1 h, down for its last 10 minutes),
    with one resolved preemption incident and one still firing."""
    url = ui_db.fill(tmp_path_factory.mktemp("digest") / "sweetspot.db", NOW, hours=2)
    engine = open_engine(url)
    # the evaluator's verdicts of every minute but the period's first UNJUDGED ones (the alerts it
    # would store meanwhile are put back as they were: the incidents below are the test's own)
    alerts = (schema.alert_states, schema.alert_transitions)
    with engine.connect() as conn:
        kept = [conn.execute(select(t)).mappings().all() for t in alerts]
    targets = tuple(ui_db.target_settings(n) for n in ("demo", "edge", "sglang"))
    evaluator = Evaluator(engine, Settings(db_url=url, targets=targets))
    for ts in range(int(NOW - PERIOD) + UNJUDGED * 60, int(NOW), 60):
        evaluator.evaluate_once(ts + 30)
    with engine.begin() as conn:
        for table, rows_ in zip(alerts, kept, strict=True):
            conn.execute(delete(table))
            if rows_:
                conn.execute(insert(table), [dict(r) for r in rows_])
    t = schema.alert_transitions
    rows = [("preemptions", "inactive", "firing", NOW - 3000), ("preemptions", "firing", "resolved", NOW - 2400),
            ("ttft_p95", "pending", "firing", NOW - 600)]  # fmt: skip
    with engine.begin() as conn:
        for rule, old, new, at in rows:
            conn.execute(insert(t).values(rule=rule, target="demo", model="", from_state=old, to_state=new, at=int(at),
                                          severity="critical", summary=f"{rule} over 5m broke", labels="{}"))  # fmt: skip
    engine.dispose()
    return url


def test_figures_are_the_facades(filled):
    reader = Reader(filled)
    engine = open_engine(filled)
    report = digest.build(reader, engine, Settings(db_url=filled), NOW - PERIOD, NOW)
    by_name = {d.target: d for d in report.targets}
    assert set(by_name) == {"demo", "edge", "sglang"}  # ui_db: the demo, a down target, an SGLang one
    for name, d in by_name.items():
        whole = reader.window(name, NOW, PERIOD)
        assert (d.ttft_p95_s, d.tokens_per_s_avg, d.preemptions) == (whole.ttft_p95_s, whole.tokens_per_s, whole.preemptions)
        assert d.ceiling_steps_per_s == whole.ceiling_steps_per_s == 180.0
        assert (d.mbu, d.mbu_source) == (whole.mbu, whole.mbu_source)
        slo = reader.window(name, NOW, PERIOD, ttft_slo_s=3.0)  # the default [sweetspot] ttft_p95_slo_s
        assert (d.ttft_slo_s, d.ttft_slo_attainment, d.ttft_slo_bounds) == (3.0, slo.ttft_slo_attainment, slo.ttft_slo_bounds)
        minutes = reader.series(name, NOW - PERIOD, NOW, 60, fields=("tokens_per_s",))
        assert d.tokens_per_s_peak == max(p.tokens_per_s for p in minutes if p.tokens_per_s is not None)
    assert by_name["demo"].tokens_per_s_avg is not None and by_name["demo"].tokens_per_s_peak >= by_name["demo"].tokens_per_s_avg
    # edge: data for the period's second hour only, and none for its last 10 minutes: 50 of the 100
    # judged minutes are no data (give or take the evaluator's 5-minute windows at the edges)
    assert by_name["edge"].no_data == pytest.approx(50 / 120, abs=6 / 120)
    assert by_name["demo"].no_data == 0.0 and by_name["demo"].in_sweet_spot is not None
    assert by_name["demo"].ttft_slo_attainment is not None
    assert 0.0 <= by_name["demo"].in_sweet_spot <= 1.0
    incidents = by_name["demo"].incidents
    assert [(i.rule, i.started_at, i.ended_at) for i in incidents] == [
        ("preemptions", NOW - 3000, NOW - 2400), ("ttft_p95", NOW - 600, None)]
    assert incidents[0].duration_s(NOW) == 600
    engine.dispose()


def test_cli_prints_the_text_and_writes_html_with_charts(filled, capsys, tmp_path):
    assert main(["digest", "--since", "2h", "--until", f"{NOW:.0f}", "--print", "--db", filled]) == 0
    out = capsys.readouterr().out
    assert out.startswith("[DIGEST] Sweetspot 2h to 2026-12-06 09:00 UTC\n"), out[:80]  # the period --until ends
    assert "demo:" in out and "edge:" in out and "time in the sweet spot:" in out
    # one MBU line per target, with its source (the model's bytes: the simulator's byte counters), and
    # the simulated GPUs' DCGM reading on its own line beside it
    demo = out.split("demo:", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"\n  MBU \d+(\.\d)? % \(engine estimate, vLLM byte counters\)\n", demo), demo
    assert re.search(r"\n  DRAM \d+(\.\d)? % of peak \(DCGM DRAM active\)", demo), demo
    # each target's own sweet spot with its source: the demo's is the report's; edge has none yet
    assert "\n  sweet spot: 16 (reference: the knee of the reference report (8× V100, 70B AWQ, TP 8))\n" in demo
    edge = out.split("edge:", 1)[1].split("\n\n", 1)[0]
    assert "\n  sweet spot: unknown: no sweet spot yet (run a load sweep: `python -m app sweep --target NAME`" in edge
    said = edge.split("\n  sweet spot:")[1].split("\n")[0]  # the learner may name the concurrency it saw, never the report's
    assert said.startswith(" unknown:") and "reference" not in said and "(the learner, " in said
    assert "preemptions over 5m broke" in out and "for 10 min: preemptions" in out and "still firing" in out
    page = tmp_path / "digest.html"
    assert main(["digest", "--since", "2h", "--until", "2026-12-06T09:00Z", "--html", str(page), "--db", filled]) == 0
    html = page.read_text()
    assert html.count("data:image/png;base64,") == 6  # TTFT and throughput, per target (3 targets)


def test_an_incident_s_duration_reads_as_every_age_does():
    spell = digest.Incident("ttft_p95", "", "critical", NOW - 5479, NOW, "TTFT P95 over 5m 4.8 s > 3 s")
    report = digest.Digest(NOW - 86400, NOW, "UTC", (digest.TargetDigest("demo", 0.5, 0.0, 4.8, 120.0, 150.0, 180.0, 0.0, (spell,)),))
    assert " for 1 h 31 min: ttft_p95 [critical]" in digest.render_text(report)  # app.formatting.elapsed, not 5479s
    assert " for 1 h 31 min: ttft_p95 [critical]" in digest.render_html(report, lambda target: [], inline=True)[0]


def test_send_mails_it_and_the_schedule_sends_it_once(filled, monkeypatch):
    mailbox = Mailbox()
    with serve(mailbox) as port:
        settings = email_settings(port)
        settings = dataclasses.replace(settings, db_url=filled, alerts=dataclasses.replace(
            settings.alerts, digest=DigestSettings(schedule="daily 08:00", timezone="Europe/Paris", to=("team@example.test",))))  # fmt: skip
        engine = open_engine(filled)
        notifier = Notifier(engine, settings, clock=lambda: NOW)
        assert digest_once(notifier) == "digest queued for team@example.test"
        assert digest_once(notifier).endswith("already queued")
        assert digest_once(Notifier(engine, settings, clock=lambda: NOW)).endswith("already queued")  # a restart
        notifier.run_once()
        engine.dispose()
    # the same run also mails edge's firing target_down (tests/ui_db.py: down for its last ten minutes; its
    # e-mail skips group_wait, app/alerts/down_clock.py) to the alert recipients: the digest goes once, alone to its own
    digests = [m for m in mailbox.messages if m["Subject"].startswith("[DIGEST]")]
    assert [(m["Subject"], m["To"]) for m in mailbox.messages if m not in digests] == [
        ("[FIRING:1] edge: target down", "ops@example.test")]
    (msg,) = digests
    assert msg["Subject"].startswith("[DIGEST] Sweetspot 1d to ") and msg["To"] == "team@example.test"
    assert "demo:" in msg.get_body(("plain",)).get_content()


def test_send_sends_the_digest_alone_and_leaves_the_collectors_rows(filled, tmp_path, monkeypatch):
    copy = tmp_path / "copy.db"
    shutil.copy(filled.removeprefix("sqlite:///"), copy)
    url, mailbox = f"sqlite:///{copy}", Mailbox()
    with serve(mailbox) as port:
        engine = open_engine(url)
        with engine.connect() as conn:  # rows an earlier test left in the shared database (its digest, edge's alert)
            earlier = conn.execute(select(func.coalesce(func.max(schema.notifications.c.id), 0))).scalar_one()
        write_states(engine, state("preemptions", target="demo", since=int(NOW) - 60))
        assert Notifier(engine, email_settings(port), clock=lambda: NOW).queue(NOW) == 1  # an alert's row, due
        for name, value in {"SWEETSPOT_SMTP_HOST": "127.0.0.1", "SWEETSPOT_SMTP_PORT": str(port), "SWEETSPOT_SMTP_TLS": "none",
                            "SWEETSPOT_ALERT_FROM": "s@example.test", "SWEETSPOT_ALERT_TO": "ops@example.test"}.items():  # fmt: skip
            monkeypatch.setenv(name, value)
        assert main(["digest", "--since", "2h", "--send", "--db", url]) == 0
    assert [m["Subject"][:8] for m in mailbox.messages] == ["[DIGEST]"]
    with engine.connect() as conn:
        n = schema.notifications
        mine = n.c.id > earlier
        stored = [tuple(r) for r in conn.execute(select(n.c.kind, n.c.status, n.c.attempts, n.c.due_at - n.c.created_at).where(mine).order_by(n.c.id))]
    engine.dispose()
    # the alert's row is the collector's to send; the digest's is out of its reach for retry_max_s (5 min)
    assert stored == [("firing", "queued", 0, 0), ("digest", "sent", 1, 300)]


def test_digest_off_without_recipient(filled):
    settings = dataclasses.replace(email_settings(25), alerts=AlertsSettings(email=email_settings(25).alerts.email))
    assert digest_once(Notifier(open_engine(filled), settings)).startswith("digest off")


def test_status_says_where_the_collector_sends_not_its_own_settings(filled, capsys, monkeypatch):
    # the filled database's evaluator ran with e-mail off: status says so whatever its own settings are
    monkeypatch.delenv("SWEETSPOT_SMTP_HOST", raising=False)
    assert main(["status", "--target", "demo", "--db", filled]) == 0
    out = capsys.readouterr().out
    assert "alerts: e-mail off: alerts are evaluated and stored but not sent (set SWEETSPOT_SMTP_HOST" in out
    assert "no collector holds the evaluator's lease now" in out  # the fill evaluated without taking the lease
    for name, value in {"SWEETSPOT_SMTP_HOST": "mail.example.test", "SWEETSPOT_ALERT_FROM": "a@x", "SWEETSPOT_ALERT_TO": "b@x"}.items():
        monkeypatch.setenv(name, value)
    assert main(["status", "--target", "demo", "--db", filled, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["email"].startswith("e-mail off: alerts are evaluated and stored but not sent") and got["sending"] is False
    assert got["delivery"]["channels"] == [] and got["delivery"]["collector_live"] is False


def test_the_time_in_the_sweet_spot_counts_the_stored_verdicts(filled):
    """The digest judges nothing: its shares are the stored minutes' verdicts; a minute without one
    is "no verdict stored", and changing a stored verdict changes the digest."""
    reader, engine = Reader(filled), open_engine(filled)
    start = NOW - PERIOD

    def counted(name: str) -> dict[str, float]:
        with engine.connect() as conn:
            got = conn.execute(select(schema.verdicts.c.state, func.count()).where(
                schema.verdicts.c.target == name, schema.verdicts.c.ts >= start, schema.verdicts.c.ts < NOW,
            ).group_by(schema.verdicts.c.state)).all()  # fmt: skip
        return {state: n / 120 for state, n in got}

    def report() -> dict[str, digest.TargetDigest]:
        return {d.target: d for d in digest.build(reader, engine, Settings(db_url=filled), start, NOW).targets}

    for name, d in report().items():
        shares = counted(name)
        assert d.outside == shares.get(OUTSIDE, 0.0) and d.no_data == shares.get(NO_DATA, 0.0), name
        assert (d.in_sweet_spot or 0.0) == shares.get(IN_SWEET_SPOT, 0.0), name
        assert d.not_stored == pytest.approx(UNJUDGED / 120), name
    before = report()["demo"]
    minute = int(NOW) - 120
    with engine.begin() as conn:
        state = conn.execute(select(schema.verdicts.c.state).where(
            schema.verdicts.c.target == "demo", schema.verdicts.c.ts == minute)).scalar_one()  # fmt: skip
        flipped = OUTSIDE if state != OUTSIDE else IN_SWEET_SPOT
        verdicts.write(conn, [verdicts.StoredVerdict("demo", minute, flipped, minute + 30, {})])
    after = report()["demo"]
    assert after.outside - before.outside == pytest.approx(1 / 120 if flipped == OUTSIDE else -1 / 120)
    text = digest.render_text(digest.build(reader, engine, Settings(db_url=filled), start, NOW))
    assert f"not judged {percent(UNJUDGED / 120)})" in text
    engine.dispose()


def test_the_ttft_p95_line_names_the_engines_bucket():
    target = digest.TargetDigest("demo", 0.5, 0.0, 0.29, 120.0, 150.0, 180.0, 0.0, (), ttft_p95_bucket=(0.25, 0.5))
    assert "TTFT P95: 0.29 s (vLLM's bucket (0.25, 0.5] s)" in digest.render_text(digest.Digest(NOW - 86400, NOW, "UTC", (target,)))


def test_the_slo_attainment_lines_say_how_the_share_was_read_and_why_the_p95_cannot_be_judged():
    target = digest.TargetDigest("demo", 0.5, 0.0, 4.2, 120.0, 150.0, 180.0, 0.0, (), ttft_p95_bucket=(2.5, 5.0),
                                 ttft_slo_s=3.0, ttft_slo_attainment=0.79, ttft_slo_bounds=(2.5, 0.75, 5.0, 0.95),
                                 ttft_slo_p95_bucket=(2.5, 5.0))  # fmt: skip
    text = digest.render_text(digest.Digest(NOW - 86400, NOW, "UTC", (target,)))
    assert "  TTFT SLO: TTFT ≤ 3 s: 79.0 % of requests, interpolated between ≤ 2.5 s: 75.0 % and ≤ 5 s: 95.0 %\n" in text
    assert "TTFT P95 lies in vLLM's bucket (2.5, 5] s, which holds the 3 s SLO" in text and "--custom-histogram-buckets" in text
    exact = dataclasses.replace(target, ttft_slo_s=2.5, ttft_slo_attainment=0.75, ttft_slo_bounds=None, ttft_slo_p95_bucket=None)
    text = digest.render_text(digest.Digest(NOW - 86400, NOW, "UTC", (exact,)))
    assert "TTFT SLO: TTFT ≤ 2.5 s: 75.0 % of requests, exact (a bucket bound)" in text and "cannot tell" not in text


@pytest.mark.parametrize("until, says", [
    ("yesterday", "not a time: 'yesterday' (write it like 2026-12-06T09:00Z"), ("nan", "not a time: 'nan'"),
    ("-5", "not a time: '-5'"), ("2026-13-01", "not a time: '2026-13-01'"), ("2999-01-01", "--until 2999-01-01 is in the future"),
])  # fmt: skip
def test_a_bad_until_is_one_line(filled, until, says, capsys):
    assert main(["digest", "--since", "2h", "--until", until, "--db", filled]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err


def test_until_reads_iso_with_or_without_an_offset_and_epoch_seconds():
    from core.durations import parse_instant

    assert parse_instant("2026-12-06T09:00") == parse_instant("2026-12-06 09:00:00Z") == NOW
    assert parse_instant("2026-12-06T10:00+01:00") == parse_instant("1796547600") == NOW
    assert parse_instant("2026-12-06t09:00z") == parse_instant("2026-12-06T09:00:00.000Z") == NOW  # RFC 3339's lower case
