"""`backfill --prometheus` against Debian's real prometheus: history, resumption, then live with no gap."""

from __future__ import annotations

import io
import signal
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import func, select

from app import prometheus_backfill
from app.cli import main
from app.prometheus_backfill import backfill
from app.prometheus_source import PrometheusSource
from core.settings import PrometheusSettings, Settings
from db import schema
from db.engine import open_engine
from db.writer import Writer
from simulator import SimOptions, start_simulator
from tests.prometheus_server import PrometheusServer

HISTORY_S = 8.0


@pytest.fixture(scope="module")
def scraped(tmp_path_factory) -> Iterator[tuple[PrometheusServer, float]]:
    """Two loaded simulators scraped every second; yields the server and an instant with history before it
    (the newest instant at which every target has over HISTORY_S + 1 s of scrapes before it)."""
    sims = [start_simulator(SimOptions(port=0, seed=i, speed=20, load=2)) for i in range(2)]
    server = PrometheusServer(tmp_path_factory.mktemp("prom"), [s.urls["vllm_metrics"] for s in sims])
    try:
        server.wait_for_targets(2)
        deadline = time.monotonic() + 120  # a safety net: ends once the history is there
        while min(last - first for first, last in _scraped_spans(server)) <= HISTORY_S + 1:
            assert time.monotonic() < deadline, f"no {HISTORY_S + 1:g} s of history: {_scraped_spans(server)}"
            time.sleep(0.5)
        yield server, min(last for _, last in _scraped_spans(server))
    finally:
        server.stop()
        for sim in sims:
            sim.stop()


def _scraped_spans(server: PrometheusServer) -> list[tuple[float, float]]:
    """(first, last) scrape time of every target, from Prometheus's own ``up`` samples."""
    return [(float(r["values"][0][0]), float(r["values"][-1][0])) for r in server.query("up[5m]")]


def _rounds(url: str) -> list[tuple[int, int]]:
    engine = open_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(select(schema.scrapes.c.target_id, schema.scrapes.c.ts).order_by(schema.scrapes.c.target_id,
                                                                                            schema.scrapes.c.ts)).all()
    engine.dispose()
    return [(int(t), int(ts)) for t, ts in rows]


def test_history_is_imported_one_round_per_step_per_target(scraped, tmp_path):
    server, now = scraped
    url = f"sqlite:///{tmp_path}/b.db"
    engine = open_engine(url)
    out = io.StringIO()
    result = backfill(engine, PrometheusSettings(url=server.url), HISTORY_S - 2, 1.0, now, stream=out)
    engine.dispose()
    assert result.targets == 2 and result.resumed_from is None
    rows = _rounds(url)
    assert len(rows) == result.rounds == 2 * 6
    assert "backfill done: 6 steps" in out.getvalue()


def test_an_interrupted_backfill_continues_where_it_stopped_and_stores_nothing_twice(scraped, tmp_path, monkeypatch):
    server, now = scraped
    source = PrometheusSettings(url=server.url)
    whole = f"sqlite:///{tmp_path}/whole.db"
    engine = open_engine(whole)
    backfill(engine, source, HISTORY_S - 2, 1.0, now)
    engine.dispose()

    monkeypatch.setattr(prometheus_backfill, "SAMPLES_PER_REQUEST", 1)  # one step per request
    saved = prometheus_backfill.save_backfill_progress
    calls = []

    def stop_after_two(*args):
        saved(*args)
        calls.append(args)
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C after the second chunk was committed

    monkeypatch.setattr(prometheus_backfill, "save_backfill_progress", stop_after_two)
    url = f"sqlite:///{tmp_path}/resumed.db"
    engine = open_engine(url)
    with pytest.raises(KeyboardInterrupt):
        backfill(engine, source, HISTORY_S - 2, 1.0, now)
    assert len(_rounds(url)) == 2 * 2
    monkeypatch.setattr(prometheus_backfill, "save_backfill_progress", saved)
    second = backfill(engine, source, HISTORY_S - 2, 1.0, now)
    assert second.resumed_from == calls[-1][2]
    third = backfill(engine, source, HISTORY_S - 2, 1.0, now)  # nothing left: stores nothing
    assert third.rounds == 0
    with engine.connect() as conn:
        ours = conn.execute(select(func.sum(schema.samples.c.generation_tokens))).scalar()
    engine.dispose()
    assert _rounds(url) == _rounds(whole)
    engine = open_engine(whole)
    with engine.connect() as conn:
        theirs = conn.execute(select(func.sum(schema.samples.c.generation_tokens))).scalar()
    engine.dispose()
    assert ours == theirs


def test_live_collection_continues_the_backfill_with_no_gap_and_no_duplicate(scraped, tmp_path):
    server, _ = scraped
    url = f"sqlite:///{tmp_path}/live.db"
    engine = open_engine(url)
    now = time.time()
    backfill(engine, PrometheusSettings(url=server.url), HISTORY_S, 1.0, now)
    backfilled = _rounds(url)
    first_ts = min(ts for _, ts in backfilled)
    start_total = sum(float(s["value"][1]) for s in server.client.get(
        "/api/v1/query", params={"query": "vllm_generation_tokens_total", "time": str(first_ts)}).json()["data"]["result"])
    source = PrometheusSource(Settings(), PrometheusSettings(url=server.url))
    writer = Writer(engine)
    latest: dict[str, float] = {}  # target → its cumulative tokens in the last live round stored
    live: dict[str, int] = {}  # target → live rounds read
    deadline = time.monotonic() + 60  # a safety net: ends once each target has 3 live rounds
    while (len(live) < 2 or min(live.values()) < 3) and time.monotonic() < deadline:
        for r in source.read().rounds:
            # (a round in the second of the target's last one is not stored: its tokens are not in the sum yet)
            if writer.write_rounds([r]) and r.vllm is not None:
                latest[r.target] = sum(m.counters["generation_tokens"] for m in r.vllm.models.values())
            live[r.target] = live.get(r.target, 0) + 1
        time.sleep(0.6)  # Prometheus scrapes every second: a read in between gives no round
    last_total = sum(latest.values())
    writer.close()
    source.close()
    s, m = schema.samples, schema.models
    with engine.connect() as conn:
        stored = conn.execute(select(func.sum(s.c.generation_tokens))).scalar()
        nulls = conn.execute(select(func.count()).where(s.c.covered_ms.is_(None))).scalar()
        covered = conn.execute(select(m.c.target_id, s.c.ts, s.c.covered_ms).join(m, s.c.model_id == m.c.id)
                               .order_by(m.c.target_id, s.c.ts)).all()
    engine.dispose()
    rows = _rounds(url)
    assert len(rows) == len(set(rows)) and len(rows) > len(backfilled)
    assert min(live.values()) >= 3, live
    # no gap at the seam: the first live row covers the time since the last backfilled one (however
    # long the backfill took; rows are 1 s apart only where the live reads kept up with the scrapes)
    for target in {t for t, _ in backfilled}:
        last_backfilled = max(ts for t, ts in backfilled if t == target)
        (ts, covered_ms), *_ = [(ts, c) for t, ts, c in covered if t == target and ts > last_backfilled]
        assert covered_ms == (ts - last_backfilled) * 1000
    assert nulls == 2  # only each target's very first row is a baseline
    # every token between the first backfilled step and the last live round, counted once
    assert stored == pytest.approx(last_total - start_total)


def test_the_command_prints_progress_and_what_it_stored(scraped, tmp_path, capsys):
    server, _ = scraped
    db = f"sqlite:///{tmp_path}/c.db"
    assert main(["backfill", "--prometheus", server.url, "--since", "4s", "--step", "1s", "--db", db]) == 0
    captured = capsys.readouterr()
    assert "backfilled 8 rounds of 2 target(s) from {job=\"vllm\"} at 1s steps" in captured.out
    assert "backfill done: 4 steps" in captured.err
    assert main(["backfill", "--prometheus", server.url, "--since", "4s", "--selector", '{job="none"}', "--db", db]) == 2
    assert "matches no series" in capsys.readouterr().err


def test_an_unreachable_prometheus_is_one_line(tmp_path, capsys):
    from tests.support.http_server import closed_port_url

    url = closed_port_url().removesuffix("/metrics")
    assert main(["backfill", "--prometheus", url, "--db", f"sqlite:///{tmp_path}/u.db"]) == 2
    assert capsys.readouterr().err.strip() == (f"ERROR: cannot reach Prometheus at {url} (connection refused). "
                                               "Is Prometheus running? Check prometheus[].url")


def test_a_target_no_longer_scraped_is_still_backfilled(tmp_path, capsys):
    # The incident is over and its target gone from Prometheus's config: an instant query at now finds
    # none of its series once the lookback (5m by default, 2s here) has passed, which is exactly when
    # its history is wanted.
    with start_simulator(SimOptions(port=0, seed=7, speed=20, load=2)) as sim:
        (tmp_path / "prom").mkdir()
        server = PrometheusServer(tmp_path / "prom", [sim.urls["vllm_metrics"]], extra_flags=["--query.lookback-delta=2s"])
        try:
            server.wait_for_targets(1)
            client = server.client
            wait = time.time() + 60

            def count(promql: str) -> int:
                result = client.get("/api/v1/query", params={"query": promql}).json()["data"]["result"]
                return int(float(result[0]["value"][1])) if result else 0

            while count('count_over_time(up{job="vllm"}[1m])') < 5 and time.time() < wait:  # 5 scrapes of history
                time.sleep(0.2)
            # the target leaves the config (another job stays, for a valid one)
            from tests.prometheus_server import scrape_config
            from tests.support.http_server import closed_port_url

            server.config.write_text(scrape_config([closed_port_url()], job="other"))
            server.proc.send_signal(signal.SIGHUP)
            while count('count({job="vllm"})') and time.time() < wait:
                time.sleep(0.2)
            assert count('count({job="vllm"})') == 0, "the target's series should be out of the lookback by now"
            db = f"sqlite:///{tmp_path}/gone.db"
            assert main(["backfill", "--prometheus", server.url, "--since", "1m", "--step", "1s", "--db", db]) == 0, \
                capsys.readouterr().err
            assert "of 1 target(s)" in capsys.readouterr().out
            assert len(_rounds(db)) >= 4
            # the same again: what is left of the period holds none of the series; nothing added, no error
            stored = _rounds(db)
            assert main(["backfill", "--prometheus", server.url, "--since", "1m", "--step", "1s", "--db", db]) == 0, \
                capsys.readouterr().err
            assert capsys.readouterr().out.startswith("nothing to add:") and _rounds(db) == stored
        finally:
            server.stop()
