"""The scrape client against real servers on 127.0.0.1: framing, keep-alive, failures, fallback."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from app.errors import ScrapeError
from collectors import httpwire
from collectors.http import ScrapeClient, fetch_text
from tests.support.certificates import make_certificate
from tests.support.http_server import CountingServer, started

PAGE = b"".join(b"vllm:num_requests_running{engine=\"%d\"} %d\n" % (i, i) for i in range(2000))
SMALL_PAGE = PAGE[:1500]  # under one TCP segment: Nagle holds a small body back, not a large one


class PathServer(CountingServer):
    """Counts connections and keeps the path of every request."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(handler)
        self.paths: list[str] = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: PathServer
    mode = "length"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.server.paths.append(self.path)
        if self.mode == "interim":  # a 1xx first: the raw client gives this origin to http.client
            self.send_response_only(100)
            self.end_headers()
            self.mode = "length"
        body = SMALL_PAGE if self.mode == "small" else PAGE
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


def url(server: PathServer | socket.socket, path: str = "/metrics") -> str:
    address = server.server_address if isinstance(server, PathServer) else server.getsockname()
    return f"http://127.0.0.1:{address[1]}{path}"


def test_content_length_and_keep_alive_reuse(serve) -> None:
    server = serve("length")
    client = ScrapeClient()
    try:
        for _ in range(5):
            assert client.get(url(server, "/metrics?x=1"), 2.0) == (200, PAGE)
    finally:
        client.close()
    assert server.accepted == 1
    assert server.paths == ["/metrics?x=1"] * 5


def test_each_url_keeps_its_own_path_and_query(serve) -> None:
    # the client remembers each URL's parsed route: two URLs of one origin must never share one
    server = serve("length")
    client = ScrapeClient()
    try:
        for _ in range(2):
            for path in ("/metrics", "/metrics?x=2", "/other"):
                assert client.get(url(server, path), 2.0) == (200, PAGE)
        with pytest.raises(ValueError):
            client.get("ftp://127.0.0.1/metrics", 2.0)
    finally:
        client.close()
    assert server.paths == ["/metrics", "/metrics?x=2", "/other"] * 2
    assert server.accepted == 1


def test_body_sent_after_the_headers_is_not_held_back_by_delayed_acks(serve) -> None:
    # http.server writes the headers, then the body, without TCP_NODELAY: Nagle holds the body until
    # the headers are acknowledged, and Linux delays that acknowledgement by 40 ms unless asked.
    server = serve("small")
    client = ScrapeClient()
    try:
        client.get(url(server), 2.0)
        start = time.monotonic()
        for _ in range(10):
            assert client.get(url(server), 2.0) == (200, SMALL_PAGE)
        elapsed = time.monotonic() - start
    finally:
        client.close()
    if httpwire._QUICKACK is not None:
        assert elapsed < 0.3  # 10 × 40 ms = 0.4 s at least when each GET waits for the delayed ack


@pytest.mark.parametrize(
    ("mode", "connections"),
    [("chunked", 1), ("close", 3)],  # a chunked body is reassembled and the connection reused; "close" is honoured
)
def test_body_framing_and_connection_reuse(serve, mode, connections) -> None:
    server = serve(mode)
    client = ScrapeClient()
    try:
        for _ in range(3):
            assert client.get(url(server), 2.0) == (200, PAGE)
    finally:
        client.close()
    assert server.accepted == connections


def test_body_ended_by_the_server_closing(serve) -> None:
    server = serve("until-close")
    client = ScrapeClient()
    try:
        assert client.get(url(server), 2.0) == (200, PAGE)
        assert client.get(url(server), 2.0) == (200, PAGE)
    finally:
        client.close()
    assert server.accepted == 2


def test_server_closing_an_idle_connection_gets_one_fresh_try(serve) -> None:
    server = serve("idle-close")
    client = ScrapeClient()
    try:
        assert client.get(url(server), 2.0) == (200, PAGE)
        time.sleep(0.05)  # let the server's close arrive
        assert client.get(url(server), 2.0) == (200, PAGE)
    finally:
        client.close()
    assert server.accepted == 2


@pytest.mark.parametrize("mode", ["drop-body", "drop-chunked"])
def test_connection_dropped_mid_body_is_a_scrape_error(serve, mode: str) -> None:
    server = serve(mode)
    with pytest.raises(ScrapeError, match="cannot reach"):
        fetch_text(url(server), 2.0)


def test_http_500_is_a_scrape_error(serve) -> None:
    server = serve("error")
    with pytest.raises(ScrapeError, match="answered HTTP 500"):
        fetch_text(url(server), 2.0)
    client = ScrapeClient()
    try:
        assert client.get(url(server), 2.0) == (500, b"oops\n")
    finally:
        client.close()


@pytest.mark.parametrize("mode", ["length", "chunked", "until-close"])
def test_body_over_the_limit_is_refused(serve, monkeypatch, mode: str) -> None:
    monkeypatch.setattr(httpwire, "MAX_BODY_BYTES", 10_000)
    server = serve(mode)
    with pytest.raises(ScrapeError, match="larger than the 10000 bytes"):
        fetch_text(url(server), 2.0)


def test_refused_connection() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    address = url(sock)
    sock.close()
    with pytest.raises(ScrapeError, match="connection refused"):
        fetch_text(address, 2.0)


def test_server_that_never_answers_times_out() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()  # the kernel completes the handshake; nobody ever reads or answers
        start = time.monotonic()
        with pytest.raises(ScrapeError, match=r"no answer within 0.2 s"):
            fetch_text(url(sock), 0.2)
        assert time.monotonic() - start < 2.0


def request_server(
    respond: Callable[[socket.socket], None], wrap: Callable[[socket.socket], socket.socket] | None = None
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
                respond(conn)

    threading.Thread(target=serve, daemon=True).start()
    return sock, accepted


def raw_server(answer: bytes) -> tuple[socket.socket, list[int]]:
    """A server that sends ``answer`` to every request, counting connections."""
    return request_server(lambda conn: conn.sendall(answer))


def test_interim_1xx_answer_falls_back_to_http_client() -> None:
    answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
    sock, accepted = raw_server(answer)
    client = ScrapeClient()
    try:
        assert client.get(url(sock), 2.0) == (200, b"hello")
        assert client.get(url(sock), 2.0) == (200, b"hello")
    finally:
        client.close()
        sock.close()
    # the raw try, the http.client redo, then http.client straight away for this origin
    assert accepted[0] == 3


def test_unknown_transfer_coding_falls_back_to_http_client() -> None:
    body = b"5\r\nhello\r\n0\r\n\r\n"
    answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity, chunked\r\nConnection: close\r\n\r\n" + body
    sock, accepted = raw_server(answer)
    client = ScrapeClient()
    try:
        # whatever http.client makes of it (it reads to the close) is the answer: it is the reference
        assert client.get(url(sock), 2.0) == (200, body)
    finally:
        client.close()
        sock.close()
    assert accepted[0] == 2


def test_http_client_connections_are_kept_alive_too(serve) -> None:
    # GETs through http.client run on a thread each (so that a deadline bounds them); the
    # connection each used is still kept for the next GET of the origin.
    server = serve("interim")
    client = ScrapeClient()
    try:
        answers = [client.get(url(server), 2.0) for _ in range(4)]
    finally:
        client.close()
    assert answers == [(200, PAGE)] * 4
    assert server.accepted == 2  # the raw try, then one http.client connection for every GET


def test_a_slow_get_through_http_client_holds_no_answer_already_in() -> None:
    # The GET through http.client runs on its thread; the round reads the raw client's answer as
    # soon as it is in, not after the slow one (whose read would block the round until it ends).
    slow_body = b"5\r\nhello\r\n0\r\n\r\n"
    slow_answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity, chunked\r\nConnection: close\r\n\r\n" + slow_body
    fast_answer = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfast"
    delay = {"slow": 0.0}

    def slow(conn: socket.socket) -> None:
        time.sleep(delay["slow"])
        conn.sendall(slow_answer)

    def fast(conn: socket.socket) -> None:
        time.sleep(0.05)
        conn.sendall(fast_answer)

    slow_sock, _ = request_server(slow)
    fast_sock, _ = request_server(fast)
    slow_url, fast_url = url(slow_sock), url(fast_sock)
    client = ScrapeClient()
    try:
        assert client.get(slow_url, 2.0) == (200, slow_body)  # the raw try: the origin goes to http.client
        delay["slow"] = 0.6
        start = time.monotonic()
        pendings = [client.send(slow_url, 2.0), client.send(fast_url, 2.0)]
        order = []
        for pending in client.arrivals(pendings):
            order.append((pending.url, client.receive(pending)[1], round(time.monotonic() - start, 2)))
    finally:
        client.close()
        slow_sock.close()
        fast_sock.close()
    assert [(u, body) for u, body, _ in order] == [(fast_url, b"fast"), (slow_url, slow_body)]
    assert order[0][2] < 0.4 <= order[1][2]


def test_not_http_is_a_scrape_error() -> None:
    sock, _ = raw_server(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
    try:
        with pytest.raises(ScrapeError, match="cannot reach"):
            fetch_text(url(sock), 2.0)
    finally:
        sock.close()


def test_not_an_http_url() -> None:
    with pytest.raises(ScrapeError, match="not an http"):
        fetch_text("ftp://127.0.0.1/metrics", 1.0)


def trickling_server(head: bytes, body: bytes, every_s: float) -> socket.socket:
    """A server that answers every request with ``head`` at once, then ``body`` a byte every ``every_s``."""

    def trickle(conn: socket.socket) -> None:
        try:
            conn.sendall(head)
            for i in range(len(body)):
                time.sleep(every_s)
                conn.sendall(body[i : i + 1])
        except OSError:  # the client gave up: what the test wants
            pass

    return request_server(trickle)[0]


@pytest.mark.parametrize("framing", ["length", "chunked", "until-close", "http.client"])
def test_an_answer_that_trickles_in_times_out_as_a_whole(framing: str) -> None:
    # Each byte comes well within the timeout, the whole answer does not: the scrape timeout bounds
    # the whole GET (as Prometheus' scrape_timeout does), or one slow server would hold every round.
    # "http.client": a transfer coding the raw client leaves to http.client, which reads to the close.
    body = b"x" * 40
    head = {
        "length": b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n",
        "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n28\r\n",
        "until-close": b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
        "http.client": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity, chunked\r\nConnection: close\r\n\r\n",
    }[framing]
    with trickling_server(head, body, every_s=0.1) as sock:
        start = time.monotonic()
        with pytest.raises(ScrapeError, match=r"the answer began but was not complete within 1 s"):
            fetch_text(url(sock), 1.0)
        assert time.monotonic() - start < 1.6


# -- HTTPS: through http.client, on its thread ------------------------------------------------------
@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (cert, key), made with the openssl command (.ci/run
    installs it)."""
    return make_certificate(tmp_path_factory.mktemp("tls"))


def tls_server(certificate: tuple[str, str], respond: Callable[[socket.socket], None]) -> socket.socket:
    """``request_server`` over TLS: each connection's handshake, then its requests as request_server."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    sock, _ = request_server(respond, wrap=lambda conn: context.wrap_socket(conn, server_side=True))
    return sock


def https_url(sock: socket.socket) -> str:
    return f"https://127.0.0.1:{sock.getsockname()[1]}/metrics"


def test_an_untrusted_certificate_says_so_and_how_to_trust_it(certificate) -> None:
    # ssl's verification error is a ValueError too: it was reported as "not an http:// URL"
    with tls_server(certificate, lambda conn: conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")) as sock:
        with pytest.raises(ScrapeError, match="TLS certificate is not trusted here") as caught:
            fetch_text(https_url(sock), 2.0)
    assert "SSL_CERT_FILE" in caught.value.one_line()


def test_https_answers_and_an_https_trickle_ends_at_the_deadline(certificate, monkeypatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", certificate[0])  # ssl's default context trusts it
    with tls_server(certificate, lambda conn: conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")) as sock:
        assert fetch_text(https_url(sock), 2.0) == "ok"

    def trickle(conn: socket.socket) -> None:
        try:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n")
            for _ in range(40):
                time.sleep(0.1)
                conn.sendall(b"x")
        except OSError:  # the client gave up: what the test wants
            pass

    with tls_server(certificate, trickle) as sock:
        start = time.monotonic()
        with pytest.raises(ScrapeError, match=r"the answer began but was not complete within 1 s"):
            fetch_text(https_url(sock), 1.0)
        assert time.monotonic() - start < 1.6
