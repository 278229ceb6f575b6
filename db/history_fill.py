"""How far the demo's simulated week has come while it is written behind the live dashboard
(``app/history_fill.py`` writes it, the pages and ``status`` read it): one row per target."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, Engine, select, update

from db import schema


@dataclass(frozen=True)
class FillProgress:
    """The fill of ``target``'s history over [start_ts, end_ts] (unix s): ``days_done`` of
    ``days_total`` days written, rolled up and judged; ``eta_at`` when it should end (None until a
    first day was timed), ``finished_at`` None while it runs."""

    target: str
    start_ts: int
    end_ts: int
    days_total: int
    days_done: int
    started_at: float
    updated_at: float
    eta_at: float | None = None
    finished_at: float | None = None

    @property
    def filling(self) -> bool:
        return self.finished_at is None

    def notice(self, now: float) -> str:
        """``history filling, 3 of 7 days (about 25 s left)``: one line for the pages and the terminal."""
        left = "" if self.eta_at is None else f" (about {max(0, round(self.eta_at - now))} s left)"
        return f"history filling, {self.days_done} of {self.days_total} days{left}"


def save(engine: Engine, progress: FillProgress) -> None:
    """Insert or replace the target's row, in its own transaction."""
    t = schema.history_fill
    values = {k: getattr(progress, k) for k in t.c.keys() if k != "target"}
    with engine.begin() as conn:
        if not conn.execute(update(t).where(t.c.target == progress.target).values(**values)).rowcount:
            conn.execute(t.insert().values(target=progress.target, **values))


def load(conn: Connection, target: str) -> FillProgress | None:
    """The target's fill, or None when it never had one (a real target, or a demo filled before)."""
    t = schema.history_fill
    row = conn.execute(select(t).where(t.c.target == target)).mappings().first()
    return None if row is None else FillProgress(**dict(row))
