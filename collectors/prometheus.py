"""Read vLLM series from a Prometheus that already scrapes them, one page per target.

A Prometheus answer holds the series of many targets, told apart by one label (``target_label``,
``instance`` by default). This module splits an answer into one exposition page per target and
reads each page with the parsers a direct scrape uses (``collectors.vllm.parse_vllm``,
``collectors.dcgm.parse_dcgm``), so a target read through Prometheus gives the same typed records
as one scraped directly:

- ``/federate`` (Prometheus, VictoriaMetrics) answers in the text format: its lines are grouped by
  the target label, which is removed from the line (it is the same on every line of a page, and
  pages of identical servers then share one cached parse plan), as is the timestamp;
- the HTTP query API (Thanos, Mimir, any server without ``/federate``) answers JSON; its samples
  are written as the same lines.

Names are read as Prometheus stored them: ``vllm_x`` (a server on prometheus_client 0.26 scraped
with OpenMetrics, client_python issue 1177, or a relabelling rule) is read as ``vllm:x``, and
``names_form`` says which form was found. A page's time is the newest sample time on it, the
instant Prometheus scraped that target: rounds are stored at Prometheus's scrape times.

Fetching uses one ``httpx.AsyncClient`` per source on an event loop of its own. Each request has
one wall-clock deadline for the whole of it (connection, redirects, the answer's last byte: a
server trickling its answer holds nothing past it) and its answer is read to at most
:data:`MAX_ANSWER_BYTES`, decoded (:class:`collectors.fetch.Inflater`). Every failure raises
:class:`PrometheusError` (a ScrapeError) whose hint names the setting or the server flag to change.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import ssl
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from collectors.fetch import (
    ACCEPT_ENCODING,
    MAX_REDIRECTS,
    BodyError,
    ca_context,
    ca_reason,
    read_bounded,
    redirect_target,
    scrubbed,
    split_userinfo,
)
from core import deadline
from core.errors import ScrapeError
from core.redact import masked
from core.settings import PrometheusSettings
from core.text import visible

log = logging.getLogger(__name__)

UNDERSCORE_FORM = "vllm_x"
COLON_FORM = "vllm:x"
HINT_URL = "Is Prometheus running? Check prometheus[].url"
HINT_SELECTOR = "Check prometheus[].selector (try it in Prometheus's expression browser)"
HINT_TOO_MANY = (
    "Narrow prometheus[].selector (e.g. add a job or namespace matcher), or raise Prometheus's "
    "--query.max-samples / --query.timeout"
)
MAX_ANSWER_BYTES = 64 * 1024 * 1024  # of one answer, decoded (docs/security.md); backfill asks smaller chunks past it
HINT_TOO_LARGE = "Narrow prometheus[].selector (e.g. add a job or namespace matcher)"
# VictoriaMetrics's -search.latencyOffset: its default, and how its /metrics states the value in use
VM_LATENCY_OFFSET_S = 30.0
_LATENCY_OFFSET = re.compile(r'flag\{name="search\.latencyOffset", value="([^"]*)"')
# (name, labels as written, value, timestamp in ms or None) of one answer's sample
Line = tuple[str, str, str, int | None]


class PrometheusError(ScrapeError):
    """A Prometheus source could not be read; the message names the server, the hint the fix.
    ``status``: the HTTP status the server answered with, when it answered one (None otherwise); callers
    decide on it, never on the message, which holds a URL whose port may read "422"."""

    def __init__(self, message: str, hint: str = "", status: int | None = None) -> None:
        super().__init__(message, hint)
        self.status = status


@dataclass
class TargetPage:
    """One target's samples in one answer, written as an exposition page (target label removed)."""

    lines: list[str] = field(default_factory=list)
    ts_ms: int | None = None  # newest sample time
    underscore: bool = False  # some name was stored as vllm_x

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    @property
    def names_form(self) -> str:
        return UNDERSCORE_FORM if self.underscore else COLON_FORM

    def add(self, name: str, labels: str, value: str, ts_ms: int | None) -> None:
        if name.startswith("vllm_"):
            name = "vllm:" + name[5:]
            self.underscore = True
        self.lines.append(f"{name}{{{labels}}} {value}" if labels else f"{name} {value}")
        if ts_ms is not None and (self.ts_ms is None or ts_ms > self.ts_ms):
            self.ts_ms = ts_ms


@dataclass
class Answer:
    """An answer split by target: pages by target name, and the series that had no target label."""

    pages: dict[str, TargetPage]
    unlabelled: list[str]  # a few names of series without the label (for the error message)
    unlabelled_count: int = 0
    via: str = "federate"  # or "query"

    def page(self, target: str) -> TargetPage:
        page = self.pages.get(target)
        if page is None:
            page = self.pages[target] = TargetPage()
        return page


def wanted_selector(selector: str) -> str:
    """``selector`` narrowed to the series the vLLM parser reads (both name forms) and ``up``.

    vLLM exposes ~40 % more series than Sweetspot reads (prefill/decode time, iteration tokens
    buckets): asking only for the wanted ones makes Prometheus's answer that much smaller. A
    selector that names a metric itself is left as it is.
    """
    inner = selector.strip()
    if not inner.startswith("{"):
        return selector
    from collectors.catalogue import wanted_sample_names

    tails = sorted({n.removeprefix("vllm:") for n in wanted_sample_names() if n.startswith("vllm:")})
    others = sorted(n for n in wanted_sample_names() if not n.startswith("vllm:"))
    names = f'vllm[:_]({"|".join(tails)})|{"|".join(others)}|up'
    rest = inner[1:-1].strip()
    return f'{{__name__=~"{names}"{", " + rest if rest else ""}}}'


# -- splitting an answer -------------------------------------------------------------------------
def _label_pattern(label: str) -> re.Pattern[str]:
    # the label as a whole term (not `exported_instance`), with the comma that joins it to the block
    return re.compile(rf'(?:^|,){re.escape(label)}="((?:[^"\\]|\\.)*)",?')


def split_federate(text: str, target_label: str) -> Answer:
    """Group a ``/federate`` page's samples by the value of ``target_label``.

    Plain string operations on the usual line (``name{a="b",...} value timestamp``, the label value
    without escapes): a regular expression per line cost ~30 µs, 0.6 s for 100 vLLM targets here.
    Unusual lines (escapes in the target label's value) take the careful path.
    """
    answer = Answer({}, [])
    key, find = target_label + '="', _label_pattern(target_label)
    for raw in text.split("\n"):
        if not raw or raw[0] == "#":
            continue
        brace, close = raw.find("{"), raw.rfind("}")
        tail = raw[close + 1:].split() if brace > 0 else raw.split()[1:]
        if not tail or len(tail) > 2:
            raise PrometheusError(f"cannot read this /federate line: {raw[:120]!r}", "Is prometheus[].url a Prometheus server?")
        name, block = (raw[:brace], raw[brace + 1:close]) if brace > 0 else (raw.split(None, 1)[0], "")
        ts_ms = _stamp_ms(tail[1]) if len(tail) == 2 else None
        at = block.find(key)
        while at > 0 and block[at - 1] != ",":  # `exported_instance=` is not `instance=`
            at = block.find(key, at + 1)
        end = block.find('"', at + len(key)) if at >= 0 else -1
        if at < 0 or "\\" in block[at:end + 1]:
            _place(answer, find, name, block, tail[0], ts_ms)  # absent, or escaped: the careful path
            continue
        rest = block[:max(at - 1, 0)] + block[end + 1:] if at else block[end + 2:]
        answer.page(block[at + len(key):end]).add(name, rest, tail[0], ts_ms)
    return answer


def split_query(result: list[dict[str, Any]], target_label: str) -> Answer:
    """Group an instant query's vector by ``target_label`` (values written as page lines)."""
    answer = Answer({}, [], via="query")
    for series in result:
        metric, point = _metric(series), series.get("value") if isinstance(series, dict) else None
        name = metric.pop("__name__", "")
        target = metric.pop(target_label, None)
        if not isinstance(point, list) or len(point) != 2 or seconds(point[0]) is None:
            raise PrometheusError(f"cannot read this sample of the query answer: {str(series)[:120]}",
                                  "Is prometheus[].url a Prometheus server?")
        ts, value = point[0], sample_value(point[1])
        if target is None or value is None:
            answer.unlabelled_count += 1
            if len(answer.unlabelled) < 3:
                answer.unlabelled.append(f"{name}{{{_block(metric)}}}")
            continue
        answer.page(target).add(name, _block(metric), str(value), int(float(ts) * 1000))
    return answer


def _metric(series: Any) -> dict[str, str]:
    """A series' labels, as strings (an answer's shape is checked, never trusted)."""
    metric = series.get("metric") if isinstance(series, dict) else None
    if not isinstance(metric, dict):
        return {}
    return {str(k): str(v) for k, v in metric.items()}


def sample_value(value: Any) -> str | None:
    """A sample's value as written on a page line, None unless a number (``NaN`` and ``+Inf`` are):
    a value is data, never the rest of a line."""
    text = str(value)
    try:
        float(text)
    except ValueError:
        return None
    return None if len(text) > 64 or any(c.isspace() for c in text) else text


def seconds(value: Any) -> float | None:
    """A timestamp of the JSON API in seconds, None unless a finite number."""
    try:
        ts = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return ts if math.isfinite(ts) else None


def _stamp_ms(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise PrometheusError(f"cannot read this /federate timestamp: {text[:40]!r}", "Is prometheus[].url a Prometheus server?") from None


def _block(labels: Mapping[str, str]) -> str:
    return ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def _place(answer: Answer, find: re.Pattern[str], name: str, labels: str, value: str, ts_ms: int | None) -> None:
    found = find.search(labels)
    if found is None:
        answer.unlabelled_count += 1
        if len(answer.unlabelled) < 3:
            answer.unlabelled.append(f"{name}{{{labels}}}")
        return
    target = _unescape(found.group(1))
    rest = (labels[: found.start()] + ("," if found.start() and found.end() < len(labels) else "") + labels[found.end():]).strip(",")
    answer.page(target).add(name, rest, value, ts_ms)


def values_by_target(answer: Answer) -> dict[str, float]:
    """The sum of each target's sample values (the gateway's queue depth across its series)."""
    out: dict[str, float] = {}
    for target, page in answer.pages.items():
        total = 0.0
        for line in page.lines:
            value = float(line.rsplit(" ", 1)[1])
            if not math.isnan(value):
                total += value
        out[target] = total
    return out


# -- talking to the server -----------------------------------------------------------------------
def _split_userinfo(url: str) -> tuple[str, httpx.BasicAuth | None]:
    """The base URL without its userinfo or a trailing slash, and the basic auth it held."""
    try:
        bare, auth = split_userinfo(url)
    except httpx.InvalidURL:  # the request says so; never with the password
        bare, auth = masked(url), None
    return bare.rstrip("/"), auth


def shown_url(url: str) -> str:
    """The URL without its userinfo and with its query's credentials masked, for messages and logs."""
    return masked(_split_userinfo(url)[0])


class TooLarge(PrometheusError):
    """An answer over :data:`MAX_ANSWER_BYTES` (backfill then asks for fewer steps at once)."""


class PrometheusClient:
    """One kept-alive HTTP client for one Prometheus source (used by one thread at a time)."""

    def __init__(self, source: PrometheusSettings, timeout_s: float) -> None:
        self.source = source
        self.base, auth = _split_userinfo(source.url)
        self.shown = masked(self.base)  # the base URL in messages
        headers = {"Accept-Encoding": ACCEPT_ENCODING, **source.http.headers}
        if source.http.bearer_token:
            headers["Authorization"] = f"Bearer {source.http.bearer_token}"
        verify: Any = True
        self._ca_problem = ""  # a CA file that cannot be used: each read fails saying so (read without blocking)
        if source.http.tls_verify and source.http.ca_file:
            try:
                verify = ca_context(source.http.ca_file)
            except (OSError, ssl.SSLError, ValueError, BodyError) as exc:
                self._ca_problem = f"cannot use prometheus[].http.ca_file {visible(source.http.ca_file)!r}: {ca_reason(exc)}"
        if not source.http.tls_verify:
            verify = False
            log.warning("prometheus %s: TLS certificates are not verified (http.tls_verify = false)", shown_url(source.url))
        self.timeout_s = timeout_s
        # trust_env off: the proxy is the one configured (http.proxy), never one from the environment
        # lookups and connections draw on each request's deadline (core/deadline.py)
        self.client = deadline.client(timeout_s, auth=auth, headers=headers, verify=verify, proxy=source.http.proxy or None)
        self._loop = asyncio.Runner()
        self.federate: bool | None = None  # unknown until the server answered once
        self._kind: str | None = None if source.kind == "auto" else source.kind
        self._latency_offset_s = VM_LATENCY_OFFSET_S

    def close(self) -> None:
        try:
            self._loop.run(self.client.aclose())
        finally:
            self._loop.close()

    def kind(self) -> str:
        """``prometheus`` or ``victoriametrics``: the setting, else what the server's own ``/metrics`` (at
        the origin's root: a vmselect URL's ``/select/0/prometheus`` path has it there) says, asked once.
        A server that does not answer it is taken for a Prometheus."""
        if self._kind is None:
            parts = httpx.URL(self.base)
            try:
                request = self.client.build_request("GET", str(parts.copy_with(path="/metrics", query=None)))
                page = self._loop.run(self._send(request))
                text = page.text if page.status_code == 200 else ""
            except (httpx.HTTPError, ScrapeError, BodyError, TimeoutError):  # unreachable, too large, or refused: the query will say
                text = ""
            self._kind = "victoriametrics" if "vm_app_version" in text else "prometheus"
            found = _LATENCY_OFFSET.search(text)
            if found:
                self._latency_offset_s = _seconds(found.group(1))
            log.info("prometheus %s: a %s server%s", self.shown, self._kind,
                     f" (-search.latencyOffset {self._latency_offset_s:g} s)" if self._kind == "victoriametrics" else "")
        return self._kind

    def settled_before(self, now: float) -> float:
        """The newest instant whose range-query values are final: VictoriaMetrics hides the samples of its
        last ``-search.latencyOffset`` (30 s by default) from range queries and repeats the one before
        them at every step of that span; a Prometheus answers up to ``now``."""
        return now - self._latency_offset_s if self.kind() == "victoriametrics" else now

    def current(self, selector: str, target_label: str) -> Answer:
        """The latest sample of every series ``selector`` matches, split by target."""
        if self.federate is not False:
            answer = self._get("/federate", {"match[]": selector}, allow_missing=True)
            if answer is not None:
                self.federate = True
                return split_federate(answer.text, target_label)
            self.federate = False  # Thanos, Mimir: no /federate; the query API from now on
        result = self.query(selector)
        answer_ = split_query(result, target_label)
        # An instant query stamps each sample with the evaluation time: ask when each target was
        # scraped. timestamp() drops the name, so the name is copied to a label first (or series that
        # differ by name only would collide).
        named = f'label_replace({selector}, "sweetspot_name", "$1", "__name__", "(.+)")'
        stamps = self.query(f"max by ({target_label}) (timestamp({named}))")
        for series in stamps:
            name = series.get("metric", {}).get(target_label)
            page = answer_.pages.get(name) if name is not None else None
            if page is not None:
                page.ts_ms = int(float(series["value"][1]) * 1000)
        return answer_

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's result vector."""
        return self._api("/api/v1/query", {"query": promql})["result"]

    def series(self, selector: str, start: float, end: float) -> list[dict[str, str]]:
        """The label sets of the series ``selector`` matched at any time in [start, end] (/api/v1/series):
        a target no longer scraped has none at "now", and still its history."""
        return self._api("/api/v1/series", {"match[]": selector, "start": f"{start:.3f}", "end": f"{end:.3f}"})

    def query_range(self, promql: str, start: float, end: float, step_s: float) -> list[dict[str, Any]]:
        """A range query's result matrix (``values``: [[ts, "v"], ...] per series)."""
        params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"}
        return self._api("/api/v1/query_range", params)["result"]

    def _api(self, path: str, params: Mapping[str, str]) -> Any:
        answer = self._get(path, params)
        assert answer is not None
        hint = f"{HINT_URL} (the server's base URL, without /api/v1)"
        try:
            body = answer.json()
        except (ValueError, RecursionError):  # not JSON, or nested deeper than a parser follows
            raise PrometheusError(f"{self.shown}{path} did not answer JSON", hint) from None
        if not isinstance(body, dict):
            raise PrometheusError(f"{self.shown}{path} answered a JSON {type(body).__name__}, not Prometheus's object", hint)
        if body.get("status") != "success":
            raise PrometheusError(f"{self.shown}{path}: {str(body.get('error', body))[:200]}", HINT_SELECTOR)
        data = body.get("data")
        listed = path.endswith("/series")
        if not (isinstance(data, list) if listed else isinstance(data, dict) and isinstance(data.get("result"), list)):
            raise PrometheusError(f"{self.shown}{path} answered no {'list' if listed else 'result list'} "
                                  f"in its data ({str(data)[:80]})", hint)  # fmt: skip
        return data

    def _get(self, path: str, params: Mapping[str, str], allow_missing: bool = False) -> httpx.Response | None:
        if self._ca_problem:
            raise PrometheusError(self._ca_problem, "Check prometheus[].http.ca_file: a readable PEM file of the CA "
                                  "that signed the server's certificate")  # fmt: skip
        url = self.base + path
        try:
            answer = self._loop.run(self._send(self.client.build_request("GET", url, params=params)))
        except BodyError as exc:
            raise TooLarge(str(exc), HINT_TOO_LARGE) from None
        except (TimeoutError, httpx.TimeoutException):
            raise PrometheusError(
                f"Prometheus at {self.shown} did not answer within {self.timeout_s:g} s",
                "Raise scrape_timeout_s, or narrow prometheus[].selector",
            ) from None
        except (httpx.ProxyError, httpx.ConnectError) as exc:
            if self.source.http.proxy:  # through a proxy, the connection that failed is the proxy's
                raise PrometheusError(f"cannot reach Prometheus at {self.shown} through the proxy "
                                      f"{shown_url(self.source.http.proxy)} ({_reason(exc)})", "Check prometheus[].http.proxy") from None
            raise PrometheusError(f"cannot reach Prometheus at {self.shown} ({scrubbed(_reason(exc), self.source.http)})",
                                  HINT_URL) from None
        except httpx.LocalProtocolError:  # its text quotes the header that could not be sent: never shown
            raise PrometheusError(f"cannot send the request to Prometheus at {self.shown}: a header or the bearer token is "
                                  "not valid HTTP (the value is not shown)",
                                  "Check prometheus[].http.headers and the variable http.bearer_token_env names") from None
        except httpx.HTTPError as exc:
            raise PrometheusError(f"cannot read Prometheus at {self.shown} ({type(exc).__name__}: "
                                  f"{scrubbed(masked(str(exc)), self.source.http)})", HINT_URL) from None
        if answer.status_code == 404 and allow_missing:
            return None
        if answer.status_code == 200:
            return answer
        raise _status_error(masked(url), answer, self.source)


    async def _send(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``, following redirects as the fetcher does (:func:`redirect_target`): within
        the source's origin, or beyond it without the source's headers, token or basic auth. The
        whole within ``timeout_s``; the answer read whole (bounded) before it is returned."""
        crossed = False
        # one deadline for the request, the lookup included (core/deadline.py)
        with deadline.bound(self.timeout_s):
            async with asyncio.timeout(self.timeout_s):
                for _ in range(MAX_REDIRECTS + 1):
                    if crossed:
                        for name in (*self.source.http.headers, "Authorization"):
                            request.headers.pop(name, None)
                    answer = await self.client.send(request, auth=None if crossed else httpx.USE_CLIENT_DEFAULT, stream=True)
                    try:
                        if not answer.is_redirect:
                            body = await read_bounded(answer, MAX_ANSWER_BYTES, f"{self.shown}{request.url.path}")
                            plain = {k: v for k, v in answer.headers.items() if k.lower() not in ("content-encoding", "content-length")}
                            return httpx.Response(answer.status_code, headers=plain, content=body, request=request)
                        target, left = redirect_target(self.base, answer, self.source.http, HINT_URL)
                    finally:
                        await answer.aclose()
                    crossed = crossed or left
                    request = self.client.build_request("GET", target)
        raise PrometheusError(f"{self.shown}: more than {MAX_REDIRECTS} redirects", HINT_URL)


def _seconds(text: str) -> float:
    """A Go duration as VictoriaMetrics writes its flags (``30s``, ``1m30s``, ``500ms``) in seconds;
    the default offset when it is not one."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    parts = re.findall(r"([0-9.]+)(ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return VM_LATENCY_OFFSET_S
    return sum(float(n) * units[u] for n, u in parts)


def _reason(exc: Exception) -> str:
    cause: BaseException = exc
    while cause.__cause__ is not None or cause.__context__ is not None:  # the innermost: anyio wraps a refusal
        cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
    text = str(exc) + " " + str(cause)
    if isinstance(cause, ConnectionRefusedError) or "refused" in text.lower():
        return "connection refused"
    if "certificate" in text.lower():
        return "its TLS certificate is not trusted here; set prometheus[].http.ca_file"
    return masked(str(exc)) or type(exc).__name__


def _status_error(url: str, answer: httpx.Response, source: PrometheusSettings) -> PrometheusError:
    # a server may echo the credentials it was sent (the URL's, a header, the token): scrubbed
    detail = visible(masked(scrubbed(_error_text(answer), source.http, source.url)), 200)
    code = answer.status_code
    if code in (401, 403):
        return PrometheusError(f"{url} answered {code} ({detail})",
                               "Check prometheus[].http.bearer_token_env, the user:password in prometheus[].url, or http.headers",
                               status=code)  # fmt: skip
    if code == 422:
        return PrometheusError(f"{url} refused the query (422: {detail})", HINT_TOO_MANY if "sample" in detail else HINT_SELECTOR,
                               status=code)  # fmt: skip
    if code == 503:
        return PrometheusError(f"{url} could not answer (503: {detail})", HINT_TOO_MANY, status=code)
    if code == 400:
        return PrometheusError(f"{url} refused the selector (400: {detail})", HINT_SELECTOR, status=code)
    return PrometheusError(f"{url} answered {code} ({detail})", HINT_URL, status=code)


def _error_text(answer: httpx.Response) -> str:
    """What an error answer says: its JSON ``error``, else its text; any body (a list, a 10^5-digit
    number, nesting past the parser's depth, bytes that are not UTF-8) gives a text, never an error."""
    try:
        body = answer.json()
    except (ValueError, RecursionError):
        return answer.content[:400].decode("utf-8", errors="replace").strip()[:200] or answer.reason_phrase
    error = body.get("error") if isinstance(body, dict) else None
    return (str(error) if error else repr(body)[:200])[:200]


def matrix_rows(result: list[dict[str, Any]], target_label: str) -> Iterator[tuple[str, str, str, list[list[Any]]]]:
    """(target, name, labels without the target label, values) per series of a range answer."""
    for series in result:
        metric = _metric(series)
        name = metric.pop("__name__", "")
        target = metric.pop(target_label, None)
        values = series.get("values") if isinstance(series, dict) else None
        if target is not None and isinstance(values, list):
            yield target, name, _block(metric), values
