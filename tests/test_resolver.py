"""Host lookups of the scrape client: bounded in time, off the round's thread, kept a minute.

The system resolver is replaced by a function that answers for made-up names (``*.test``) with
127.0.0.1, hangs, or fails, as DNS can; numbers go to the real one. The servers are real, on 127.0.0.1.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from app.errors import ScrapeError
from app.jobs import RoundCollector
from app.settings import Settings, TargetSettings
from collectors.http import ScrapeClient, receive_text
from tests.support.http_server import closed_port_url, started
from tests.support.sources import Sources

REAL_GETADDRINFO = socket.getaddrinfo


class FakeDns:
    """``socket.getaddrinfo`` for ``*.test`` names: ``hang.test`` waits for ``release``, ``nx.test``
    does not exist, any other name is 127.0.0.1. Counts the lookups of each name."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lookups: dict[str, int] = {}

    def __call__(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if not str(host).endswith(".test"):
            return REAL_GETADDRINFO(host, port, *args, **kwargs)
        if len(args) > 3 and args[3] & socket.AI_NUMERICHOST:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        self.lookups[host] = self.lookups.get(host, 0) + 1
        if host == "hang.test":
            self.release.wait(20)
        if host == "nx.test":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return REAL_GETADDRINFO("127.0.0.1", port, *args, **kwargs)


@pytest.fixture
def dns(monkeypatch) -> Iterator[FakeDns]:
    fake = FakeDns()
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    yield fake
    fake.release.set()


@pytest.fixture
def server() -> Iterator[Sources]:
    for make in started(lambda: Sources({})):
        yield make()


def _timed(collect: Callable[[], Any]) -> tuple[Any, float]:
    start = time.monotonic()
    return collect(), time.monotonic() - start


def test_a_hanging_lookup_costs_its_target_the_timeout_once_and_no_other_target(dns, server) -> None:
    port = server.server_address[1]
    slow = TargetSettings(name="slow", vllm_url=f"http://hang.test:{port}/metrics")
    good = TargetSettings(name="good", vllm_url=server.url("/metrics"))
    collector = RoundCollector(Settings(targets=(slow, good), scrape_timeout_s=0.5))
    try:
        first, first_s = _timed(lambda: list(collector.collect_all((slow, good))))
        again, again_s = _timed(lambda: list(collector.collect_all((slow, good))))
        dns.release.set()  # the lookup answers at last: the next round uses it
        time.sleep(0.1)
        after = collector.collect(slow)
    finally:
        collector.close()
    by_name = {r.target: r for r in first + again}
    assert first_s < 1.2 and again_s < 0.3  # the timeout once; then the lookup under way is not waited for
    assert all(r.vllm_status.ok for r in (first + again) if r.target == "good") and by_name["good"].vllm_status.ok
    errors = [r.vllm_status.error or "" for r in first + again if r.target == "slow"]
    assert "looking up hang.test: no answer within 0.5 s (DNS)" in errors[0]
    assert "looking up hang.test: no answer for" in errors[1]
    assert after.vllm_status.ok and dns.lookups["hang.test"] == 1


def test_https_lookups_are_bounded_and_run_side_by_side(dns) -> None:
    # HTTPS GETs go through http.client, which would look the host up itself for as long as the
    # resolver likes, one GET after the other: two hanging lookups held the round 2 × 20 s.
    client = ScrapeClient()
    try:
        pendings = [client.send(f"https://hang.test:{port}/metrics", 0.4) for port in (8443, 9443)]
        start = time.monotonic()
        errors = []
        for pending in client.arrivals(pendings):
            with pytest.raises(ScrapeError) as caught:
                receive_text(client, pending)
            errors.append(str(caught.value))
        took = time.monotonic() - start
    finally:
        client.close()
    assert took < 0.7  # one timeout for both, not one each
    assert len(errors) == 2 and all("looking up hang.test: no answer within 0.4 s (DNS)" in e for e in errors)


def test_answers_and_failures_are_kept_instead_of_asked_every_round(dns, server) -> None:
    # A target down by name has no kept-alive connection: without the kept answer, every round
    # would look its host up again.
    down = TargetSettings(name="down", vllm_url=closed_port_url().replace("127.0.0.1", "down.test"))
    missing = TargetSettings(name="missing", vllm_url="http://nx.test:9/metrics")
    up = TargetSettings(name="up", vllm_url=server.url("/metrics").replace("127.0.0.1", "up.test"))
    collector = RoundCollector(Settings(targets=(down, missing, up)))
    try:
        rounds = [r for _ in range(3) for r in collector.collect_all((down, missing, up))]
    finally:
        collector.close()
    errors = {r.target: r.vllm_status.error or "" for r in rounds}
    assert "connection refused" in errors["down"] and "unknown host" in errors["missing"]
    assert [r.vllm_status.ok for r in rounds if r.target == "up"] == [True, True, True]
    assert dns.lookups == {"down.test": 1, "nx.test": 1, "up.test": 1}


def test_a_refresh_that_fails_leaves_the_last_answer_in_use(dns, monkeypatch) -> None:
    # DNS going down must not turn a host that was found a minute ago into an unknown one.
    from collectors import resolver

    monkeypatch.setattr(resolver, "KEEP_S", 0.05)
    lookups = resolver.Resolver()
    first = lookups.addresses("flip.test", 80, 1.0)
    original = socket.getaddrinfo

    def now_failing(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "flip.test" and not (len(args) > 3 and args[3] & socket.AI_NUMERICHOST):
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return original(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", now_failing)
    time.sleep(0.1)
    stale = lookups.addresses("flip.test", 80, 1.0)  # stale: served, while a refresh runs (and fails)
    time.sleep(0.2)
    after_failed_refresh = lookups.addresses("flip.test", 80, 1.0)
    assert first == stale == after_failed_refresh and first[0][4][0] == "127.0.0.1"
