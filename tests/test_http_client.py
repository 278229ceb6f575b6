"""The fetcher (httpx) against real servers on 127.0.0.1: framing, keep-alive, failures, deadlines,
and the HTTP settings: headers, bearer token, basic auth, CA file, TLS verification, proxy."""

from __future__ import annotations

import base64
import http.client
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

import pytest

from collectors import fetch
from collectors.fetch import Fetcher, Get, fetch_text
from core.errors import ScrapeError
from core.settings import HttpSettings
from tests.support.certificates import make_certificate, tls_connection, tls_context
from tests.support.http_server import CountingServer, started
from tests.support.ports import refused_port

PAGE = b"".join(b"vllm:num_requests_running{engine=\"%d\"} %d\n" % (i, i) for i in range(2000))


class PathServer(CountingServer):
    """Counts connections and keeps the path of every request."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(handler)
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: PathServer
    mode = "length"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.server.paths.append(self.path)
        self.server.headers.append(dict(self.headers.items()))
        body = PAGE
        if self.mode == "error":
            self.send_response(500)
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"oops\n")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        if self.mode == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            # Uneven chunks, one with an extension, then a trailer field: all of it is legal HTTP/1.1.
            pieces = [body[:1], body[1:7000], body[7000:7001], body[7001:]]
            for i, piece in enumerate(pieces):
                ext = b";name=value" if i == 1 else b""
                self.wfile.write(b"%x%s\r\n%s\r\n" % (len(piece), ext, piece))
            self.wfile.write(b"0\r\nX-Trailer: yes\r\n\r\n")
            return
        if self.mode == "until-close":  # HTTP/1.0 style: no length, the close ends the body
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True
            return
        if self.mode == "drop-body":
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[:1000])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        if self.mode == "drop-chunked":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"%x\r\n%s" % (len(body), body[:1000]))
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        self.send_header("Content-Length", str(len(body)))
        if self.mode == "close":
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        if self.mode in ("close", "idle-close"):
            # idle-close: the server drops the connection without saying so, as idle timeouts do.
            self.close_connection = True


@pytest.fixture
def serve() -> Iterator[Callable[[str], PathServer]]:
    yield from started(lambda mode: PathServer(type(f"Handler_{mode}", (Handler,), {"mode": mode})))


@pytest.fixture
def fetcher() -> Iterator[Fetcher]:
    fetcher = Fetcher()
    yield fetcher
    fetcher.close()


def url(server: PathServer | socket.socket, path: str = "/metrics") -> str:
    address = server.server_address if isinstance(server, PathServer) else server.getsockname()
    return f"http://127.0.0.1:{address[1]}{path}"


def test_content_length_and_keep_alive_reuse(serve, fetcher) -> None:
    server = serve("length")
    for _ in range(5):
        assert fetcher.fetch(url(server, "/metrics?x=1"), 2.0) == PAGE.decode()
    assert server.accepted == 1
    assert server.paths == ["/metrics?x=1"] * 5
    assert server.headers[0]["Accept"].startswith("text/plain;version=0.0.4")


def test_each_url_keeps_its_own_path_and_query(serve, fetcher) -> None:
    server = serve("length")
    for _ in range(2):
        for path in ("/metrics", "/metrics?x=2", "/other"):
            assert fetcher.fetch(url(server, path), 2.0) == PAGE.decode()
    assert server.paths == ["/metrics", "/metrics?x=2", "/other"] * 2
    assert server.accepted == 1


@pytest.mark.parametrize(
    ("mode", "connections"),
    [("chunked", 1), ("close", 3), ("until-close", 3)],  # chunks reassembled, connection reused; "close" honoured
)
def test_body_framing_and_connection_reuse(serve, fetcher, mode, connections) -> None:
    server = serve(mode)
    for _ in range(3):
        assert fetcher.fetch(url(server), 2.0) == PAGE.decode()
    assert server.accepted == connections


def test_server_closing_an_idle_connection_gets_a_fresh_one(serve, fetcher) -> None:
    server = serve("idle-close")
    assert fetcher.fetch(url(server), 2.0) == PAGE.decode()
    time.sleep(0.05)  # let the server's close arrive
    assert fetcher.fetch(url(server), 2.0) == PAGE.decode()
    assert server.accepted == 2


@pytest.mark.parametrize("mode", ["drop-body", "drop-chunked"])
def test_connection_dropped_mid_body_is_a_scrape_error(serve, mode: str) -> None:
    server = serve(mode)
    with pytest.raises(ScrapeError, match="cannot reach"):
        fetch_text(url(server), 2.0)


def test_http_500_is_a_scrape_error(serve) -> None:
    server = serve("error")
    with pytest.raises(ScrapeError, match="answered HTTP 500"):
        fetch_text(url(server), 2.0, hint="Check targets[].vllm_url")


@pytest.mark.parametrize("mode", ["length", "chunked", "until-close"])
def test_body_over_the_limit_is_refused(serve, monkeypatch, mode: str) -> None:
    monkeypatch.setattr(fetch, "MAX_BODY_BYTES", 10_000)
    server = serve(mode)
    with pytest.raises(ScrapeError, match="larger than the 10000 bytes"):
        fetch_text(url(server), 2.0)


def test_refused_connection() -> None:
    with pytest.raises(ScrapeError, match="connection refused") as caught:
        fetch_text(f"http://127.0.0.1:{refused_port()}/metrics", 2.0, hint="Check targets[].vllm_url")
    assert caught.value.one_line().endswith("Check targets[].vllm_url")


def test_unknown_host() -> None:
    # .invalid never resolves (RFC 2606): the system's resolver says so without any traffic
    with pytest.raises(ScrapeError, match=r"cannot reach http://no-such-host\.invalid/metrics \(unknown host"):
        fetch_text("http://no-such-host.invalid/metrics", 5.0)


def test_server_that_never_answers_times_out() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()  # the kernel completes the handshake; nobody ever reads or answers
        start = time.monotonic()
        with pytest.raises(ScrapeError, match=r"no answer within 0.2 s"):
            fetch_text(url(sock), 0.2)
        assert time.monotonic() - start < 2.0


def slow_resolver(monkeypatch: pytest.MonkeyPatch, release: threading.Event, slow_s: float) -> None:
    """Host lookups of hang.test never answer (until ``release``); slow.test is 127.0.0.1 after ``slow_s``."""
    real_lookup = socket.getaddrinfo

    def lookup(host: object, *args: object, **kwargs: object) -> object:
        host = host.decode() if isinstance(host, bytes) else host
        if host == "hang.test":
            release.wait(30)
            raise socket.gaierror(socket.EAI_NONAME, "released")
        if host == "slow.test":
            time.sleep(slow_s)
            host = "127.0.0.1"
        return real_lookup(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", lookup)  # what asyncio's loop.getaddrinfo calls


def test_a_host_lookup_that_hangs_ends_at_the_deadline_and_holds_no_other_get(serve, fetcher, monkeypatch) -> None:
    server, release = serve("length"), threading.Event()
    slow_resolver(monkeypatch, release, 0.0)
    gets = [Get("hung", "http://hang.test:9/metrics", HttpSettings()), Get("ok", url(server), HttpSettings())]
    start = time.monotonic()
    try:
        arrived = [(answer, time.monotonic() - start) for answer in fetcher.fetch_many(gets, 0.5)]
    finally:
        release.set()
    (ok, ok_at), (hung, hung_at) = arrived
    assert ok.key == "ok" and ok.text == PAGE.decode() and ok_at < hung_at - 0.2  # not held back by the lookup
    assert hung.key == "hung" and hung.error is not None and 0.45 < hung_at < 1.2
    assert hung.error.one_line().startswith("cannot reach http://hang.test:9/metrics (no answer within 0.5 s)")


def test_a_slow_host_lookup_counts_against_the_whole_get_deadline(fetcher, monkeypatch) -> None:
    # 0.4 s to look the host up, 0.4 s to answer: each within a 0.6 s connect or read timeout, the
    # whole GET not
    slow_resolver(monkeypatch, threading.Event(), 0.4)
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    sock, _ = request_server(lambda conn, _: (time.sleep(0.4), conn.sendall(ok)))
    with sock:
        start = time.monotonic()
        with pytest.raises(ScrapeError, match=r"no answer within 0.6 s"):
            fetcher.fetch(url(sock).replace("127.0.0.1", "slow.test"), 0.6)
        assert time.monotonic() - start < 1.2


def request_server(
    respond: Callable[[socket.socket, bytes], None], wrap: Callable[[socket.socket], socket.socket] | None = None
) -> tuple[socket.socket, list[int]]:
    """A server that reads each request's head, then lets ``respond`` answer it; counts connections.
    ``wrap`` turns each accepted connection into another (TLS)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    accepted = [0]

    def serve() -> None:
        while True:
            try:
                conn, _ = sock.accept()
                if wrap is not None:
                    conn = wrap(conn)
            except OSError:
                if sock.fileno() == -1:
                    return
                continue  # a handshake that failed (the client did not trust us): the next one
            accepted[0] += 1
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(4096)
                respond(conn, data)

    threading.Thread(target=serve, daemon=True).start()
    return sock, accepted


def raw_server(answer: bytes) -> tuple[socket.socket, list[int]]:
    """A server that sends ``answer`` to every request, counting connections."""
    return request_server(lambda conn, _: conn.sendall(answer))


def test_an_interim_1xx_answer_is_read_past(fetcher) -> None:
    answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
    sock, _ = raw_server(answer)
    with sock:
        assert fetcher.fetch(url(sock), 2.0) == "hello"


def test_answers_come_in_the_order_they_arrive_and_a_slow_one_holds_none(fetcher) -> None:
    def answer_after(delay: float, body: bytes) -> socket.socket:
        def respond(conn: socket.socket, _: bytes) -> None:
            time.sleep(delay)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        return request_server(respond)[0]

    slow, fast = answer_after(0.6, b"slow"), answer_after(0.05, b"fast")
    start = time.monotonic()
    gets = [Get("slow", url(slow), HttpSettings()), Get("fast", url(fast), HttpSettings())]
    order = [(a.key, a.text, time.monotonic() - start) for a in fetcher.fetch_many(gets, 2.0)]
    slow.close()
    fast.close()
    assert [(key, text) for key, text, _ in order] == [("fast", "fast"), ("slow", "slow")]
    assert order[0][2] < 0.4 <= order[1][2]


def test_not_http_is_a_scrape_error() -> None:
    sock, _ = raw_server(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
    with sock, pytest.raises(ScrapeError, match="cannot reach"):
        fetch_text(url(sock), 2.0)


def test_not_an_http_url() -> None:
    with pytest.raises(ScrapeError, match="not an http"):
        fetch_text("ftp://127.0.0.1/metrics", 1.0)


def trickling_server(head: bytes, body: bytes, every_s: float,
                     wrap: Callable[[socket.socket], socket.socket] | None = None) -> socket.socket:
    """A server that answers every request with ``head`` at once, then ``body`` a byte every ``every_s``."""

    def trickle(conn: socket.socket, _: bytes) -> None:
        try:
            conn.sendall(head)
            for i in range(len(body)):
                time.sleep(every_s)
                conn.sendall(body[i : i + 1])
        except OSError:  # the client gave up: what the test wants
            pass

    return request_server(trickle, wrap)[0]


@pytest.mark.parametrize("framing", ["length", "chunked", "until-close"])
def test_an_answer_that_trickles_in_times_out_as_a_whole(framing: str) -> None:
    # Each byte comes well within the timeout, the whole answer does not: the scrape timeout bounds
    # the whole GET (as Prometheus' scrape_timeout does), or one slow server would hold every round.
    body = b"x" * 40
    head = {
        "length": b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n",
        "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n28\r\n",
        "until-close": b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
    }[framing]
    with trickling_server(head, body, every_s=0.1) as sock:
        start = time.monotonic()
        with pytest.raises(ScrapeError, match=r"the answer began but was not complete within 1 s"):
            fetch_text(url(sock), 1.0)
        assert time.monotonic() - start < 1.6


# -- credentials and headers --------------------------------------------------------------------------
def test_basic_auth_from_the_url_is_sent_and_its_password_never_shown(serve) -> None:
    server = serve("error")
    address = url(server).replace("http://", "http://reader:s3cret@")
    with pytest.raises(ScrapeError) as caught:
        fetch_text(address, 2.0)
    assert server.headers[0]["Authorization"] == "Basic " + base64.b64encode(b"reader:s3cret").decode()
    assert "s3cret" not in caught.value.one_line() and "reader:***@127.0.0.1" in caught.value.one_line()


def test_headers_and_a_bearer_token_are_sent(serve, fetcher) -> None:
    server = serve("length")
    http = HttpSettings(headers={"X-Scope-OrgID": "team-a"}, bearer_token="tok-123")
    assert fetcher.fetch(url(server), 2.0, http) == PAGE.decode()
    assert server.headers[0]["X-Scope-OrgID"] == "team-a"
    assert server.headers[0]["Authorization"] == "Bearer tok-123"


# -- HTTPS ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (cert, key) (.ci/run installs openssl)."""
    return make_certificate(tmp_path_factory.mktemp("tls"))


def tls_wrap(certificate: tuple[str, str]) -> Callable[[socket.socket], socket.socket]:
    context = tls_context(certificate)
    return lambda conn: tls_connection(context, conn)  # bounded: a stalled handshake does not stop the server


def tls_server(certificate: tuple[str, str]) -> socket.socket:
    """``request_server`` over TLS, answering "ok" to every request."""
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    return request_server(lambda conn, _: conn.sendall(ok), wrap=tls_wrap(certificate))[0]


def https_url(sock: socket.socket) -> str:
    return f"https://127.0.0.1:{sock.getsockname()[1]}/metrics"


def test_an_untrusted_certificate_says_so_and_how_to_trust_it(certificate) -> None:
    with tls_server(certificate) as sock:
        with pytest.raises(ScrapeError, match="TLS certificate is not trusted here") as caught:
            fetch_text(https_url(sock), 2.0)
    assert "http.ca_file" in caught.value.one_line()


def test_a_ca_file_or_no_verification_lets_https_answer(certificate) -> None:
    with tls_server(certificate) as sock:
        assert fetch_text(https_url(sock), 2.0, http=HttpSettings(ca_file=certificate[0])) == "ok"
        assert fetch_text(https_url(sock), 2.0, http=HttpSettings(tls_verify=False)) == "ok"


def test_the_system_store_is_used_when_no_ca_file_is_given(certificate, monkeypatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", certificate[0])  # OpenSSL's default store: the system's
    with tls_server(certificate) as sock:
        assert fetch_text(https_url(sock), 2.0) == "ok"


def test_an_https_trickle_ends_at_the_deadline(certificate) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n"
    with trickling_server(head, b"x" * 40, 0.1, wrap=tls_wrap(certificate)) as sock:
        start = time.monotonic()
        with pytest.raises(ScrapeError, match=r"the answer began but was not complete within 1 s"):
            fetch_text(https_url(sock), 1.0, http=HttpSettings(ca_file=certificate[0]))
        assert time.monotonic() - start < 1.6


# -- a proxy ----------------------------------------------------------------------------------------------
class ProxyHandler(BaseHTTPRequestHandler):
    """A forward proxy for plain http:// (absolute request URLs), recording what it relayed."""

    protocol_version = "HTTP/1.1"
    server: PathServer

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.server.paths.append(self.path)
        self.server.headers.append(dict(self.headers.items()))
        parts = urlsplit(self.path)
        origin = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
        skip = {"host", "proxy-connection", "connection"}
        origin.request("GET", parts.path or "/", headers={k: v for k, v in self.headers.items() if k.lower() not in skip})
        answer = origin.getresponse()
        body = answer.read()
        origin.close()
        self.send_response(answer.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_a_proxy_carries_the_get_and_its_headers(serve, fetcher) -> None:
    origin = serve("length")
    proxy = serve_proxy = PathServer(ProxyHandler)
    threading.Thread(target=serve_proxy.serve_forever, args=(0.05,), daemon=True).start()
    try:
        proxy_url = f"http://127.0.0.1:{proxy.server_address[1]}"
        text = fetcher.fetch(url(origin), 2.0, HttpSettings(proxy=proxy_url, headers={"X-Via-Test": "1"}))
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert text == PAGE.decode()
    assert proxy.paths == [url(origin)]  # the proxy got the absolute URL: it was asked, not the origin
    assert origin.headers[0]["X-Via-Test"] == "1"


def test_a_proxy_that_refuses_is_named_in_the_error() -> None:
    dead = f"http://127.0.0.1:{refused_port()}"
    with pytest.raises(ScrapeError, match=r"through the proxy http://127\.0\.0\.1:\d+") as caught:
        fetch_text("http://127.0.0.1:9/metrics", 2.0, http=HttpSettings(proxy=dead))
    assert "http.proxy" in caught.value.one_line()


def test_a_client_that_cannot_be_made_fails_its_get_only(serve, fetcher) -> None:
    # httpx refuses such a proxy with a ValueError while making the client: before, the GET's answer
    # never came and the round waited for good
    server = serve("length")
    gets = [Get("bad", "http://127.0.0.1:9/metrics", HttpSettings(proxy="notaurl")), Get("ok", url(server), HttpSettings())]
    answers = {a.key: a for a in fetcher.fetch_many(gets, 2.0)}
    assert answers["ok"].text == PAGE.decode()
    bad = answers["bad"].error
    assert bad is not None and "notaurl" in bad.one_line() and "http.proxy" in bad.one_line()


def test_a_get_stuck_on_the_event_loop_is_given_up_at_the_rounds_deadline(serve, fetcher, monkeypatch) -> None:
    # A blocking call inside the loop (here loading the CA store on a hung disk) stops every GET's own
    # timeout from firing: the round still ends, with that source failed
    release = threading.Event()
    real_context = ssl.create_default_context

    def hung_context(*args: object, **kwargs: object) -> ssl.SSLContext:
        release.wait(30)
        return real_context()

    monkeypatch.setattr(ssl, "create_default_context", hung_context)
    gets = [Get("hung", "https://127.0.0.1:9/metrics", HttpSettings(), "hint")]
    try:
        (answer,) = list(fetcher.fetch_many(gets, 0.3))
        assert not release.is_set()  # given up while the call was still stuck
    finally:
        release.set()
    assert answer.key == "hung" and answer.error is not None
    assert answer.error.one_line() == "cannot reach https://127.0.0.1:9/metrics (no answer within 0.3 s). hint"
