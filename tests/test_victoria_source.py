"""VictoriaMetrics as a Fleet and ``backfill`` source: Debian's real ``victoria-metrics``, its own data
written by scraping simulators (``-promscrape.config``), read through the same ``[[prometheus]]``
source as a Prometheus. What differs, measured here: its range queries hide the last
``-search.latencyOffset`` (30 s) and repeat the sample before it at each step of that span, its instant
queries lag as much (``/federate`` does not), and it limits points per series at 30,000."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import func, select

from app.prometheus_backfill import backfill
from app.prometheus_source import PrometheusSource
from collectors.prometheus import VM_LATENCY_OFFSET_S, PrometheusClient
from collectors.vllm import parse_vllm
from core.settings import PrometheusSettings, Settings
from db import schema
from db.engine import open_engine
from db.epochs import config_of
from db.writer import Writer
from simulator import SimOptions, start_simulator
from tests.victoria_server import VictoriaServer

SIMS = 2
HISTORY_S = 8.0


@pytest.fixture(scope="module")
def victoria(tmp_path_factory) -> Iterator[tuple[VictoriaServer, list]]:
    """Two loaded simulators scraped every second by VictoriaMetrics; yields once it holds more than
    its latency offset + HISTORY_S of each (so a backfill has settled history to import)."""
    sims = [start_simulator(SimOptions(port=0, seed=i, speed=20, load=2)) for i in range(SIMS)]
    server = VictoriaServer(tmp_path_factory.mktemp("vm"), [s.urls["vllm_metrics"] for s in sims])
    try:
        server.wait_for_targets(SIMS)
        started = time.time()
        deadline = time.monotonic() + 120  # a safety net: ends once the history is there
        while time.time() - started < VM_LATENCY_OFFSET_S + HISTORY_S + 2:
            assert time.monotonic() < deadline
            time.sleep(0.5)
        yield server, sims
    finally:
        server.stop()
        for sim in sims:
            sim.stop()


def _instance(sim) -> str:
    return sim.urls["vllm_metrics"].split("/")[2]


def _rounds(url: str) -> list[tuple[int, int]]:
    engine = open_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(select(schema.scrapes.c.target_id, schema.scrapes.c.ts)
                            .order_by(schema.scrapes.c.target_id, schema.scrapes.c.ts)).all()  # fmt: skip
    engine.dispose()
    return [(int(t), int(ts)) for t, ts in rows]


def test_the_server_is_told_apart_from_a_prometheus(victoria):
    server, _ = victoria
    client = PrometheusClient(PrometheusSettings(url=server.url), 5.0)
    assert client.kind() == "victoriametrics"
    assert client.settled_before(1000.0) == 1000.0 - VM_LATENCY_OFFSET_S  # read from its /metrics: 30 s
    client.close()
    named = PrometheusClient(PrometheusSettings(url=server.url, kind="prometheus"), 5.0)  # the setting wins
    assert named.kind() == "prometheus" and named.settled_before(1000.0) == 1000.0
    named.close()


def test_every_target_is_discovered_and_reads_as_a_direct_scrape(victoria, tmp_path):
    server, sims = victoria
    source = PrometheusSource(Settings(db_url=f"sqlite:///{tmp_path}/v.db", scrape_timeout_s=5.0),
                              PrometheusSettings(url=server.url))  # fmt: skip
    read = source.read()
    source.close()
    assert read.error is None and source.client.federate is True  # /federate: the latest, no lag
    assert sorted(t.name for t in read.discovered) == sorted(_instance(s) for s in sims)
    by_target = {r.target: r for r in read.rounds}
    for sim in sims:
        through = by_target[_instance(sim)]
        assert time.time() - through.ts < 5  # its scrape time, not 30 s ago
        direct = parse_vllm(httpx.get(sim.urls["vllm_metrics"]).text)
        assert through.vllm is not None and through.vllm.models.keys() == direct.models.keys()
        for model, figures in direct.models.items():  # the same counters a little later: never fewer
            mine = through.vllm.models[model]
            assert mine.counters.keys() == figures.counters.keys() and mine.histograms.keys() == figures.histograms.keys()
            assert all(mine.counters[k] <= figures.counters[k] for k in figures.counters)
        # VictoriaMetrics keeps ~12 significant digits: the start time reads back within a microsecond
        assert through.vllm.process_start_time_s == pytest.approx(direct.process_start_time_s, abs=1e-5)
        # the labels configuration epochs watch arrive too (beside the job label the scraper added)
        assert config_of(through.vllm) == config_of(direct)


def test_its_range_queries_repeat_one_sample_over_the_latency_offset(victoria):
    """The difference the backfill handles: over the last 30 s every step holds the same sample."""
    server, _ = victoria
    now = time.time()
    (series, *_) = server.query_range("timestamp(up)", now - VM_LATENCY_OFFSET_S - 10, now, 2.0)
    hidden = [(float(t), float(v)) for t, v in series["values"] if float(t) > now - VM_LATENCY_OFFSET_S + 2]
    stamps = {v for _, v in hidden}  # each step's sample time: one, older than the span, at every step
    assert len(hidden) >= 10 and len(stamps) == 1 and stamps.pop() < now - VM_LATENCY_OFFSET_S + 2, series["values"]


def test_history_is_imported_one_round_per_step_up_to_the_settled_data(victoria, tmp_path):
    server, _ = victoria
    url = f"sqlite:///{tmp_path}/b.db"
    engine = open_engine(url)
    now = time.time()
    out = io.StringIO()
    result = backfill(engine, PrometheusSettings(url=server.url), VM_LATENCY_OFFSET_S + HISTORY_S, 1.0, now, stream=out)
    assert result.targets == SIMS and result.end <= now - VM_LATENCY_OFFSET_S
    rows = _rounds(url)
    assert len(rows) == result.rounds == SIMS * int(result.end - result.start)
    s, m = schema.samples, schema.models
    with engine.connect() as conn:  # every step a scrape of its own: the tokens grow, none repeated flat
        steps = conn.execute(select(m.c.target_id, s.c.ts, s.c.generation_tokens).join(m, s.c.model_id == m.c.id)
                             .order_by(m.c.target_id, s.c.ts)).all()  # fmt: skip
    engine.dispose()
    assert max(ts for _, ts, _ in steps) <= now - VM_LATENCY_OFFSET_S
    later = [tokens for _, _, tokens in steps if tokens is not None]
    assert later and sum(1 for t in later if t > 0) >= len(later) * 0.8, later  # under load: tokens at almost every step


def test_live_collection_continues_the_backfill_with_no_duplicate_and_no_lost_token(victoria, tmp_path):
    server, _ = victoria
    url = f"sqlite:///{tmp_path}/live.db"
    engine = open_engine(url)
    backfill(engine, PrometheusSettings(url=server.url), HISTORY_S, 1.0, time.time())
    backfilled = _rounds(url)
    source = PrometheusSource(Settings(), PrometheusSettings(url=server.url))
    writer = Writer(engine)
    live: dict[str, int] = {}
    deadline = time.monotonic() + 60  # a safety net: ends once each target has 3 live rounds
    while (len(live) < SIMS or min(live.values()) < 3) and time.monotonic() < deadline:
        for r in source.read().rounds:
            if writer.write_rounds([r]):
                live[r.target] = live.get(r.target, 0) + 1
        time.sleep(0.6)
    writer.close()
    source.close()
    s, m = schema.samples, schema.models
    with engine.connect() as conn:
        covered = conn.execute(select(m.c.target_id, s.c.ts, s.c.covered_ms).join(m, s.c.model_id == m.c.id)
                               .order_by(m.c.target_id, s.c.ts)).all()  # fmt: skip
        nulls = conn.execute(select(func.count()).where(s.c.covered_ms.is_(None))).scalar()
    engine.dispose()
    rows = _rounds(url)
    assert len(rows) == len(set(rows)) and min(live.values()) >= 3
    # the ~30 s the backfill left to settle are covered by the first live row: its increase spans them
    for target in {t for t, _ in backfilled}:
        last_backfilled = max(ts for t, ts in backfilled if t == target)
        (ts, covered_ms), *_ = [(ts, c) for t, ts, c in covered if t == target and ts > last_backfilled]
        assert covered_ms == (ts - last_backfilled) * 1000 and ts - last_backfilled >= VM_LATENCY_OFFSET_S - 2
    assert nulls == SIMS  # only each target's very first row is a baseline


def test_a_query_over_its_points_limit_is_halved_until_it_fits(tmp_path):
    """-search.maxPointsPerTimeseries (30,000 by default) refuses a longer range with 422, as Prometheus
    does past 11,000 points: the backfill halves its chunk until an answer fits."""
    sim = start_simulator(SimOptions(port=0, seed=5, speed=20))
    server = VictoriaServer(tmp_path, [sim.urls["vllm_metrics"]],
                            extra_flags=["-search.maxPointsPerTimeseries=4", "-search.latencyOffset=1s"])  # fmt: skip
    try:
        server.wait_for_targets(1)
        first = time.time()
        deadline = time.monotonic() + 60  # a safety net: ends once 8 s are stored
        while time.time() - first < 8:
            assert time.monotonic() < deadline
            time.sleep(0.3)
        with pytest.raises(httpx.HTTPStatusError):  # the limit, as the server applies it
            httpx.get(server.url + "/api/v1/query_range", params={"query": "up", "start": first, "end": first + 6,
                                                                  "step": 1}).raise_for_status()  # fmt: skip
        engine = open_engine(f"sqlite:///{tmp_path}/l.db")
        result = backfill(engine, PrometheusSettings(url=server.url), 6.0, 1.0, time.time())
        engine.dispose()
        assert result.rounds == int(result.end - result.start) >= 4  # every step, in chunks of 4 at most
    finally:
        server.stop()
        sim.stop()
