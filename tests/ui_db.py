"""Databases for the UI tests and the benchmark, filled through the real writer and rollup."""

from __future__ import annotations

from pathlib import Path

from db.engine import open_engine
from db.rollup import rollup
from db.writer import Writer
from tests.history import Deployment, target_settings


def fill(path: Path, now: float, hours: float = 2.0, step_s: float = 5.0) -> str:
    """``demo`` (healthy history up to now) and ``edge`` (down for the last 10 minutes); returns the URL."""
    url = f"sqlite:///{path}"
    engine = open_engine(url)
    writer = Writer(engine)
    for name in ("demo", "edge"):
        writer.register_target(target_settings(name))
    writer.write_rounds(Deployment("demo").rounds(now - hours * 3600, now, step_s))
    writer.write_rounds(Deployment("edge", seed=2).rounds(now - 3600, now, step_s, down_after=now - 600))
    rollup(engine, now)
    engine.dispose()
    return url


def empty(path: Path) -> str:
    """A migrated database nothing was collected into."""
    url = f"sqlite:///{path}"
    open_engine(url).dispose()
    return url
