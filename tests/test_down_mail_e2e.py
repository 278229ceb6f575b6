"""Down means mailed, a blip means nothing: the default ``target_down`` timing end to end.

A real simulator on 127.0.0.1 (port 0, then the same port again after each outage), the collector as
a process with the default interval (5 s), evaluation (15 s), ``target_down`` ``for`` (22 s) and
e-mail ``group_wait`` (30 s), and aiosmtpd. The outages are the scenario's own durations (a crash
loop of 8-s outages, then a 20-s blip); everything else waits on a condition. Then the simulator runs
as its own process and is killed with SIGKILL: the e-mail comes from the evaluation of the failed
scrape that takes the spell past ``for`` (the 5th), sent at once (no group_wait for it), before
the next round (docs/alerts.md#down-means-mailed-within-30-s).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from app.alerts import store
from db import schema
from db.engine import open_reader
from tests.support.smtp_server import Mailbox, serve
from tests.test_alerts_e2e import ROOT, alert, collector, kill, wait_for
from tests.test_notify_e2e import notifications, smtp_env

pytestmark = pytest.mark.slow  # real 5-s scrapes: about three minutes
INTERVAL_S, FOR_S = 5, 22  # the defaults this test holds (core/settings, app/alerts/rules.py)


class StampedMailbox(Mailbox):
    """A mailbox that notes when each message arrived (unix seconds)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived: list[float] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.arrived.append(time.time())
        return await super().handle_DATA(server, session, envelope)


def scrapes(db_url: str) -> list[tuple[int, bool]]:
    engine = open_reader(db_url)
    try:
        with engine.connect() as conn:
            s = schema.scrapes
            return [(int(ts), bool(up)) for ts, up in conn.execute(select(s.c.ts, s.c.up).order_by(s.c.ts))]
    finally:
        engine.dispose()


def good_after(db_url: str, after: float) -> bool:
    return any(up and ts > after for ts, up in scrapes(db_url))


def firings(db_url: str) -> list[Any]:
    engine = open_reader(db_url)
    try:
        return [t for t in store.history(engine, 0, rule="target_down") if t.to_state == "firing"]
    finally:
        engine.dispose()


class Engine:
    """The simulator as a process (tests/support/held_sim.py) that dies by SIGKILL and comes back on
    its port after an exact outage: the next process is started and imported before the kill, and
    binds the port the moment it is told."""

    def __init__(self) -> None:
        self.port = 0
        self.proc = self._spawn()
        self.urls = self._go(self.proc)
        self.port = int(self.urls["vllm_metrics"].split(":")[-1].split("/")[0])

    def _spawn(self) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-m", "tests.support.held_sim", str(self.port)], cwd=ROOT, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        return proc

    @staticmethod
    def _go(proc: subprocess.Popen[str]) -> dict[str, str]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    def kill(self) -> float:
        """SIGKILL: the process is gone, its port refuses; returns when (unix s)."""
        kill(self.proc)  # type: ignore[arg-type]
        return time.time()

    def outage(self, seconds: float, db_url: str, watch: dict[Path, Any]) -> None:
        """Gone for ``seconds``, then back; returns once the collector stored a good scrape of it."""
        following = self._spawn()
        gone = self.kill()
        time.sleep(max(0.0, gone + seconds - time.time()))  # the scenario's own duration: how long it is away
        self.proc = following
        self._go(following)
        wait_for(lambda: good_after(db_url, gone + seconds - 1), 60, "a good scrape after the outage", watch)


def config(tmp_path: Path, vllm_url: str, db_url: str) -> Path:
    path = tmp_path / "sweetspot.toml"  # every timing left at its default
    path.write_text(f'db_url = "{db_url}"\n\n[[targets]]\nname = "demo"\nvllm_url = "{vllm_url}"\n')
    return path


def test_blips_and_a_crash_loop_page_nobody_and_a_kill_9_is_mailed_before_the_next_round(tmp_path, monkeypatch):
    db_url = f"sqlite:///{tmp_path}/down.db"
    engine = Engine()
    mailbox, log = StampedMailbox(), tmp_path / "collector.log"
    with serve(mailbox) as smtp_port:
        smtp_env(monkeypatch, smtp_port)
        proc = collector(config(tmp_path, engine.urls["vllm_metrics"], db_url), log)
        watch = {log: proc}
        try:
            wait_for(lambda: good_after(db_url, 0), 90, "the first good scrape", watch)
            for _ in range(3):  # a crash loop: the engine dies and comes back, again and again
                engine.outage(8, db_url, watch)
            engine.outage(20, db_url, watch)  # a 20-s blip
            back = time.time()
            # judged after the engine came back: an evaluation (every 15 s) past its first good scrape
            wait_for(lambda: (s := alert(db_url, "target_down")) and s.last_eval_at > back + 1, 60, "an evaluation", watch)
            assert firings(db_url) == [] and notifications(db_url) == [] and mailbox.messages == []
            spells = _failed_spells(scrapes(db_url))
            assert len(spells) == 4 and max(spells) <= 4, spells  # 20 s at most: under `for`

            engine.kill()  # for good
            wait_for(lambda: mailbox.messages, 120, "the target_down e-mail", watch)
            received = mailbox.arrived[0]
        finally:
            kill(proc)
            engine.kill()
    (msg,) = mailbox.messages
    assert msg["Subject"] == "[FIRING:1] demo: target down", msg["Subject"]
    rows = scrapes(db_url)
    last_good = max(ts for ts, up in rows if up)
    failed = [ts for ts, up in rows if not up and ts > last_good]
    (fired,) = firings(db_url)
    passing = next(ts for ts in failed if ts - last_good >= FOR_S)  # the failed scrape that passes `for`
    # fired by the evaluation right after that scrape (not at the 15-s evaluation's next turn) ...
    assert passing <= fired.at and all(ts >= fired.at for ts in failed if ts > passing), (failed, fired.at)
    assert passing - last_good <= FOR_S + INTERVAL_S, (failed, last_good)  # the first failed scrape past it
    # ... and mailed at once (no group_wait for target_down), before the round after it
    assert received < passing + INTERVAL_S, (received, passing)
    print(f"last good scrape → e-mail received: {received - last_good:.1f} s")


def _failed_spells(rows: list[tuple[int, bool]]) -> list[int]:
    """The lengths (failed scrapes in a row) of every spell of failed scrapes."""
    spells, run = [], 0
    for _, up in rows:
        if up:
            if run:
                spells.append(run)
            run = 0
        else:
            run += 1
    return spells
