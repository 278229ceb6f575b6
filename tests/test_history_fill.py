"""The demo's week written behind the live rounds (app/history_fill.py), on a real SQLite file and a
real simulator on port 0. The days are scaled to hours (a test may scale the times, not the order
of events): the last hour first (rolled up and judged), then a live round, then the days before it one
by one, each rolled up and judged before its progress is stored; retention waits for the whole history."""

from __future__ import annotations

import io
import time

from sqlalchemy import func, select

from app.collection import CollectionService
from app.commands.run import demo_target
from app.history_fill import HistoryFill
from core.settings import Settings
from db import schema
from db.queries import Reader
from simulator.api import SimOptions, start_simulator  # a server: out of the fast tier (tests/conftest.py)
from tests.support.waiting import wait_until

HOUR = 3600


def _latest_ts(service: CollectionService) -> int:
    with service.engine.connect() as conn:
        return int(conn.execute(select(func.max(schema.scrapes.c.ts))).scalar() or 0)


def count(service: CollectionService, table, *where) -> int:  # type: ignore[no-untyped-def]
    with service.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table).where(*where)).scalar() or 0)


def test_the_week_fills_in_behind_live_rounds_a_day_at_a_time(tmp_path):
    with start_simulator(SimOptions(port=0, seed=0, load=4)) as sim:
        target = demo_target(sim.urls)
        service = CollectionService(Settings(db_url=f"sqlite:///{tmp_path}/fill.db", targets=(target,)))
        try:
            assert service.turn.take()  # as `run` does: the history is written holding the writer's turn
            now = time.time()
            start, end = now - 3 * HOUR, now - 5
            out = io.StringIO()
            fill = HistoryFill(service, target, start, end, 30.0, stream=out, day_s=HOUR)
            fill.begin()  # the last hour, before any live round
            progress = Reader(engine=service.engine).history_fill("demo")
            assert (progress.days_done, progress.days_total, progress.filling) == (2 - 2, 2, True)
            assert progress.notice(now) == "history filling, 0 of 2 days"  # no ETA before a day was timed
            s, v = schema.scrapes, schema.verdicts
            assert count(service, s) == HOUR // 30 + 1 and count(service, s, s.c.ts < int(end - HOUR)) == 0
            hour_minutes = int(end) // 60 - (int(end - HOUR) + 59) // 60
            assert count(service, v) == hour_minutes  # the Overview's default hour: judged already
            assert "waits for the simulated history" in service.retention()

            service.collect_once()  # a live round while the history is still being written
            fill.run()
            # Rounds are stored at their second, and a round in a second already stored is skipped
            # (db/writer.py): the second live round waits for the clock to pass the first one's second.
            first_live = count(service, s, s.c.ts > round(end))
            latest = _latest_ts(service)
            wait_until(lambda: round(time.time()) > latest, "the clock to pass the first live round's second")
            service.collect_once()
        finally:
            service.close()
    lines = out.getvalue().splitlines()
    assert lines[0].split(" (")[0] == "history filling, 1 of 2 days" and "s left)" in lines[0]  # an ETA from the first day
    assert lines[1].startswith("history: 2 days of simulated history written, rolled up and judged in ")
    progress = Reader(engine=service.engine).history_fill("demo")
    assert (progress.days_done, progress.filling, progress.eta_at) == (2, False, None)
    assert not service.history_filling.is_set()

    history = count(service, s, s.c.ts <= round(end))  # rounds are stamped to the nearest second
    assert history == int((end - start) // 30) + 1  # every step stored: the live round skipped none
    assert first_live == 1 and count(service, s, s.c.ts > round(end)) == 2  # both live rounds stored beside it
    # every whole minute of the history rolled up and judged, day by day
    minutes = int(end) // 60 - (int(start) + 59) // 60
    r = schema.target_rollups
    assert count(service, r, r.c.step == 60, r.c.ts >= int(start) - 60, r.c.ts < int(end) // 60 * 60) >= minutes
    assert count(service, v, v.c.ts >= int(start), v.c.ts < int(end) // 60 * 60) == minutes
    # a first start: the live engine continues the simulated history, no restart marked at the seam
    # (it read "since restart (same configuration)" on the Overview and in `epochs`)
    assert [e.kind for e in Reader(engine=service.engine).epochs("demo") if e.ts > end - 1] == []
