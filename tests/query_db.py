"""A simulated history in any database URL (SQLite file or PostgreSQL), for the query tests:
the simulator's pages through the real parsers, writer and rollup, as tests/ui_db.py does.

``demo`` is scraped for two hours ending at ``now``; ``edge`` for an hour, down for its last ten
minutes.
"""

from __future__ import annotations

from db.engine import open_engine
from db.rollup import rollup
from db.writer import Writer
from tests.ui_db import simulated_rounds, target_settings


def fill(url: str, now: float, hours: float = 2.0) -> str:
    engine = open_engine(url)
    writer = Writer(engine)
    for name in ("demo", "edge"):
        writer.register_target(target_settings(name))
    writer.write_rounds(simulated_rounds("demo", now - hours * 3600, now, 5.0))
    writer.write_rounds(simulated_rounds("edge", now - 3600, now, 5.0, seed=2, down_after=now - 600))
    rollup(engine, now)
    writer.close()
    engine.dispose()
    return url
