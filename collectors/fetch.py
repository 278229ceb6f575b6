"""HTTP GETs of the sources, through httpx: one place that turns transport failures into ScrapeError.

One ``httpx.AsyncClient`` per origin (scheme, host, port) and TLS or proxy setting, on an event
loop of its own thread, so that the synchronous rounds of the scheduler's thread can send every GET of a round
at once and take each answer as it arrives (:meth:`Fetcher.fetch_many`). Connections are kept alive
between rounds. Each GET has one deadline for the whole of it, from the host lookup to the body's
last byte, as Prometheus' ``scrape_timeout``: a server that trickles its answer in holds nothing
past it.

Headers, a bearer token, basic auth from the URL's userinfo, a CA file and a proxy come from the
source's ``HttpSettings``; the URL's secrets are masked (:func:`core.redact.masked`) in every message.
"""

from __future__ import annotations

import asyncio
import queue
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass

import httpx

from core import deadline
from core.bounded import BodyError, read_body, read_file
from core.errors import ScrapeError
from core.redact import PLACEHOLDER_PASSWORDS, masked
from core.settings import HttpSettings
from core.text import visible

# Ask for the classic text format: some servers answer OpenMetrics when the client allows it.
ACCEPT_TEXT = "text/plain;version=0.0.4;q=1.0, */*;q=0.1"
USER_AGENT = "sweetspot-collector"
MAX_BODY_BYTES = 32 * 1024 * 1024  # of a page, decompressed (docs/security.md; read by core/bounded.py)
# The codings decoded here, each bounded as it inflates (httpx's own decoders inflate a chunk whole,
# layer after layer: 2 KB of stacked gzip became 4 GB); asked for by name so no other comes.
ACCEPT_ENCODING = "gzip, deflate"
MAX_REDIRECTS = 10  # as many hops as Prometheus' scraper follows
# httpx closes a connection idle this long; servers that close sooner are noticed before reuse.
KEEPALIVE_S = 60.0
# Past its timeout a GET is given up by the round even when its own deadline did not fire (an event
# loop held by a blocking call, a client stuck in its making); the grace lets a GET's own, more
# precise error ("the answer began but...") arrive first.
DEADLINE_GRACE_S = 1.0
_LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=None, keepalive_expiry=KEEPALIVE_S)


read_bounded = read_body  # the name its callers know (collectors/prometheus.py, sweep/engine.py)


def split_userinfo(url: str) -> tuple[str, httpx.BasicAuth | None]:
    """``url`` without its userinfo, and the basic auth it held (None without one; percent-escapes
    decoded). Given to httpx apart, the password stays out of the URL httpx logs each request with.
    Raises ``httpx.InvalidURL`` for what is not a URL."""
    if "@" not in url:  # no userinfo, and no parse (~20 µs) for each GET of a round
        return url, None
    parsed = httpx.URL(url)
    if not parsed.userinfo:
        return url, None
    return str(parsed.copy_with(userinfo=b"")), httpx.BasicAuth(parsed.username, parsed.password)


@dataclass(frozen=True)
class Get:
    """One GET of a round: ``key`` names it in the answers, ``hint`` says which setting to check."""

    key: Hashable
    url: str
    http: HttpSettings
    hint: str = ""


@dataclass(frozen=True)
class Answer:
    """What a GET gave: the page's text or the error, and seconds from its start to its end."""

    key: Hashable
    text: str | None
    error: ScrapeError | None
    duration_s: float
    answered_at: float | None = None  # perf_counter() when the answer's headers came (the page was made then)


class Fetcher:
    """The HTTP clients of the collector and their event loop thread. Safe to share between threads."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._clients: dict[tuple[str, str, int | None, str, bool, str], httpx.AsyncClient] = {}
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._thread = threading.Thread(target=self._loop.run_forever, name="sweetspot-http", daemon=True)
        self._thread.start()

    def fetch(self, url: str, timeout_s: float, http: HttpSettings | None = None, hint: str = "") -> str:
        """GET ``url`` and return its body as text; any failure raises ScrapeError naming the URL."""
        (answer,) = self.fetch_many([Get(None, url, http or HttpSettings(), hint)], timeout_s)
        if answer.error is not None:
            raise answer.error
        assert answer.text is not None
        return answer.text

    def fetch_many(self, gets: Iterable[Get], timeout_s: float) -> Iterator[Answer]:
        """Send every GET at once; yield each answer as it arrives (all within ``timeout_s``, or an error).

        Closing the iterator early cancels the GETs still under way.
        """
        arrived: queue.SimpleQueue[tuple[int, Answer]] = queue.SimpleQueue()
        job = deadline.Deadline(timeout_s)  # every step of every GET (lookup, connect, read) draws on it
        end = time.perf_counter() + timeout_s + DEADLINE_GRACE_S
        pending = dict(enumerate(gets))
        futures = [asyncio.run_coroutine_threadsafe(self._get(get, job, timeout_s, arrived, i), self._loop)
                   for i, get in pending.items()]  # fmt: skip
        try:
            while pending:
                try:  # an answer already in is always taken, however late the caller comes back for it
                    marker, answer = arrived.get(timeout=max(0.0, end - time.perf_counter()))
                except queue.Empty:
                    break
                if pending.pop(marker, None) is not None:
                    yield answer
            # The round's deadline passed with GETs still out (a stuck event loop, a lookup or a
            # client that never returns): each is that source's failure, and the round goes on.
            for get in pending.values():
                yield Answer(get.key, None, ScrapeError(f"cannot reach {masked(get.url)} (no answer within {timeout_s:g} s)",
                                                        get.hint), timeout_s + DEADLINE_GRACE_S)  # fmt: skip
        finally:
            for future in futures:
                future.cancel()

    async def _get(self, get: Get, job: deadline.Deadline, timeout_s: float, arrived: queue.SimpleQueue[tuple[int, Answer]], marker: int) -> None:
        start, answered = time.perf_counter(), [0.0]
        try:
            with deadline.bound(job):
                text, error = await self._text(get, timeout_s, answered), None
        except ScrapeError as exc:
            text, error = None, exc
        except Exception as exc:  # a client that cannot be built from the settings, or a bug: this GET's failure
            text, error = None, ScrapeError(f"cannot reach {masked(get.url)} ({type(exc).__name__}: {_reason(exc, get.http)})",
                                            "Check the target's http settings (http.proxy, http.ca_file)")  # fmt: skip
        arrived.put((marker, Answer(get.key, text, error, time.perf_counter() - start, answered[0] or None)))

    async def _text(self, get: Get, timeout_s: float, answered: list[float] | None = None) -> str:
        """The body of ``get``; ``answered[0]`` gets the perf_counter() at which its headers came."""
        url, began = masked(get.url), False
        try:
            bare, auth = split_userinfo(get.url)
            headers: dict[str, str] = _headers(get.http)
            async with asyncio.timeout(deadline.remaining(timeout_s)):  # what the job has left of it
                for _ in range(MAX_REDIRECTS + 1):
                    client = self._client(bare, get.http)
                    async with client.stream("GET", bare, auth=auth, headers=headers, timeout=timeout_s) as response:
                        if response.is_redirect:
                            bare, crossed = redirect_target(get.url, response, get.http, get.hint)
                            if crossed:  # credentials stay with the origin they were configured for
                                auth, headers = None, _headers(HttpSettings())
                            continue
                        began = True
                        if answered is not None:
                            answered[0] = time.perf_counter()
                        body = await read_bounded(response, MAX_BODY_BYTES, url)
                        break
                else:
                    raise ScrapeError(f"{url}: more than {MAX_REDIRECTS} redirects", get.hint)
        except (TimeoutError, httpx.TimeoutException):
            if began:
                raise ScrapeError(f"{url}: the answer began but was not complete within {timeout_s:g} s"
                                  " (a server that is only slow needs a larger scrape_timeout_s)", get.hint) from None
            raise ScrapeError(f"cannot reach {url} (no answer within {timeout_s:g} s)", get.hint) from None
        except BodyError as exc:
            raise ScrapeError(str(exc), get.hint) from None
        except (httpx.UnsupportedProtocol, httpx.InvalidURL):
            raise ScrapeError(f"{url!r} is not an http:// or https:// URL", get.hint) from None
        except (httpx.HTTPError, OSError, UnicodeEncodeError) as exc:  # a header httpx cannot encode is the last
            raise _transport_error(url, exc, get) from None
        if response.status_code != 200:
            raise ScrapeError(f"{url} answered HTTP {response.status_code}", get.hint)
        return body.decode("utf-8", errors="replace")

    def _client(self, url: str, http: HttpSettings) -> httpx.AsyncClient:
        """The client of ``url``'s origin with these TLS and proxy settings, made when first needed.

        One client per origin, not one for all: httpcore's pool looks through every connection of
        the client at each request and each answer, which with 600 GETs in flight cost seconds of
        CPU a round (bench/bench_fleet.py); per origin a pool holds the few connections of one server.
        """
        origin = httpx.URL(url)
        key = (origin.scheme, origin.host, origin.port, http.ca_file, http.tls_verify, http.proxy)
        client = self._clients.get(key)
        if client is None:
            # plain http with a plain-http proxy makes no TLS connection: its CA setting is not loaded
            tls = origin.scheme == "https" or http.proxy.startswith("https:")
            # lookups and connections draw on the GET's deadline (core/deadline.py), never on a shared pool
            client = self._clients[key] = deadline.client(verify=self._tls(http) if tls else False, proxy=http.proxy or None,
                                                          limits=_LIMITS)
        return client

    def _tls(self, http: HttpSettings) -> ssl.SSLContext | bool:
        """One TLS context per CA setting, shared by the clients (loading a CA store costs milliseconds).
        A CA file that cannot be used is a ScrapeError naming ``http.ca_file``: it costs the sources
        that use it, and the next GET tries it again (a file put right is taken without a restart)."""
        if not http.tls_verify:
            return False
        context = self._contexts.get(http.ca_file)
        if context is None:  # the system's store (SSL_CERT_FILE included) unless a CA file is given
            try:
                context = ca_context(http.ca_file)
            except (OSError, ssl.SSLError, ValueError, BodyError) as exc:
                what = f"http.ca_file {visible(http.ca_file)!r}" if http.ca_file else "this machine's CA store"
                raise ScrapeError(f"cannot use {what}: {ca_reason(exc)}",
                                  "Check the target's http.ca_file: a readable PEM file of the CA that signed the "
                                  "server's certificate") from None
            self._contexts[http.ca_file] = context
        return context

    def close(self) -> None:
        async def close_all() -> None:
            for client in self._clients.values():
                await client.aclose()

        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(close_all(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._loop.close()


MAX_CA_BYTES = 4 * 1024 * 1024  # a CA bundle (Debian's whole store is ~220 KB)


def ca_context(ca_file: str) -> ssl.SSLContext:
    """A TLS context trusting ``ca_file`` (PEM), or this machine's store when "". The file is read
    through :func:`core.bounded.read_file`: a regular file only, opened without blocking (a FIFO
    given as the CA once stopped every target's round), 4 MiB at most. Raises OSError, ssl.SSLError,
    ValueError or :class:`core.bounded.TooLarge`."""
    if not ca_file:
        return ssl.create_default_context()
    pem = read_file(ca_file, MAX_CA_BYTES, "it").decode("ascii", errors="replace")
    if "-----BEGIN CERTIFICATE-----" not in pem:  # as cafile= says of it (cadata= takes "" as no CA at all)
        raise ssl.SSLError(0, "no certificate or crl found")
    return ssl.create_default_context(cadata=pem)


def origin(url: httpx.URL) -> tuple[str, str, int | None]:
    """Scheme, host and port (the scheme's default when not written), as browsers compare origins."""
    return url.scheme, url.host, url.port or {"http": 80, "https": 443}.get(url.scheme)


def redirect_target(start: str, response: httpx.Response, http: HttpSettings, hint: str) -> tuple[str, bool]:
    """Where a redirect answer sends a GET that began at ``start``, and whether that leaves
    ``start``'s origin (the caller then sends no configured header, token or basic auth there).

    Leaving it is refused (ScrapeError) unless ``http.follow_redirects_across_origins``: a page that
    moved to another server is a change to make in the settings, not to follow silently.
    """
    target = response.url.join(response.headers["Location"])
    crossed = origin(target) != origin(httpx.URL(start))
    if crossed and not http.follow_redirects_across_origins:
        raise ScrapeError(f"{masked(start)} redirects to another origin ({masked(str(target))}): not followed",
                          "Point the URL where it redirects, or set http.follow_redirects_across_origins = true "
                          "(headers, bearer token and basic auth are never sent to another origin)")
    return split_userinfo(str(target))[0], crossed


def _headers(http: HttpSettings) -> dict[str, str]:
    headers = {"Accept": ACCEPT_TEXT, "Accept-Encoding": ACCEPT_ENCODING, "User-Agent": USER_AGENT, **http.headers}
    if http.bearer_token:
        headers["Authorization"] = f"Bearer {http.bearer_token}"
    return headers


def _transport_error(url: str, exc: BaseException, get: Get) -> ScrapeError:
    """A one-line ScrapeError for a failed GET, from the innermost cause httpx chained."""
    cause: BaseException = exc
    while cause.__cause__ is not None or cause.__context__ is not None:
        cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
    if isinstance(cause, ssl.SSLCertVerificationError):
        return ScrapeError(f"cannot reach {url} (its TLS certificate is not trusted here: {cause.verify_message})",
                           "Point the target's http.ca_file at the server's CA, or add the CA to this machine's store")
    if isinstance(exc, httpx.LocalProtocolError | UnicodeError) or isinstance(cause, UnicodeError):
        # the request itself could not be written: its text quotes the header that failed, and a
        # header may be the credential; the settings' check (core.settings.check_http) names it
        return ScrapeError(f"cannot send the request to {url}: a header or the bearer token is not valid HTTP "
                           f"({type(exc).__name__}; the value is not shown)",
                           "Check the target's http.headers and the variable its http.bearer_token_env names")
    if isinstance(exc, httpx.ProxyError) or (get.http.proxy and isinstance(exc, httpx.ConnectError)):
        # the connection that failed is the proxy's (through a proxy, no other is opened here)
        return ScrapeError(f"cannot reach {url} through the proxy {masked(get.http.proxy)} ({_reason(cause, get.http)})",
                           "Check the target's http.proxy")
    return ScrapeError(f"cannot reach {url} ({_reason(cause, get.http)})", get.hint)


def ca_reason(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    if isinstance(exc, PermissionError):
        return "not readable (permission denied)"
    if isinstance(exc, IsADirectoryError):
        return "a directory, not a file"
    if isinstance(exc, ssl.SSLError):
        return f"not a PEM file of certificates ({getattr(exc, 'reason', None) or exc.__class__.__name__})"
    if isinstance(exc, BodyError):  # not a regular file ("it is a FIFO, not a regular file: ..."), or too large
        text = str(exc).removeprefix("it is ")
        return "a directory, not a file" if text.startswith("a directory") else visible(text, 200)
    return visible(str(exc) or type(exc).__name__, 200)


def _reason(exc: BaseException, http: HttpSettings | None = None) -> str:
    """One line of why ``exc`` happened, for a message that is stored and shown: URLs masked, and
    no header value or token of ``http`` in it, in any spelling an exception may quote it."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return f"unknown host: {exc.strerror or exc}"
    return scrubbed(masked((str(exc) or type(exc).__name__).splitlines()[0][:200]), http)


def url_secrets(url: str) -> tuple[str, ...]:
    """The secrets a URL carries, each as written and percent-decoded: its userinfo's password, its
    user when that is the token (no password, an empty or a placeholder one), and every value of
    its query; what a server may echo back in an error body."""
    try:
        parts = urllib.parse.urlsplit(url)
        password, user = parts.password, parts.username or ""
    except ValueError:  # not a URL: it carries nothing to look for
        return ()
    found = [password or "", user if not password or password.lower() in PLACEHOLDER_PASSWORDS else "",
             *(part.split("=", 1)[-1] for part in parts.query.replace(";", "&").split("&"))]  # fmt: skip
    return tuple({s for raw in found for s in (raw, urllib.parse.unquote(raw), urllib.parse.unquote_plus(raw)) if s})


def scrubbed(text: str, http: HttpSettings | None, url: str = "") -> str:
    """``text`` with every header value and the bearer token of ``http``, and every secret of
    ``url`` (:func:`url_secrets`: a server that echoes the credentials in its error body), replaced
    by ``***``: as written, as Python quotes it (``b'...\\n'``) and each line of it."""
    secrets = (*((http.bearer_token, *http.headers.values()) if http is not None else ()), *url_secrets(url))
    for secret in sorted(secrets, key=len, reverse=True):
        spellings = {secret, secret.strip(), repr(secret)[1:-1], repr(secret.encode("utf-8", "replace"))[2:-1],
                     *(line.strip() for line in secret.splitlines())}
        for spelling in sorted(spellings, key=len, reverse=True):
            if len(spelling) >= 4:
                text = text.replace(spelling, "***")
    return text


def fetch_text(url: str, timeout_s: float, fetcher: Fetcher | None = None, hint: str = "",
               http: HttpSettings | None = None) -> str:
    """GET ``url`` once (with ``fetcher``, or a fetcher of its own); any failure raises ScrapeError."""
    own = fetcher is None
    fetcher = fetcher or Fetcher()
    try:
        return fetcher.fetch(url, timeout_s, http, hint)
    finally:
        if own:
            fetcher.close()
