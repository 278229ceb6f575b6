"""Recovery after the clock steps back (issue 38, item 3): storage resumes within one round.

The writer is given an injected clock (never the wall); each round is dated by it, as the
collector's are. Rows stored while the clock ran ahead are moved to ``future_rows``, never lost,
never in the way; a round stored twice in one second is still skipped, not taken for a step."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from db import schema
from db.engine import open_engine
from db.writer import Writer
from tests.store_helpers import vllm_round

T0 = 1_700_000_000  # where the injected clock starts


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def scrapes(engine: Any) -> list[int]:
    with engine.connect() as conn:
        return list(conn.execute(select(schema.scrapes.c.ts).order_by(schema.scrapes.c.ts)).scalars())


def moved(engine: Any) -> list[tuple[str, int, dict[str, Any]]]:
    f = schema.future_rows
    with engine.connect() as conn:
        return [(t, ts, json.loads(row)) for t, ts, row in conn.execute(select(f.c.table_name, f.c.ts, f.c.row).order_by(f.c.id))]


def test_a_clock_set_back_an_hour_stores_the_very_next_round(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path}/step.db")
    clock = Clock(T0 + 3600)  # an hour ahead, as a wrong time source left it
    writer = Writer(engine, clock=clock)
    tokens = 100
    for i in range(6):
        clock.now = T0 + 3600 + 5 * i
        tokens += 10
        assert writer.write_rounds([vllm_round(clock.now, tokens, hist=(i, 2 * i, 3 * i))]) == 1
    with engine.begin() as conn:  # the rollups of the hour ahead were made too
        conn.execute(schema.rollup_marks.insert().values(step=60, until_ts=T0 + 3660))
    clock.now = T0  # set back
    assert writer.write_rounds([vllm_round(T0, tokens + 10, hist=(6, 12, 18))]) == 1  # the very next round
    clock.now = T0 + 5
    assert writer.write_rounds([vllm_round(T0 + 5, tokens + 30, hist=(7, 14, 21))]) == 1
    assert scrapes(engine) == [T0, T0 + 5]
    kept = moved(engine)
    assert sorted(ts for table, ts, _ in kept if table == "scrapes") == [T0 + 3600 + 5 * i for i in range(6)]
    assert sum(table == "samples" for table, _, _ in kept) == 6
    blob = next(row for table, _, row in kept if table == "samples" and row.get("ttft_buckets"))
    bytes.fromhex(blob["ttft_buckets"])  # a blob kept as hex: nothing lost
    with engine.connect() as conn:
        assert conn.execute(select(schema.rollup_marks.c.until_ts)).scalar() <= T0  # folded again from here
        increase = conn.execute(select(schema.samples.c.generation_tokens).where(schema.samples.c.ts == T0 + 5)).scalar()
    assert increase == 20  # counters go on from the values last read


def test_a_fresh_writer_after_the_step_recovers_as_well(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path}/restart.db")
    ahead = Clock(T0 + 86_400)
    Writer(engine, clock=ahead).write_rounds([vllm_round(T0 + 86_400, 5)])
    # the collector restarted after the clock was set back a day: it reads the latest round from the database
    assert Writer(engine, clock=Clock(T0)).write_rounds([vllm_round(T0, 9)]) == 1
    assert scrapes(engine) == [T0]


def test_a_round_stored_twice_in_one_second_is_skipped_not_taken_for_a_step(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path}/twice.db")
    clock = Clock(T0)
    writer = Writer(engine, clock=clock)
    assert writer.write_rounds([vllm_round(T0, 1)]) == 1
    clock.now = T0 + 0.3
    assert writer.write_rounds([vllm_round(T0 + 0.3, 2)]) == 0
    assert scrapes(engine) == [T0] and moved(engine) == []


def test_a_round_dated_by_another_clock_never_moves_rows(tmp_path: Path) -> None:
    # a Prometheus sample dated 40 s ahead of this machine (its own clock), then read again: skipped
    engine = open_engine(f"sqlite:///{tmp_path}/other.db")
    writer = Writer(engine, clock=Clock(T0))
    assert writer.write_rounds([vllm_round(T0 + 40, 1)]) == 1
    assert writer.write_rounds([vllm_round(T0 + 40, 1)]) == 0
    assert scrapes(engine) == [T0 + 40] and moved(engine) == []


steps = st.lists(st.one_of(st.integers(1, 600), st.integers(-10**6, -3)), min_size=1, max_size=12)


@settings(max_examples=25, deadline=None)
@given(steps=steps)
def test_whatever_the_clock_does_every_round_it_dates_is_stored_at_once(steps: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        engine = open_engine(f"sqlite:///{tmp}/fuzz.db")
        try:
            clock = Clock(T0)
            writer = Writer(engine, clock=clock)
            assert writer.write_rounds([vllm_round(T0, 0)]) == 1
            for i, step in enumerate(steps, 1):
                clock.now += step
                assert writer.write_rounds([vllm_round(clock.now, i)]) == 1, (i, step)
                stored = scrapes(engine)
                assert stored[-1] == int(clock.now)  # nothing stored is ahead of the clock
            with engine.connect() as conn:
                aside = conn.execute(select(func.count()).select_from(schema.future_rows)
                                     .where(schema.future_rows.c.table_name == "scrapes")).scalar()
            assert len(scrapes(engine)) + aside == len(steps) + 1  # every round kept, here or aside
        finally:
            engine.dispose()
