"""The clock of the rule that watches the data itself (``target_down``): its ``for`` counts in scrape
time from the target's last good scrape, not in evaluation time.

Counted from the evaluations, a pending timer keeps running between two scrapes: an evaluation that
runs just before the scrape that finds the engine back would see the timer at the full length of a
blip plus one interval, so no ``for`` could both let a 20-s blip pass and fire within 30 s of the
last good scrape. Counted from the scrapes, a spell of failed scrapes lasts ``last failed scrape −
last good scrape`` whenever it is judged, and grows only when a new failed scrape comes in: a blip of
D seconds leaves at most ``⌊D ÷ interval⌋`` failed scrapes in a row (D seconds at most), an engine
that stays down one more each interval. While no scrape comes at all (the collector stopped: the
target reads stale) the spell runs on the evaluation's clock from the last good scrape.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, func, select

from db import schema


@dataclass(frozen=True)
class DownSpell:
    """A spell of failed (or missing) scrapes, in unix seconds: ``since`` the last good scrape (the
    first scrape when none was ever good), observed up to ``at`` (the last failed scrape, or the
    evaluation's time once the target reads stale)."""

    since: float
    at: float

    @property
    def length_s(self) -> float:
        return self.at - self.since


def down_spell(engine: Engine, target: str, now: float, stale_after_s: float) -> DownSpell | None:
    """The spell of ``target`` at ``now``; None while its last scrape succeeded and is fresh (the
    rule then holds for another reason, such as scrapes that expose no vLLM figures, and its timer
    runs on the evaluations' clock) or when it was never scraped."""
    s, t = schema.scrapes, schema.targets
    with engine.connect() as conn:
        tid = conn.execute(select(t.c.id).where(t.c.name == target)).scalar()
        if tid is None:
            return None
        last = conn.execute(select(s.c.ts, s.c.up).where(s.c.target_id == tid, s.c.ts <= now)
                            .order_by(s.c.ts.desc()).limit(1)).first()  # fmt: skip
        if last is None:
            return None
        stale = now - float(last.ts) > stale_after_s
        if last.up and not stale:
            return None
        # newest first along the primary key: a spell is short, so the walk back to a good scrape is too
        good = conn.execute(select(s.c.ts).where(s.c.target_id == tid, s.c.up == 1, s.c.ts <= now)
                            .order_by(s.c.ts.desc()).limit(1)).scalar()  # fmt: skip
        if good is None:  # never up (or its good scrapes pruned): the spell is as old as its first scrape
            good = conn.execute(select(func.min(s.c.ts)).where(s.c.target_id == tid)).scalar()
    return DownSpell(float(good if good is not None else last.ts), now if stale else float(last.ts))
