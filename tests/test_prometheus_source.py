"""The Prometheus source against Debian's real prometheus scraping simulators on 127.0.0.1."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from app.prometheus_source import PrometheusSource
from collectors.prometheus import UNDERSCORE_FORM, PrometheusClient, split_federate
from collectors.vllm import parse_vllm
from core.settings import PrometheusSettings, Settings
from db import schema
from db.engine import open_engine
from db.queries import Reader
from db.writer import Writer
from simulator import SimOptions, start_simulator
from simulator.options import DEFAULT_MODEL
from tests.prometheus_server import PrometheusServer
from tests.support.http_server import serving

SIMS = 3


def _complete(sim, tokens: int = 12) -> None:
    body = {"model": DEFAULT_MODEL, "prompt": "hello there", "max_tokens": tokens, "ignore_eos": True}
    assert httpx.post(sim.urls["openai_base"] + "/completions", json=body, timeout=60).status_code == 200


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Iterator[tuple[PrometheusServer, list]]:
    sims = [start_simulator(SimOptions(port=0, seed=i, speed=20)) for i in range(SIMS)]
    for sim in sims:
        _complete(sim)
    server = PrometheusServer(tmp_path_factory.mktemp("prom"), [s.urls["vllm_metrics"] for s in sims])
    try:
        server.wait_for_targets(SIMS)
        yield server, sims
    finally:
        server.stop()
        for sim in sims:
            sim.stop()


def _instance(sim) -> str:
    return sim.urls["vllm_metrics"].split("/")[2]


def _source(url: str, **changes) -> PrometheusSettings:
    return dataclasses.replace(PrometheusSettings(url=url), **changes)


def _settings(tmp_path: Path, *sources: PrometheusSettings) -> Settings:
    return Settings(db_url=f"sqlite:///{tmp_path}/p.db", prometheus=sources, scrape_timeout_s=5.0)


def _settled(server: PrometheusServer) -> None:
    """Until Prometheus has scraped every target twice more: the second of those scrapes began after
    the first was stored, so after this call, and every completion made before it is in its latest samples."""
    for _ in range(2):
        before = _scrape_times(server)
        _until(lambda seen=before: all(t > seen[i] for i, t in _scrape_times(server).items()), "one more scrape of every target")


def _scrape_times(server: PrometheusServer) -> dict[str, float]:
    return {r["metric"]["instance"]: float(r["value"][1]) for r in server.query("timestamp(up)")}


def _until(done: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s  # a safety net: returns as soon as the condition holds
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_every_target_is_discovered_and_reads_as_a_direct_scrape(fleet, tmp_path):
    server, sims = fleet
    _settled(server)
    source = PrometheusSource(_settings(tmp_path), _source(server.url))
    read = source.read()
    assert read.error is None
    assert sorted(t.name for t in read.discovered) == sorted(_instance(s) for s in sims)
    by_target = {r.target: r for r in read.rounds}
    for sim in sims:
        direct = parse_vllm(httpx.get(sim.urls["vllm_metrics"]).text)
        through = by_target[_instance(sim)].vllm
        assert through is not None and through.models.keys() == direct.models.keys()
        for model, figures in direct.models.items():
            assert through.models[model].counters == figures.counters
            assert through.models[model].histograms == figures.histograms
            assert through.models[model].created == figures.created
        assert through.process_start_time_s == direct.process_start_time_s
        # the simulator answers Prometheus 2.42's OpenMetrics request with vllm_x sample names
        assert set(through.metric_names_used.values()) == {n.replace("vllm:", "vllm_") for n in direct.metric_names_used.values()}
    source.close()


def test_the_query_api_reads_the_same_as_federate(fleet, tmp_path):
    server, _ = fleet
    _settled(server)
    federate = PrometheusSource(_settings(tmp_path), _source(server.url))
    query = PrometheusSource(_settings(tmp_path), _source(server.url))
    query.client.federate = False  # as against Thanos or Mimir, which have no /federate
    started = time.monotonic()
    by_federate = {r.target: r for r in federate.read().rounds}
    by_query = {r.target: r for r in query.read().rounds}
    between = time.monotonic() - started  # scrapes Prometheus made between the two reads, at 1 s each
    assert by_query.keys() == by_federate.keys()
    for target, round_ in by_federate.items():
        assert by_query[target].vllm == round_.vllm
        # both the scrape time of Prometheus: the same scrape, or one made while the reads ran
        assert abs(by_query[target].ts - round_.ts) <= between + 1.0 + 0.1
    federate.close()
    query.close()


def test_the_job_stores_discovered_targets_with_the_form_of_their_names(fleet, tmp_path):
    from app.collection import CollectionService

    server, sims = fleet
    service = CollectionService(_settings(tmp_path, _source(server.url)))
    try:
        for _ in range(3):
            lines = service.prometheus[0].run()
            assert all("DOWN" not in line for line in lines)
            time.sleep(1.1)
    finally:
        service.close()
    infos = {t.name: t for t in Reader(f"sqlite:///{tmp_path}/p.db").targets()}
    assert set(infos) == {_instance(s) for s in sims}
    for info in infos.values():
        assert info.discovered_by == server.url and info.up
        assert info.vllm_url == f'prometheus {server.url} instance="{info.name}"'
        assert info.metric_names_used["generation_tokens"] == "vllm_generation_tokens_total"
    from app.fleet import names_form

    assert {names_form(i) for i in infos.values()} == {UNDERSCORE_FORM}


def test_rounds_are_stored_at_prometheus_scrape_times_with_their_covered_time(fleet, tmp_path):
    server, sims = fleet
    settings = _settings(tmp_path)
    engine = open_engine(settings.db_url)
    writer = Writer(engine)
    source = PrometheusSource(settings, _source(server.url))
    handed: dict[str, list[tuple[float, bool]]] = {_instance(s): [] for s in sims}  # target → (time, up) per round read
    deadline = time.monotonic() + 60  # a safety net: ends once every target has 5 rows stored
    while min(len(_stored(rounds)) for rounds in handed.values()) < 5 and time.monotonic() < deadline:
        read = source.read()
        writer.write_rounds(read.rounds)
        for round_ in read.rounds:
            handed[round_.target].append((round_.ts, round_.vllm is not None and bool(round_.vllm.models)))
        time.sleep(0.4)  # faster than Prometheus scrapes: a target Prometheus did not scrape again gives no round
    source.close()
    writer.close()
    s, m, t = schema.samples, schema.models, schema.targets
    with engine.connect() as conn:
        rows = conn.execute(select(t.c.name, s.c.ts, s.c.covered_ms).join(m, s.c.model_id == m.c.id)
                            .join(t, m.c.target_id == t.c.id).order_by(t.c.name, s.c.ts)).all()
    engine.dispose()
    for target, rounds in handed.items():
        kept = _stored(rounds)
        assert len(kept) >= 5, f"{target}: {rounds}"
        scraped = {round(float(v[0]) * 1000) for v in server.query(f'up{{instance="{target}"}}[5m]')[0]["values"]}
        assert all(round(ts * 1000) in scraped for ts in kept)  # Prometheus's own scrape times
        # each row covers the time since the previous stored round, measured from the scrape times
        # (not the whole seconds the rows are keyed by); the first is a baseline
        covered = [int(round((b - a) * 1000)) for a, b in zip(kept, kept[1:], strict=False)]
        assert [(ts, c) for name, ts, c in rows if name == target] == list(zip([int(round(k)) for k in kept],
                                                                            [None, *covered], strict=True))


def _stored(rounds: list[tuple[float, bool]]) -> list[float]:
    """The times of the rounds, (time, up) in the order read, whose model rows the writer stores: one
    in the second of the last stored round is skipped (docs/storage.md); a failed scrape has no models."""
    kept: list[tuple[float, bool]] = []
    for ts, up in rounds:
        if not kept or int(round(ts)) > int(round(kept[-1][0])):
            kept.append((ts, up))
    return [ts for ts, up in kept if up]


def test_a_counter_reset_seen_through_prometheus_counts_the_new_value(tmp_path):
    # vLLM restarts every 3 s of wall time (60 simulated seconds at speed 20), under load
    sim = start_simulator(SimOptions(port=0, seed=3, speed=20, load=2, restart_every_s=60))
    server = PrometheusServer(tmp_path, [sim.urls["vllm_metrics"]])
    settings = _settings(tmp_path)
    engine = open_engine(settings.db_url)
    writer = Writer(engine)
    source = PrometheusSource(settings, _source(server.url))
    cumulative: list[tuple[float, float | None]] = []  # (value, its *_created) per round
    stored = 0  # how many of them up to the last one the writer stored

    def resets() -> list[bool]:
        return [b < a or bc != ac for (a, ac), (b, bc) in zip(cumulative, cumulative[1:], strict=False)]

    try:
        server.wait_for_targets(1)
        deadline = time.monotonic() + 90  # a safety net: ends once two restarts were seen (about 6 s)
        while resets().count(True) < 2 and time.monotonic() < deadline:
            for round_ in source.read().rounds:
                if round_.vllm is not None and round_.vllm.models:
                    figures = next(iter(round_.vllm.models.values()))
                    cumulative.append((figures.counters["generation_tokens"], figures.created.get("generation_tokens")))
                    stored = len(cumulative) if writer.write_rounds([round_]) else stored
                else:
                    writer.write_round(round_)
            time.sleep(0.5)  # Prometheus scrapes every second: a read in between gives no round
    finally:
        source.close()
        writer.close()
        server.stop()
        sim.stop()
    assert resets().count(True) >= 2, f"no two resets seen through Prometheus: {cumulative}"
    # reset-aware: after a restart the increase is the new value. Every round read up to the last one
    # stored counts, those the writer skipped too (two scrapes rounded to the same second): their
    # increases are carried into the next stored row (those after the last one are not stored yet).
    upto = cumulative[:stored]
    expected = sum(b if reset else b - a for (a, _), (b, _), reset in zip(upto, upto[1:], resets(), strict=False))
    with engine.connect() as conn:
        increases = conn.execute(select(schema.samples.c.generation_tokens)).scalars().all()
    engine.dispose()
    assert all(v is None or v >= 0 for v in increases)
    assert sum(v for v in increases if v is not None) == pytest.approx(expected)


def test_a_target_that_disappears_is_down_after_gone_after_s(tmp_path):
    sims = [start_simulator(SimOptions(port=0, seed=i)) for i in range(2)]
    server = PrometheusServer(tmp_path, [s.urls["vllm_metrics"] for s in sims])
    settings = _settings(tmp_path, _source(server.url, gone_after_s=2.0))
    from app.collection import CollectionService

    service = CollectionService(settings)
    try:
        server.wait_for_targets(2)
        service.prometheus[0].run()
        server.scrape([sims[0].urls["vllm_metrics"]])  # the second one is no longer scraped
        # a safety net: ends once the target reads DOWN for being absent (Prometheus reloads its config
        # first). Not on any DOWN: the reload can cancel the removed target's last scrape, and Prometheus
        # then serves up = 0 for it once ("Prometheus cannot scrape it"), a true down round of its own
        # before the series goes stale and the target is absent for gone_after_s.
        deadline = time.monotonic() + 90
        lines: list[str] = []
        while time.monotonic() < deadline and not any("DOWN" in line and "absent from Prometheus's answer" in line
                                                       for line in lines):  # fmt: skip
            time.sleep(0.5)
            lines = service.prometheus[0].run()
    finally:
        service.close()
        server.stop()
        for sim in sims:
            sim.stop()
    infos = {t.name: t for t in Reader(settings.db_url).targets()}
    gone, kept = infos[_instance(sims[1])], infos[_instance(sims[0])]
    assert gone.up is False and gone.last_error is not None and "absent from Prometheus's answer" in gone.last_error
    assert kept.up is True



def test_a_target_that_vanished_while_the_collector_was_stopped_is_marked_down(tmp_path):
    """The targets an earlier run found are taken up from the database: one absent from the answers
    after the restart gets its down round after gone_after_s, as if the collector had never stopped."""
    from app.collection import CollectionService

    def page(*instances: str) -> str:
        ms = int(time.time() * 1000)
        return "".join(f'vllm:num_requests_running{{instance="{i}",job="vllm",model_name="m"}} 1 {ms}\n'
                       for i in instances)

    routes: dict[str, tuple[int, object]] = {"/federate": (200, page("a:1", "b:1"))}
    with serve(routes) as url:
        settings = _settings(tmp_path, _source(url, gone_after_s=0.5))
        first = CollectionService(settings)
        first.prometheus[0].run()
        first.close()
        routes["/federate"] = (200, page("a:1"))  # b:1 went away while no collector ran
        # past gone_after_s even from b:1's stored round, whose time is rounded to the second (up to 0.5 s later)
        time.sleep(1.2)
        second = CollectionService(settings)
        try:
            lines = second.prometheus[0].run()
            again = second.prometheus[0].run()
        finally:
            second.close()
    assert sum("b:1" in line and "DOWN" in line for line in lines) == 1, lines
    assert not any("b:1" in line for line in again)  # once, not every round
    infos = {t.name: t for t in Reader(settings.db_url).targets()}
    assert infos["b:1"].up is False and "absent from Prometheus's answer" in (infos["b:1"].last_error or "")
    assert infos["a:1"].up is True


def test_gateway_and_dcgm_selectors_join_their_series_to_the_target(tmp_path):
    """Through a real Prometheus scraping a simulator's three pages: the gateway's queue depth and
    the eight dcgm GPUs reach the target the vLLM series name, joined on the target label."""
    sim = start_simulator(SimOptions(port=0, seed=5))
    pages = [sim.urls["vllm_metrics"], sim.urls["gateway_metrics"], sim.urls["dcgm_metrics"]]
    server = PrometheusServer(tmp_path, pages)
    source = PrometheusSource(Settings(scrape_timeout_s=5.0), _source(
        server.url, selector='{job="vllm",__name__=~"vllm:.*|up"}', gateway_selector="sweetspot_gateway_queue_depth",
        dcgm_selector='{__name__=~"DCGM_.*"}'))  # fmt: skip
    try:
        server.wait_for_targets(1)
        deadline = time.monotonic() + 90  # a safety net: ends once all three pages were scraped
        while True:  # until Prometheus has scraped all three pages once
            read = source.read()
            # each page's series appear once Prometheus scraped it; under load the gateway's can lag
            status = read.rounds[0].gateway_status if read.rounds else None
            done = read.rounds and read.rounds[0].gpus and status is not None and status.ok
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        source.close()
        server.stop()
        sim.stop()
    (round_,) = read.rounds
    assert round_.target == _instance(sim) and round_.gateway_status is not None and round_.gateway_status.ok
    assert round_.gateway is not None and round_.gateway.queue_depth == 0.0  # no load: nothing waits
    assert len(round_.gpus) == 8 and round_.gpu_status is not None and round_.gpu_status.ok


def test_a_gateway_selector_that_misses_a_target_says_which_label_it_wanted(tmp_path):
    sim = start_simulator(SimOptions(port=0, seed=6))
    server = PrometheusServer(tmp_path, [sim.urls["vllm_metrics"]])
    source = PrometheusSource(Settings(scrape_timeout_s=5.0), _source(
        server.url, gateway_selector="sweetspot_gateway_queue_depth"))  # fmt: skip
    try:
        server.wait_for_targets(1)
        read = source.read()
    finally:
        source.close()
        server.stop()
        sim.stop()
    (round_,) = read.rounds
    status = round_.gateway_status
    assert status is not None and not status.ok
    assert status.error == f'no sweetspot_gateway_queue_depth series with instance="{_instance(sim)}"'

# -- errors that name the fix -------------------------------------------------------------------------
def routes_handler(routes: dict[str, tuple[int, object]], delay_s: float = 0.0) -> type[BaseHTTPRequestHandler]:
    """A handler answering ``routes`` (path without query → status, JSON or text), 404 elsewhere."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            time.sleep(delay_s)
            status, body = routes.get(self.path.split("?", 1)[0], (404, "404 page not found"))
            data = (json.dumps(body) if isinstance(body, dict) else str(body)).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up (the timeout test)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@contextmanager
def serve(routes: dict[str, tuple[int, object]], delay_s: float = 0.0) -> Iterator[str]:
    """A loopback server answering ``routes`` (:func:`routes_handler`)."""
    with serving(routes_handler(routes, delay_s)) as base:
        yield base


def _error(url: str, timeout_s: float = 10.0, **changes) -> str:
    """The error one read of ``url`` stores. ``timeout_s`` is generous for answers that come at once: on
    a machine loaded by the whole suite a local 503 took over 1 s and read as a timeout."""
    source = PrometheusSource(Settings(scrape_timeout_s=timeout_s), _source(url, **changes))
    try:
        read = source.read()
    finally:
        source.close()
    assert read.error is not None and not read.rounds
    return read.error


def test_an_unreachable_prometheus_names_the_url_setting():
    from tests.support.http_server import closed_port_url

    url = closed_port_url().removesuffix("/metrics")
    assert _error(url) == f"cannot reach Prometheus at {url} (connection refused). Is Prometheus running? Check prometheus[].url"


def test_a_selector_that_matches_nothing(fleet):
    server, _ = fleet
    error = _error(server.url, selector='{job="nope"}')
    assert error.startswith('the selector {job="nope"} matches no series at http://127.0.0.1:')
    assert "Check prometheus[].selector" in error


def test_series_without_the_target_label_name_the_setting(fleet):
    server, _ = fleet
    error = _error(server.url, target_label="pod")
    assert "have no label pod (e.g. " in error and "Set prometheus[].target_label" in error


def test_a_malformed_selector_is_refused_with_the_selector_setting(fleet):
    server, _ = fleet
    error = _error(server.url, selector="{job=")
    assert "400" in error and "Check prometheus[].selector" in error


def test_answers_422_and_503_and_slow_ones_name_the_fix():
    refused = {"status": "error", "errorType": "execution",
               "error": "query processing would load too many samples into memory in query execution"}
    with serve({"/api/v1/query": (422, refused)}) as url:
        error = _error(url)
        assert "refused the query (422: query processing would load too many samples" in error
        assert "Narrow prometheus[].selector" in error and "--query.max-samples" in error
    with serve({"/federate": (503, {"status": "error", "error": "query timed out"})}) as url:
        error = _error(url)
        assert "could not answer (503: query timed out)" in error and "--query.timeout" in error
    with serve({"/federate": (200, "")}, delay_s=3.0) as url:
        assert _error(url, timeout_s=1.0) == f"Prometheus at {url} did not answer within 1 s. Raise scrape_timeout_s, or narrow prometheus[].selector"


def test_split_federate_reads_both_name_forms_and_keeps_labels_apart():
    text = (
        '# TYPE vllm:num_requests_running untyped\n'
        'vllm:num_requests_running{exported_instance="x",instance="a:1",job="vllm",model_name="m"} 3 1700000000000\n'
        'vllm_num_requests_running{instance="b:1",job="vllm",model_name="m"} 4 1700000001000\n'
        'vllm:num_requests_running{job="vllm",model_name="m"} 5 1700000001000\n'
    )
    answer = split_federate(text, "instance")
    assert answer.pages["a:1"].lines == ['vllm:num_requests_running{exported_instance="x",job="vllm",model_name="m"} 3']
    assert answer.pages["a:1"].names_form == "vllm:x" and answer.pages["b:1"].names_form == UNDERSCORE_FORM
    assert answer.pages["b:1"].ts_ms == 1700000001000
    assert answer.unlabelled_count == 1
    assert parse_vllm(answer.pages["b:1"].text).models["m"].gauges["requests_running"] == 4


def test_basic_auth_in_the_url_and_a_bearer_token_are_sent(tmp_path):
    with serve({"/federate": (401, "unauthorized")}) as url:
        with_user = url.replace("http://", "http://me:secret@")
        source = _source(with_user, http=dataclasses.replace(PrometheusSettings().http, bearer_token="tok"))
        client = PrometheusClient(source, 10.0)
        assert client.base == url and client.client.auth is not None
        assert client.client.headers["Authorization"] == "Bearer tok"
        with pytest.raises(Exception) as caught:
            client.current("{}", "instance")
        assert "answered 401" in str(caught.value) and "me:secret" not in str(caught.value)
        client.close()


def test_the_job_keeps_going_when_prometheus_is_down(tmp_path):
    from app.collection import CollectionService
    from tests.support.http_server import closed_port_url

    url = closed_port_url().removesuffix("/metrics")
    service = CollectionService(_settings(tmp_path, _source(url)))
    try:
        lines = service.prometheus[0].run()
        assert lines == [f"prometheus {url}: cannot reach Prometheus at {url} (connection refused). "
                         "Is Prometheus running? Check prometheus[].url"]
        assert [job.name for job in service.jobs()][-1] == f"prometheus {url}"
    finally:
        service.close()


def test_the_prometheus_client_goes_through_the_configured_proxy():
    """`[[prometheus]].http` is the same HttpSettings as a target's: a proxy carries its requests."""
    import threading

    from core.settings import HttpSettings
    from tests.test_http_client import PathServer, ProxyHandler

    series = {"status": "success", "data": {"resultType": "vector", "result": []}}
    with serve({"/federate": (404, "no"), "/api/v1/query": (200, series)}) as url:
        proxy = PathServer(ProxyHandler)
        threading.Thread(target=proxy.serve_forever, args=(0.05,), daemon=True).start()
        try:
            proxy_url = f"http://127.0.0.1:{proxy.server_address[1]}"
            client = PrometheusClient(_source(url, http=HttpSettings(proxy=proxy_url)), 2.0)
            client.query("up")
            client.close()
        finally:
            proxy.shutdown()
            proxy.server_close()
    assert proxy.paths and all(p.startswith(url) for p in proxy.paths)  # asked the proxy, not the server


def test_a_dead_proxy_is_named_with_its_setting():
    from core.settings import HttpSettings
    from tests.support.http_server import closed_port_url

    dead = closed_port_url().removesuffix("/metrics")
    message = _error("http://127.0.0.1:9", http=HttpSettings(proxy=dead))
    assert f"through the proxy {dead}" in message and "prometheus[].http.proxy" in message


def test_tls_verify_false_reads_a_self_signed_prometheus(tmp_path, caplog):
    import threading
    from http.server import ThreadingHTTPServer

    from core.settings import HttpSettings
    from tests.support.certificates import make_certificate, serve_tls

    series = {"status": "success", "data": {"resultType": "vector", "result": []}}
    server = ThreadingHTTPServer(("127.0.0.1", 0), routes_handler({"/api/v1/query": (200, series)}))
    serve_tls(server, make_certificate(tmp_path))
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    url = f"https://127.0.0.1:{server.server_address[1]}"
    try:
        strict = PrometheusClient(_source(url), 10.0)  # the loaded CI machine: a handshake may wait for a core
        with pytest.raises(Exception, match="certificate"):
            strict.query("up")
        strict.close()
        with caplog.at_level("WARNING"):
            lax = PrometheusClient(_source(url, http=HttpSettings(tls_verify=False)), 10.0)
        assert lax.query("up") == []
        lax.close()
        assert "TLS certificates are not verified" in caplog.text
    finally:
        server.shutdown()
        server.server_close()
