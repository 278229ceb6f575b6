"""Redirects, with two real servers on 127.0.0.1 (another port is another origin): followed within
the origin with the source's credentials; to another origin refused, or (when the setting allows it)
followed without the headers, bearer token or basic auth, checked on what the second server received."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from collectors.fetch import Fetcher
from collectors.prometheus import PrometheusClient
from core.errors import ScrapeError
from core.settings import HttpSettings, PrometheusSettings
from tests.support.http_server import CountingServer, started

PAGE = b'vllm:num_requests_running{model_name="m"} 3\n'
QUERY = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
SECRETS = ("hdr-s3cret", "tok-s3cret", "basic-s3cret")
CREDENTIALS = HttpSettings(headers={"X-Api-Key": "hdr-s3cret"}, bearer_token="tok-s3cret")


class Recorder(CountingServer):
    """Answers ``moved`` paths with a 302 to their location, others with a page; keeps every request's
    path and headers."""

    def __init__(self, moved: dict[str, str]) -> None:
        super().__init__(_Handler)
        self.moved = moved
        self.received: list[tuple[str, dict[str, str]]] = []


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Recorder

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.server.received.append((self.path, dict(self.headers.items())))
        location = self.server.moved.get(self.path.split("?")[0])
        body = b"" if location else QUERY if self.path.startswith("/api/") else PAGE
        self.send_response(302 if location else 200)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def servers() -> Iterator[Callable[..., Recorder]]:
    yield from started(lambda moved=None: Recorder(moved or {}))


@pytest.fixture
def fetcher() -> Iterator[Fetcher]:
    fetcher = Fetcher()
    yield fetcher
    fetcher.close()


def _with_basic(url: str) -> str:
    return url.replace("http://", "http://reader:basic-s3cret@")


def _leaked(server: Recorder) -> list[str]:
    return [s for s in SECRETS for _, headers in server.received
            if any(s in value or "Basic " in value or "Bearer " in value for value in headers.values())]


def test_a_redirect_within_the_origin_keeps_the_credentials(servers, fetcher) -> None:
    first = servers({"/old": "/metrics"})
    assert fetcher.fetch(_with_basic(first.url("/old")), 5.0, CREDENTIALS) == PAGE.decode()
    (path, headers), = [r for r in first.received if r[0] == "/metrics"]
    assert headers["X-Api-Key"] == "hdr-s3cret" and headers["Authorization"].startswith("Basic ")


def test_a_redirect_to_another_origin_is_refused_by_default(servers, fetcher) -> None:
    second = servers()
    first = servers({"/metrics": second.url("/metrics?token=redirect-s3cret")})
    with pytest.raises(ScrapeError) as caught:
        fetcher.fetch(_with_basic(first.url()), 5.0, CREDENTIALS, hint="Check targets[].vllm_url")
    line = caught.value.one_line()
    assert "redirects to another origin" in line and "follow_redirects_across_origins" in line
    assert second.url("/metrics?token=***") in line and "s3cret" not in line
    assert second.received == []  # nothing at all reached the other origin


def test_when_allowed_no_credential_crosses_to_the_other_origin(servers, fetcher) -> None:
    second = servers({"/back": "/metrics"})  # and a hop within that other origin
    first = servers({"/metrics": second.url("/back")})
    http = HttpSettings(headers={"X-Api-Key": "hdr-s3cret"}, bearer_token="tok-s3cret", follow_redirects_across_origins=True)
    assert fetcher.fetch(_with_basic(first.url()), 5.0, http) == PAGE.decode()
    assert [path for path, _ in second.received] == ["/back", "/metrics"]
    assert _leaked(second) == [] and "X-Api-Key" not in second.received[0][1]
    assert first.received[0][1]["X-Api-Key"] == "hdr-s3cret"  # the first origin got them, as configured


@pytest.mark.parametrize("allowed", [False, True])
def test_a_prometheus_source_follows_the_same_policy(servers, allowed: bool) -> None:
    second = servers()
    first = servers({"/api/v1/query": second.url("/api/v1/query?query=up")})
    http = HttpSettings(headers={"X-Api-Key": "hdr-s3cret"}, bearer_token="tok-s3cret",
                        follow_redirects_across_origins=allowed)
    client = PrometheusClient(PrometheusSettings(url=_with_basic(first.url("")), http=http), 5.0)
    try:
        if allowed:
            assert client.query("up") == []
            assert len(second.received) == 1 and _leaked(second) == []
        else:
            with pytest.raises(ScrapeError, match="redirects to another origin"):
                client.query("up")
            assert second.received == []
    finally:
        client.close()


def test_the_collector_says_so_in_one_line(servers, tmp_path: Path, capsys) -> None:
    from app.cli import main

    second = servers()
    first = servers({"/metrics": second.url()})
    config = tmp_path / "sweetspot.toml"
    config.write_text(f'db_url = "sqlite:///{tmp_path}/r.db"\n[[targets]]\nname = "moved"\n'
                      f'vllm_url = "{first.url()}"\nhttp.headers = {{ X-Api-Key = "hdr-s3cret" }}\n')
    assert main(["--config", str(config), "collect", "--once"]) == 1
    out = capsys.readouterr()
    assert "redirects to another origin" in out.out + out.err and "s3cret" not in out.out + out.err
    assert second.received == []
