"""Nothing stale (issue 28): a target not scraped for two intervals and its scrape timeout reads down,
stale, with the age of its last scrape, on every surface; a target removed from the configuration
ends its alerts with one notice and is never mailed again; the UI judges with the thresholds the
evaluator stored with its verdicts."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from app.alerts import store
from app.alerts.evaluator import TARGET_REMOVED, Evaluator
from app.alerts.model import FIRING, INACTIVE, PENDING, RESOLVED
from app.fleet import DOWN, fleet
from app.notify.notifier import Notifier
from app.ui.page import with_stored
from app.ui.widgets import health_text
from core.settings import Settings, SweetSpotOverrides, TargetSettings, stale_after
from db.engine import open_engine
from db.queries import Reader
from db.writer import Writer
from tests.store_helpers import vllm_round
from tests.support.collector_process import collector, two_targets, wait_until
from tests.support.http_server import serve
from tests.support.smtp_server import Mailbox
from tests.support.smtp_server import serve as serve_smtp
from tests.test_notify_evaluator import T0, Run
from tests.test_notify_evaluator import settings as mail_settings

ROOT = Path(__file__).resolve().parent.parent
V1 = (ROOT / "tests" / "data" / "vllm_v1.txt").read_text()


def status(db: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "app", "status", "--db", db, "--json", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_stopped_collector_leaves_targets_stale_on_status_fleet_and_targets(tmp_path):
    # The collector process scrapes two real pages every second (stale after 2 × 1 s + 0.5 s), then stops.
    with serve({"/metrics": (200, "text/plain", V1)}) as base:
        db = f"sqlite:///{tmp_path}/s.db"
        cfg = two_targets(tmp_path / "sweetspot.toml", f'db_url = "{db}"\ninterval_s = "1s"\nscrape_timeout_s = "0.5s"',
                          ("a", f"{base}/metrics"), ("b", f"{base}/metrics"))  # fmt: skip
        proc = collector(cfg, tmp_path / "collector.log")
        try:
            wait_until(lambda: _scrapes(db, "a") >= 3 and _scrapes(db, "b") >= 3, "three rounds of each")
            live = status(db, "--target", "a")
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        finally:
            proc.kill()
    assert live["up"] is True and live["stale_s"] is None
    reader = Reader(db)
    info = {t.name: t for t in reader.targets()}["a"]
    assert info.stale_after_s == 2.5  # the collector wrote its own 2 × interval + timeout
    last = info.last_scrape_at
    assert last is not None
    # within that time it is up; one second past it, down and stale with the age of its last scrape,
    # whatever the window (5 minutes, or an hour that holds many good scrapes)
    for window_s in (300, 3600):
        fresh, gone = reader.window("a", last + 2.5, window_s), reader.window("a", last + 3.5, window_s)
        assert (fresh.up, fresh.stale_s) == (True, None)
        assert (gone.up, gone.stale_s) == (False, 3.5)
    assert info.health(last + 2.5) is True and info.health(last + 3.5) is False
    assert "stale" in health_text(info, last + 3.5) and "up" in health_text(info, last + 2.0)
    rows = {r.name: r for r in fleet(reader, Settings().sweetspot, last + 3.5, 300.0)}
    assert rows["a"].state.state == DOWN and "stale: not scraped for" in rows["a"].state.reasons[0]
    # the CLI, now: the collector is gone, and status says so whatever its window
    wait_until(lambda: time.time() > last + 2.5 + 0.5, "the stale time to pass", timeout=10)
    for window in ("5m", "1h"):
        now = status(db, "--target", "a", "--window", window)
        assert now["up"] is False and now["state"] == "no_data" and now["stale_s"] > 2.5
        assert now["reasons"][0].startswith("stale: not scraped for")
    every = {r["target"]: r for r in json.loads(subprocess.run(
        [sys.executable, "-m", "app", "status", "--db", db, "--json", "--all"], cwd=ROOT, capture_output=True,
        text=True, timeout=60).stdout)}  # fmt: skip
    assert every["b"]["state"] == "down"


def _scrapes(db: str, target: str) -> int:
    try:
        return Reader(db).window(target, time.time() + 1, 600).scrapes
    except Exception:  # the database is not made yet
        return 0


def test_a_removed_target_ends_its_alerts_with_one_notice_and_is_never_mailed_again(db_url):
    engine = open_engine(db_url)
    writer = Writer(engine)
    writer.register_target(TargetSettings(name="t", vllm_url="http://127.0.0.1:1/metrics"))
    mailbox = Mailbox()
    with serve_smtp(mailbox) as port:
        with_t = mail_settings(db_url, port)
        run = Run(engine, writer, with_t)
        run.preempting = True
        run.until(T0 + 120)
        assert mailbox.subjects() == ["[FIRING:1] t: preemptions"]
        # a second alert pending (a 0.1 s SLO: the TTFT rule waits 2 minutes before it fires)
        slo = dataclasses.replace(with_t.targets[0], sweetspot=SweetSpotOverrides(ttft_p95_slo_s=0.1))
        run.evaluator = Evaluator(engine, dataclasses.replace(with_t, targets=(slo,)), clock=lambda: run.now)
        run.slowing = True
        run.until(T0 + 150)
        assert store.load_states(engine)[("ttft_p95", "t", "")].state == PENDING
        # the collector restarts without "t" in its configuration: no more rounds of it are written
        without = dataclasses.replace(with_t, targets=(TargetSettings(name="u", vllm_url="http://127.0.0.1:1/metrics"),))
        evaluator = Evaluator(engine, without, clock=lambda: run.now)
        notifier = Notifier(engine, without, clock=lambda: run.now)
        # past two repeat intervals (4 h each), a minute a step: a repeat would fall inside any step, and
        # 15-s steps made 2,150 evaluations, past the test's timeout on PostgreSQL at load 10
        for now in range(T0 + 165, T0 + 9 * 3600, 60):
            run.now = float(now)
            evaluator.evaluate_once()
            notifier.run_once()
    states = store.load_states(engine)
    assert (states[("preemptions", "t", "")].state, states[("preemptions", "t", "")].summary) == (RESOLVED, TARGET_REMOVED)
    assert states[("ttft_p95", "t", "")].state == INACTIVE
    of_t = [m for m in mailbox.messages if " t: " in m["Subject"]]  # "u" is never scraped: its own mails
    assert [m["Subject"] for m in of_t] == ["[FIRING:1] t: preemptions", "[RESOLVED] t: preemptions"]
    assert "removed from the configuration" in of_t[1].get_body(("plain",)).get_content()
    ended = [t for t in store.history(engine, T0, rule="preemptions") if t.target == "t" and t.to_state != FIRING]
    assert [(t.from_state, t.to_state) for t in ended] == [(FIRING, RESOLVED)]  # once
    engine.dispose()


def test_the_ui_judges_with_the_thresholds_the_evaluator_stored(db_url):
    # The collector (its evaluator) was restarted with a 0.2 s SLO; the UI process still has 3 s.
    engine = open_engine(db_url)
    writer = Writer(engine)
    strict = TargetSettings(name="t", vllm_url="http://127.0.0.1:1/metrics",
                            sweetspot=SweetSpotOverrides(ttft_p95_slo_s=0.2, concurrency=12))  # fmt: skip
    writer.register_target(strict)
    for ts in range(T0, T0 + 120, 5):
        writer.write_round(vllm_round(ts, gen=float(ts - T0) * 100))
    Evaluator(engine, Settings(db_url=db_url, targets=(strict,)), clock=lambda: T0 + 120).evaluate_once()
    stored = Reader(db_url).judged_by("t")
    assert (stored["ttft_p95_slo_s"], stored["concurrency"]) == (0.2, 12.0)
    ui_own = Settings().sweetspot
    judged = with_stored(ui_own, stored)
    assert (judged.ttft_p95_slo_s, judged.concurrency) == (0.2, 12) and isinstance(judged.concurrency, int)
    assert Reader(db_url).judged_by("never-judged") == {}
    assert with_stored(ui_own, {}) is ui_own
    engine.dispose()


def test_the_stale_time_is_two_intervals_and_the_timeout():
    assert stale_after(Settings(interval_s=5.0, scrape_timeout_s=3.0)) == 13.0
