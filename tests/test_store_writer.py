"""The writer: increases, every kind of reset, failed scrapes, collector restarts (SQLite + PostgreSQL)."""

from __future__ import annotations

import dataclasses
import logging
import math
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import event, select

from collectors.records import GpuReading, SourceResult
from core.errors import StorageError
from core.settings import TargetSettings
from db import histo, schema
from db.engine import open_engine
from db.queries import Reader
from db.writer import Writer
from tests.store_helpers import failed_round, one_round, vllm_round

T = 1_800_000_000


def _samples(engine: Any, column: str) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(select(schema.samples.c[column]).order_by(schema.samples.c.ts)).scalars())


def _write(db_url: str, *rounds: Any) -> Any:
    engine = open_engine(db_url)
    Writer(engine).write_rounds(rounds)
    return engine


def test_increases_and_counter_decrease(db_url: str) -> None:
    engine = _write(db_url, *(vllm_round(T + 5 * i, g) for i, g in enumerate((100, 150, 210, 20, 50))))
    # first scrape is a baseline; a decrease (restart) counts the new value, never negative
    assert _samples(engine, "generation_tokens") == [None, 50, 60, 20, 30]


def test_created_change_is_a_reset(db_url: str) -> None:
    engine = _write(
        db_url,
        vllm_round(T, 100, created={"generation_tokens": 1.0}),
        vllm_round(T + 5, 150, created={"generation_tokens": 2.0}),  # restarted, already past 100
    )
    assert _samples(engine, "generation_tokens") == [None, 150]


def test_process_start_change_is_a_reset(db_url: str) -> None:
    engine = _write(db_url, vllm_round(T, 100, process_start=10.0), vllm_round(T + 5, 180, process_start=20.0))
    assert _samples(engine, "generation_tokens") == [None, 180]


def test_histogram_layout_change_gives_no_increase_that_scrape(db_url: str) -> None:
    other = (0.2, 2.0, float("inf"))
    engine = _write(
        db_url,
        vllm_round(T, hist=(1, 2, 2, 2)),
        vllm_round(T + 5, hist=(2, 4, 4, 5)),
        vllm_round(T + 10, hist=(1, 1, 1), bounds=other),
        vllm_round(T + 15, hist=(1, 3, 4), bounds=other),
    )
    counts = _samples(engine, "ttft_count")
    blobs = _samples(engine, "ttft_buckets")
    assert counts == [None, 3, None, 3]
    assert histo.decode(blobs[1], 4) == [1, 1, 0, 1]
    assert histo.decode(blobs[3], 3) == [0, 2, 1]


def test_histogram_reset_counts_new_values(db_url: str) -> None:
    engine = _write(db_url, vllm_round(T, hist=(5, 8, 9, 9)), vllm_round(T + 5, hist=(1, 1, 2, 2)))
    assert _samples(engine, "ttft_count") == [None, 2]
    assert histo.decode(_samples(engine, "ttft_buckets")[1], 4) == [1, 0, 1, 0]


def test_collector_restart_resumes_from_stored_state(db_url: str) -> None:
    engine = _write(db_url, vllm_round(T, 100, hist=(1, 1, 1, 1)), vllm_round(T + 5, 150, hist=(1, 2, 2, 2)))
    Writer(open_engine(db_url)).write_round(vllm_round(T + 10, 170, hist=(2, 3, 3, 3)))  # a new process
    assert _samples(engine, "generation_tokens") == [None, 50, 20]
    assert _samples(engine, "ttft_count") == [None, 1, 1]


def test_long_gap_is_a_baseline_not_a_spike(db_url: str) -> None:
    engine = _write(db_url, vllm_round(T, 100), vllm_round(T + 5, 110), vllm_round(T + 3600, 90_000))
    assert _samples(engine, "generation_tokens") == [None, 10, None]
    assert _samples(engine, "covered_ms") == [None, 5000, None]  # a baseline covers no time


def test_each_row_stores_the_time_its_increases_cover(db_url: str) -> None:
    # From the rounds' own clock times (rows are keyed by whole seconds, which would make a 5 s
    # interval 4 or 6 s now and then); across a failed scrape, the time since the last successful
    # one; after a restart of the collector, from the stored whole seconds.
    engine = _write(
        db_url, vllm_round(T + 0.4, 100), vllm_round(T + 5.45, 110), failed_round(T + 10.3), vllm_round(T + 15.3, 130)
    )
    Writer(engine).write_round(vllm_round(T + 20.2, 140))  # a new process
    assert _samples(engine, "ts") == [T, T + 5, T + 15, T + 20]
    assert _samples(engine, "covered_ms") == [None, 5050, 9850, 5000]


def test_a_page_without_models_leaves_its_time_to_the_next_rows(db_url: str) -> None:
    # vLLM answered, but with no model's figures: no row stores that round's time, so the next
    # round's rows, whose increases run from the round before it, cover it too.
    empty = vllm_round(T + 5, 110)
    assert empty.vllm is not None
    empty = dataclasses.replace(empty, vllm=dataclasses.replace(empty.vllm, models={}))
    engine = _write(db_url, vllm_round(T, 100), empty, vllm_round(T + 10, 130))
    assert _samples(engine, "generation_tokens") == [None, 30]
    assert _samples(engine, "covered_ms") == [None, 10_000]


def test_the_models_of_a_round_share_the_time_it_covers(db_url: str) -> None:
    # Summed over any rows, the shares give the time those rounds covered, whatever models they had.
    def round_of(ts: float, *models: str) -> Any:
        return one_round(*(vllm_round(ts, ts, model=name) for name in models))

    engine = _write(db_url, round_of(T, "a"), round_of(T + 5, "a", "b", "c"), round_of(T + 10, "c"))
    s = schema.samples
    with engine.connect() as conn:
        rows = conn.execute(select(s.c.ts, s.c.model_id, s.c.covered_ms).order_by(s.c.ts, s.c.model_id)).all()
    assert [c for _, _, c in rows] == [None, 1668, 1666, 1666, 5000]


def test_failed_scrape_is_stored_as_down_never_zeros(db_url: str) -> None:
    engine = _write(db_url, *(failed_round(T + 5 * i, "HTTP 503 from vLLM") for i in range(6)))
    assert _samples(engine, "generation_tokens") == []
    with engine.connect() as conn:
        rows = conn.execute(select(schema.scrapes.c.up, schema.scrapes.c.error)).all()
    assert rows == [(0, "HTTP 503 from vLLM")] * 6
    fig = Reader(db_url).window("t", T + 25, 300)
    assert fig.up is False and fig.last_error == "HTTP 503 from vLLM"
    assert (fig.scrapes, fig.failed_scrapes) == (6, 6)
    assert fig.tokens_per_s is None and fig.running_avg is None and fig.ttft_p95_s is None


def test_counter_resumes_across_a_failed_scrape(db_url: str) -> None:
    engine = _write(db_url, vllm_round(T, 100), failed_round(T + 5), vllm_round(T + 10, 130))
    assert _samples(engine, "generation_tokens") == [None, 30]


def test_a_second_round_in_the_same_second_is_skipped_not_fatal(db_url: str) -> None:
    engine = open_engine(db_url)
    writer = Writer(engine)
    assert writer.write_rounds([vllm_round(T, 100), vllm_round(T + 0.2, 130), vllm_round(T + 5, 170)]) == 2
    # the skipped round's tokens are not lost: the next stored increase covers them
    assert _samples(engine, "generation_tokens") == [None, 70]
    # a fresh writer (collector restart) also refuses a round it already has
    assert Writer(engine).write_rounds([vllm_round(T + 5, 170)]) == 0


def test_after_a_restart_the_increase_covers_the_time_since_the_new_process_started(db_url: str) -> None:
    # 30 s between the scrapes, but the new process started 3 s before the second: its 90 tokens
    # came in 3 s (30 tok/s), not in 30 (3 tok/s, the dip the demo showed at its backfill→live seam)
    engine = _write(db_url, vllm_round(T, 100, process_start=T - 600.0), vllm_round(T + 30, 90, process_start=T + 27.0),
                    vllm_round(T + 35, 240, process_start=T + 27.0))
    assert _samples(engine, "generation_tokens") == [None, 90, 150]
    assert _samples(engine, "covered_ms") == [None, 3000, 5000]
    # a start time the collector's clock puts after the scrape (clocks that disagree) changes nothing
    _write(db_url, vllm_round(T, 10, target="u", model="n", process_start=T - 600.0),
           vllm_round(T + 30, 90, target="u", model="n", process_start=T + 40.0))
    assert sorted(c for c in _samples(engine, "covered_ms") if c) == [3000, 5000, 30000]


@pytest.mark.parametrize("restart", ["created", "process_start", "decrease"])
@pytest.mark.parametrize("collector_restarts", [False, True])
def test_a_reset_after_a_skipped_round_keeps_the_skipped_rounds_increase(db_url: str, restart: str,
                                                                          collector_restarts: bool) -> None:
    # Prometheus scrapes at T+0.45 late (T+0.55 rounds to T+1), then at T+1.45 on time (T+1 again:
    # skipped), then vLLM restarts before the scrape at T+2.45. The 60 tokens and 3 observations
    # counted between the first and the skipped scrape are in no stored row unless the reset is
    # measured from the skipped round's values.
    def at(ts: float, gen: float, hist: tuple[float, ...], started: float) -> Any:
        if restart == "created":
            return vllm_round(ts, gen, hist=hist, created={"generation_tokens": started, "ttft": started})
        return vllm_round(ts, gen, hist=hist, process_start=started if restart == "process_start" else None)

    # (tokens, cumulative buckets, bucket increases) after the restart: past 100 already, or not
    after = (170, (1, 2, 3, 3), [1, 1, 1, 0]) if restart != "decrease" else (30, (1, 1, 2, 2), [1, 0, 1, 0])
    engine = open_engine(db_url)
    writer = Writer(engine)
    assert writer.write_rounds([at(T + 0.55, 100, (1, 2, 2, 2), 10.0), at(T + 1.45, 160, (2, 4, 5, 5), 10.0)]) == 1
    if collector_restarts:  # what is carried lives in series_state
        writer = Writer(engine)
    writer.write_round(at(T + 2.45, after[0], after[1], 20.0))
    assert _samples(engine, "generation_tokens") == [None, 60 + after[0]]
    assert _samples(engine, "ttft_count") == [None, 3 + after[1][-1]]
    assert histo.decode(_samples(engine, "ttft_buckets")[1], 4) == [a + b for a, b in zip((1, 1, 1, 0), after[2], strict=True)]


def test_a_skipped_round_that_restarted_is_not_counted_twice(db_url: str) -> None:
    # the reset lies between the stored round and the skipped one: the next stored round must not
    # see it again (against the stored round's process start)
    engine = _write(db_url, vllm_round(T + 0.55, 100, process_start=10.0), vllm_round(T + 1.45, 20, process_start=20.0),
                    vllm_round(T + 2.45, 50, process_start=20.0))
    assert _samples(engine, "generation_tokens") == [None, 50]


def _rows(engine: Any, table: Any, key: str) -> list[tuple]:
    with engine.connect() as conn:
        rows = conn.execute(select(table).order_by(table.c[key], table.c.ts)).mappings().all()
    return [tuple(v for k, v in row.items() if k not in ("model_id", "target_id")) for row in rows]


def test_round_by_round_stores_what_one_batch_stores(db_url: str) -> None:
    # Round by round, every round after the first is written on the driver's own transaction (all
    # ids cached); one batch goes through SQLAlchemy's. Both must store the same rows.
    def rounds(target: str) -> list[Any]:
        other = (0.2, 2.0, float("inf"))
        return [
            vllm_round(T, 100, target=target, hist=(1, 2, 2, 2), process_start=10.0),
            vllm_round(T + 5, 150, target=target, hist=(2, 4, 4, 5), process_start=10.0),
            failed_round(T + 10, target=target),
            vllm_round(T + 15, 20, target=target, hist=(1, 1, 1, 1), process_start=20.0),
            vllm_round(T + 20, 50, target=target, hist=(1, 1, 1), bounds=other, process_start=20.0),
            vllm_round(T + 25, 90, target=target, hist=(1, 3, 4), bounds=other, process_start=20.0, running=None),
            vllm_round(T + 30, 95, target=target, model="other", hist=(0, 0, 1), bounds=other),
        ]

    engine = open_engine(db_url)
    one_by_one = Writer(engine)
    for round_ in rounds("one-by-one"):
        one_by_one.write_round(round_)
    Writer(engine).write_rounds(rounds("batch"))
    samples = _rows(engine, schema.samples, "model_id")
    scrapes = _rows(engine, schema.scrapes, "target_id")
    assert len(samples) == 12 and len(scrapes) == 14
    assert samples[:6] == samples[6:]
    assert scrapes[:7] == scrapes[7:]


def test_a_round_that_fails_writes_nothing_and_the_next_one_recovers(db_url: str) -> None:
    engine = open_engine(db_url)
    writer = Writer(engine)
    writer.write_round(vllm_round(T, 100))
    writer.write_round(vllm_round(T + 5, 150))  # steady state: the next round goes on the driver path
    with engine.begin() as conn:  # a row in the way of the next round's sample: its insert fails
        model_id = conn.execute(select(schema.models.c.id)).scalar_one()
        conn.execute(schema.samples.insert().values(model_id=model_id, ts=T + 10))
    with pytest.raises(StorageError, match="writing a scrape round"):
        writer.write_round(vllm_round(T + 10, 170))
    with engine.connect() as conn:
        assert conn.execute(select(schema.scrapes.c.ts).order_by(schema.scrapes.c.ts)).scalars().all() == [T, T + 5]
    writer.write_round(vllm_round(T + 15, 200))
    # the failed round's state was rolled back with it: the increase runs from the last stored round
    assert _samples(engine, "generation_tokens") == [None, 50, None, 50]


def test_series_state_json_is_what_json_dumps_writes():
    # the stored text is plain JSON, as json.dumps writes it (read back by any JSON reader)
    import json
    import math

    from db.state import HistState, SeriesState

    state = SeriesState(
        ts=12, process_start=1764489990.5, counters={"a": (1.0, None), "b": (math.nan, 3.25)},
        hists={"ttft": HistState(2, [0.0, 1.0, math.inf], 1.0, None, 1764489990.25)},
    )
    expected = json.dumps(
        {"ts": 12, "ps": 1764489990.5, "c": {"a": [1.0, None], "b": [math.nan, 3.25]},
         "h": {"ttft": [2, [0.0, 1.0, math.inf], 1.0, None, 1764489990.25]}},
        separators=(",", ":"),
    )
    assert state.to_json() == expected
    assert SeriesState.from_json(expected).to_json() == expected


def test_series_state_json_round_trips_exactly():
    import math

    from db.state import HistState, SeriesState

    states = [
        SeriesState(),
        SeriesState(ts=12, process_start=None, counters={"a": (1.0, None), "b": (math.nan, 1764489990.6163325)}),
        SeriesState(
            ts=1_800_000_005, process_start=1764489990.5, counters={"g": (19719.0, None)},
            hists={
                "ttft": HistState(2, [0.0, 1.0, math.inf], 1.0, None, 1764489990.25),
                "itl": HistState(3, [0.5, 2.0**60 + 2, 7.0, 7.0], 7.0, 0.1 + 0.2, None),
            },
        ),
        # the same keys as above with None elsewhere, or other bucket counts: heads are kept by
        # layout between rounds, and these must not get the one above
        SeriesState(ts=13, process_start=7.0, counters={"a": (1.0, 5.0), "b": (2.0, None)}),
        SeriesState(
            ts=1_800_000_010, process_start=1764489990.5, counters={"g": (19720.0, None)},
            hists={
                "ttft": HistState(2, [0.0, 1.0, 2.0, math.inf], 1.0, None, 1764489990.25),
                "itl": HistState(3, [0.5, 2.0**60 + 2, 7.0, 7.0], 7.0, 0.1 + 0.2, None),
            },
        ),
    ]
    for state in states:
        back = SeriesState.from_json(state.to_json())
        # compared through JSON (exact float repr; NaN equal to NaN there)
        assert back.to_json() == state.to_json()
        assert type(back.ts) is type(state.ts) and all(type(h.layout) is int for h in back.hists.values())


def _legacy_text(state: Any) -> str:
    """A state in the text encoding that releases before migration 0009 stored (HEAD|base64 floats)."""
    import base64
    import json
    import struct

    scalars: list[Any] = [state.ts, state.process_start]
    for pair in state.counters.values():
        scalars += pair
    cumulative: list[float] = []
    for h in state.hists.values():
        scalars += (h.layout, h.count, h.sum, h.created)
        cumulative += h.cumulative
    none = [i for i, v in enumerate(scalars) if v is None]
    scalars = [0.0 if v is None else v for v in scalars]
    head = json.dumps([list(state.counters), [[k, len(h.cumulative)] for k, h in state.hists.items()], none])
    return head + "|" + base64.b64encode(struct.pack(f"<{len(scalars) + len(cumulative)}d", *scalars, *cumulative)).decode()


def test_migration_0009_rewrites_text_states_as_json_and_the_collector_resumes_from_them(db_url: str) -> None:
    import json

    from db.migrations import migrate
    from db.state import SeriesState

    engine = _write(db_url, vllm_round(T, 100, hist=(1, 2, 2, 2)), vllm_round(T + 5, 150, hist=(1, 3, 3, 4)))
    st, m = schema.series_state, schema.migrations_table
    with engine.begin() as conn:  # the state as the previous release stored it, before 0009 ran
        state = SeriesState.from_json(conn.execute(select(st.c.state)).scalar_one())
        conn.execute(st.update().values(state=_legacy_text(state)))
        conn.execute(m.delete().where(m.c.name == "0009_state_json"))
    assert migrate(engine) == ["0009_state_json"]
    with engine.connect() as conn:
        stored = conn.execute(select(st.c.state)).scalar_one()
    assert stored.startswith("{") and json.loads(stored) == json.loads(state.to_json())
    Writer(engine).write_round(vllm_round(T + 10, 175, hist=(2, 5, 6, 7)))
    assert _samples(engine, "generation_tokens") == [None, 50, 25]
    assert _samples(engine, "ttft_count") == [None, 2, 3]


# -- GPU rows: the same readings round after round, and GPUs whose meta changes. A fresh writer per
# round (nothing kept) is the reference.
def _gpu(uuid: str, index: int, power: float, name: str = "H200") -> GpuReading:
    return GpuReading(uuid=uuid, index=index, name=name, host="h", memory_used_bytes=1e9, power_w=power)


def _gpu_round(ts: float, gpus: tuple[GpuReading, ...], target: str = "t", model: str = "m") -> Any:
    return dataclasses.replace(vllm_round(ts, 100 + ts - T, target=target, model=model),
                               gpus=gpus, gpu_status=SourceResult(True))


def _gpu_samples(engine: Any) -> list[tuple]:
    g, s, t = schema.gpus, schema.gpu_samples, schema.targets
    query = (select(t.c.name, s.c.ts, g.c.uuid, s.c.power_w, s.c.memory_used_bytes)
             .join(g, (g.c.id == s.c.gpu_id) & (g.c.target_id == s.c.target_id)).join(t, t.c.id == s.c.target_id)
             .order_by(t.c.name, s.c.ts, g.c.uuid))
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(query)]


def _gpus(engine: Any) -> list[tuple]:
    g = schema.gpus
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(select(g.c.uuid, g.c.gpu_index, g.c.name).order_by(g.c.target_id, g.c.uuid))]


def _gpu_rounds(prefix: str = "") -> list[Any]:
    t, u = f"{prefix}t", f"{prefix}u"
    same = (_gpu("GPU-a", 0, 300.0), _gpu("GPU-b", 1, 310.0))
    renamed = (_gpu("GPU-a", 2, 320.0, name="H200 NVL"), _gpu("GPU-b", 1, 330.0))
    return [
        _gpu_round(T, same, t),
        _gpu_round(T + 5, same, t),  # the very tuple again
        _gpu_round(T + 10, same, t, model="second"),  # a model appears, the GPUs unchanged
        _gpu_round(T + 15, renamed, t),  # GPU-a's index and name changed
        _gpu_round(T + 20, same, t),  # an older tuple again: GPU-a's meta back
        _gpu_round(T + 25, same, u),  # another target reading the same exporter
        _gpu_round(T + 30, same, t),
    ]


def test_the_same_gpu_readings_in_consecutive_rounds_store_each_round(db_url: str) -> None:
    engine = open_engine(db_url)
    writer = Writer(engine)
    for round_ in _gpu_rounds():
        writer.write_round(round_)
    for round_ in _gpu_rounds("ref-"):
        Writer(engine).write_round(round_)  # the reference: nothing cached, every id looked up
    rows = _gpu_samples(engine)
    assert len(rows) == 28
    ref, mine = [r[1:] for r in rows[:14]], [r[1:] for r in rows[14:]]
    assert [r[0] for r in rows] == ["ref-t"] * 12 + ["ref-u"] * 2 + ["t"] * 12 + ["u"] * 2
    assert mine == ref
    assert [r[:3] for r in mine[:6]] == [(T, "GPU-a", 300.0), (T, "GPU-b", 310.0), (T + 5, "GPU-a", 300.0),
                                         (T + 5, "GPU-b", 310.0), (T + 10, "GPU-a", 300.0), (T + 10, "GPU-b", 310.0)]
    assert _gpus(engine) == [("GPU-a", 0, "H200"), ("GPU-b", 1, "H200")] * 4
    samples = _rows(engine, schema.samples, "model_id")
    assert len(samples) == 14 and samples[:7] == samples[7:]


def test_gpu_meta_changed_then_back_is_stored_each_time(db_url: str) -> None:
    engine = open_engine(db_url)
    writer = Writer(engine)
    rounds = _gpu_rounds()
    for round_ in rounds[:4]:
        writer.write_round(round_)
    assert _gpus(engine) == [("GPU-a", 2, "H200 NVL"), ("GPU-b", 1, "H200")]
    writer.write_round(rounds[4])
    assert _gpus(engine) == [("GPU-a", 0, "H200"), ("GPU-b", 1, "H200")]


def test_gpu_rows_after_a_failed_round_that_added_a_gpu(db_url: str) -> None:
    engine = open_engine(db_url)
    writer = Writer(engine)
    writer.write_round(_gpu_round(T, (_gpu("GPU-a", 0, 300.0),)))
    grown = (_gpu("GPU-a", 0, 300.0), _gpu("GPU-c", 1, 305.0))
    with engine.begin() as conn:  # a row in the way of the next round's sample: its insert fails
        model_id = conn.execute(select(schema.models.c.id)).scalar_one()
        conn.execute(schema.samples.insert().values(model_id=model_id, ts=T + 5))
    with pytest.raises(StorageError):
        writer.write_round(_gpu_round(T + 5, grown))  # GPU-c's id was inserted, then rolled back
    writer.write_round(_gpu_round(T + 10, grown))  # GPU-c's id looked up again, not the rolled back one
    assert [r[1:4] for r in _gpu_samples(engine)] == [(T, "GPU-a", 300.0), (T + 10, "GPU-a", 300.0),
                                                      (T + 10, "GPU-c", 305.0)]


def _pack_by_walking(delta_cumulative: list[float]) -> list[int]:
    """The per-bucket packing as first written, one bucket at a time: the reference for pack_increases."""
    from db.histo import MAX_INC, entries

    packed: list[int] = []
    below = 0.0
    for i, d in enumerate(delta_cumulative):
        if d == below:
            continue
        inc = d - below
        below = d
        if inc >= 0.5:
            whole = int(inc + 0.5)
            packed.extend([(whole << 8) | i] if whole <= MAX_INC else entries(i, whole))
    return packed


_BUCKET_DELTAS = st.lists(
    st.one_of(
        st.integers(0, 3).map(float),  # the usual: a few observations, many repeats (buckets that did not grow)
        st.floats(-5, 5),
        st.sampled_from([0.0, -0.0, 2.0**40, math.inf, -math.inf, math.nan]),
    ),
    max_size=30,
)


@settings(max_examples=500, deadline=None)
@given(_BUCKET_DELTAS)
def test_pack_increases_packs_as_walking_the_buckets_one_by_one(deltas: list[float]) -> None:
    from db.state import MAX_BUCKET_INCREASE, pack_increases

    per_bucket = [d - below for d, below in zip(deltas, [0.0, *deltas[:-1]], strict=False)]  # [] for no bucket
    if all(inc <= MAX_BUCKET_INCREASE or not inc >= 0.5 for inc in per_bucket):  # NaN: not a number that grew
        assert pack_increases(deltas) == _pack_by_walking(deltas)
    else:  # a garbage page: unknown, rather than an error or millions of packed entries
        assert pack_increases(deltas) is None


@pytest.mark.timeout(20)
def test_garbage_bucket_counts_store_no_increase_and_the_next_round_counts_again(db_url: str) -> None:
    # An infinite count used to fail the round's write (OverflowError), a huge one to loop for ages
    # splitting it into 24-bit entries; both are a garbage page, stored as no histogram increase.
    engine = _write(
        db_url,
        vllm_round(T, hist=(1, 2, 2, 2)),
        vllm_round(T + 5, hist=(1, 2, 2, math.inf)),
        vllm_round(T + 10, hist=(1, 2, 1e30, 1e30)),
        vllm_round(T + 15, hist=(1, 3, 3, 3)),  # below the garbage: a reset, the new values count
        vllm_round(T + 20, hist=(2, 4, 4, 4)),
    )
    assert _samples(engine, "ttft_count")[1:3] == [None, None] and _samples(engine, "ttft_buckets")[1:3] == [None, None]
    assert _samples(engine, "ttft_count")[3:] == [3, 1]
    assert [histo.decode(b, 4) for b in _samples(engine, "ttft_buckets")[3:]] == [[1, 2, 0, 0], [1, 0, 0, 0]]


def test_a_round_that_fails_outside_the_database_leaves_the_next_rounds_right(db_url: str) -> None:
    # Any failure rolls the round back; the writer must also drop what it had computed for it, or the
    # next rounds build on values that were never stored (here: fail forever on the same bad value).
    engine = open_engine(db_url)
    writer = Writer(engine)
    writer.write_round(vllm_round(T, 100))
    bad = vllm_round(T + 5, 130)
    assert bad.vllm is not None
    bad.vllm.models["m"].counters["generation_tokens"] = "not a number"
    with pytest.raises(TypeError):
        writer.write_round(bad)
    writer.write_round(vllm_round(T + 10, 160))
    assert _samples(engine, "generation_tokens") == [None, 60]


def test_a_histogram_with_more_buckets_than_the_packing_holds_is_not_stored(db_url: str, caplog) -> None:
    # Packed entries keep the bucket index in 8 bits: a 300-bucket layout would land its counts in
    # the wrong buckets. Its increases are unknown instead, said once in the log.
    wide = tuple(float(i) for i in range(1, 300)) + (math.inf,)
    counts = [tuple(float(min(i, n)) for i in range(300)) for n in (3, 9, 12)]
    engine = _write(db_url, *(vllm_round(T + 5 * k, 100 + k, hist=c, bounds=wide) for k, c in enumerate(counts)))
    assert _samples(engine, "ttft_count") == [None, None, None]
    assert _samples(engine, "ttft_layout") == [None, None, None]
    assert _samples(engine, "generation_tokens") == [None, 1, 1]  # the rest of the round is stored
    assert sum("more than the 256 that can be stored" in r.getMessage() for r in caplog.records) == 1


def test_a_clock_stepped_back_is_said_once_not_at_every_skipped_round(db_url: str, caplog) -> None:
    caplog.set_level(logging.INFO, logger="db.writer")
    writer = Writer(open_engine(db_url))
    writer.write_round(vllm_round(T + 100, 100))
    stored = writer.write_rounds([vllm_round(T + 5 * i, 100 + i) for i in range(20)])  # all at or before T+100
    stored += writer.write_rounds([vllm_round(T + 105, 130)])
    assert stored == 1
    messages = [r.getMessage() for r in caplog.records if r.name == "db.writer"]
    assert sum("already stored" in m for m in messages) == 1
    assert any("storing rounds again after 20 skipped" in m for m in messages)


def test_a_second_writer_waits_for_the_write_in_flight_instead_of_failing(tmp_path: Path) -> None:
    # A second collector starting beside a running one registers its targets (a read, then a write)
    # while the first writes a round. A deferred transaction that read first cannot wait for the
    # write lock ("database is locked" at once, busy_timeout or not); the writer's must wait.
    url = f"sqlite:///{tmp_path}/two.db"
    target = TargetSettings(name="demo", vllm_url="http://127.0.0.1:9/metrics")
    Writer(open_engine(url)).register_target(target)
    first = sqlite3.connect(tmp_path / "two.db", isolation_level=None, check_same_thread=False)
    first.execute("BEGIN IMMEDIATE")
    first.execute("UPDATE targets SET vllm_url = 'http://127.0.0.1:9/first'")
    second = open_engine(url)
    ends = threading.Timer(0.5, first.execute, ("COMMIT",))  # the first collector's round, half a second on

    @event.listens_for(second, "before_cursor_execute")
    def _began(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.startswith("BEGIN") and not ends.is_alive() and not ends.finished.is_set():
            ends.start()

    assert Writer(second).register_target(target) == 1
    with second.connect() as conn:
        assert conn.execute(select(schema.targets.c.vllm_url)).scalar() == "http://127.0.0.1:9/metrics"
