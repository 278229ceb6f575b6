"""Gateway queue depth: requests waiting in front of vLLM (DOMAIN.md §5).

Two kinds of source (``GatewaySettings``):

* ``prometheus``: a metrics endpoint and a sample name. ``a+b`` sums several names (the
  production-stack router: prefill + decoding requests per ``server``); ``a|b`` takes the first
  name the endpoint exposes (a metric renamed across versions). Every sample of a name whose labels
  match ``labels`` counts; samples are summed (one per server, pool or cluster).
* ``json``: a JSON document and a dotted path; list indexes are numbers (``data.0.queue``).

A name the endpoint does not expose at all raises :class:`ScrapeError` naming the metric and the
setting to fix. A family that is declared but has no sample yet (a labelled gauge before its first
request), or JSON ``null``, gives ``queue_depth=None``: absent, not zero.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Collection, Sequence
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from app.errors import ScrapeError
from app.settings import GatewaySettings, HttpSettings, apply_gateway_preset
from collectors.expfmt import SelectiveParser, require_exposition
from collectors.fetch import Fetcher, fetch_text, masked
from collectors.records import GatewayReading

HINT_URL = "Check targets[].gateway.url"
_NAME_AT_LINE_START = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)", re.MULTILINE)
_VALID_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# Blanks other than space, tab and newline (str.splitlines and str.split cut at some of them, the
# selective parser does not): the fast path leaves pages with any of them.
_ASCII_ODD_BLANKS = "\r\x0b\x0c\x1c\x1d\x1e\x1f"
_ODD_BLANK = re.compile(r"[^\S \t\n]")
_CACHE_MAX = 64
_QUERIES: dict[str, _Query] = {}


def read_gateway(
    settings: GatewaySettings, timeout_s: float, fetcher: Fetcher | None = None, http: HttpSettings | None = None
) -> GatewayReading:
    """Fetch the configured source and return its queue depth (requests, summed over samples).

    ``kind = none`` returns ``GatewayReading(None, "none")`` without any request. Unreachable
    source, HTTP error, unparsable text or an absent metric / path raise :class:`ScrapeError`.
    """
    gateway = resolve_preset(settings)
    if gateway.kind == "none":
        return GatewayReading(queue_depth=None, source="none")
    return gateway_from_page(gateway, fetch_text(gateway.url, timeout_s, fetcher, HINT_URL, http or gateway.http))


def gateway_from_page(gateway: GatewaySettings, text: str) -> GatewayReading:
    """The queue depth in ``text``, fetched from ``gateway.url`` (settings with the preset applied)."""
    try:
        if gateway.kind == "prometheus":
            value = queue_from_prometheus(text, gateway.metric, gateway.labels)
            what = gateway.metric
        elif gateway.kind == "json":
            value = queue_from_json(text, gateway.json_path)
            what = gateway.json_path
        else:
            raise ScrapeError(f"gateway kind {gateway.kind!r} unknown", "Set targets[].gateway.kind")
    except ScrapeError as exc:
        raise ScrapeError(f"{masked(gateway.url)}: {exc}", exc.hint) from None
    return GatewayReading(queue_depth=value, source=f"{gateway.preset or gateway.kind} {what}")


def resolve_preset(settings: GatewaySettings) -> GatewaySettings:
    """Settings with the preset applied (the loader does it too; this covers settings built in code)."""
    return apply_gateway_preset(settings)


# -- Prometheus -------------------------------------------------------------------------------------


def queue_from_prometheus(text: str, metric: str, labels: dict[str, str] | None = None) -> float | None:
    """Sum of the samples named by ``metric`` (``a+b``, ``a|b``) whose labels include ``labels``."""
    query = _QUERIES.get(metric) or _query(metric)
    samples, declared = _fast_selected(text, query) or _parse_selected(text, query.wanted)
    values = [_term(term, samples, declared, labels or {}, text) for term in query.terms]
    present = [v for v in values if v is not None]
    return math.fsum(present) if present else None


class _Query:
    """A ``metric`` setting read once: its terms, the names they read, and the fast path's tools."""

    def __init__(self, metric: str) -> None:
        terms = [[name.strip() for name in term.split("|") if name.strip()] for term in metric.split("+")]
        if not metric.strip() or not all(terms):
            raise ScrapeError(f"gateway metric {metric!r} is empty or malformed", "Set targets[].gateway.metric")
        self.terms = terms
        self.wanted = frozenset(name for term in terms for name in term)
        # The fast path reads names the reference parser would accept as names; any other goes the
        # reference's way.
        self.parser = SelectiveParser(self.wanted) if all(map(_VALID_NAME.fullmatch, self.wanted)) else None
        names = "|".join(map(re.escape, sorted(self.wanted, key=len, reverse=True)))
        # HELP and TYPE lines of the wanted names, as _line_name keeps them (fast path only, where
        # no line starts with a blank and the only blanks are spaces and tabs).
        self.comments = re.compile(rf"\n(#[ \t]+(?:HELP|TYPE)[ \t]+(?:{names})(?![^ \t\n])[^\n]*)")
        # comment lines → the names they declare, or None when the fast path cannot vouch for the page
        self.declared: dict[tuple[str, ...], frozenset[str] | None] = {}


def _query(metric: str) -> _Query:
    query = _Query(metric)
    if len(_QUERIES) >= _CACHE_MAX:
        _QUERIES.clear()  # settings are few; endless distinct ones must not grow memory forever
    _QUERIES[metric] = query
    return query


def _fast_selected(text: str, query: _Query) -> tuple[dict[str, list[Any]], frozenset[str]] | None:
    """What _parse_selected returns, read by the selective parser; None when only the reference can say.

    _parse_selected filters lines in Python and parses them with prometheus_client's parser: 45 µs
    of CPU for the simulator's 1.3 KB gateway page (15 µs here), 34 ms for a 0.9 MB Envoy-like page
    (6 ms here). The selective parser reads the same samples (tests/test_expfmt.py) except where
    its docstring says; those pages go the reference's way: a wanted line it refuses (the
    reference may skip it), a ``# TYPE x counter`` of a wanted name (the reference renames the
    samples to ``x_total``), lines the two split or filter differently (a line starting with a
    blank, blanks other than spaces and tabs), and HELP/TYPE lines the reference refuses.
    tests/test_gateway_collector.py checks the two paths against each other on generated pages.
    """
    if query.parser is None or not _plain_blanks(text):
        return None
    try:
        names, _, labels, values = query.parser.parse_columns(text)
    except ScrapeError:
        return None
    comments = tuple(query.comments.findall("\n" + text))
    if comments in query.declared:
        declared = query.declared[comments]
    else:
        declared = _declared(comments, query.wanted)
        if len(query.declared) >= _CACHE_MAX:
            query.declared.clear()
        query.declared[comments] = declared
    if declared is None:
        return None
    samples: dict[str, list[Any]] = {}
    for sample in zip(names, labels, values, strict=True):
        samples.setdefault(sample[0], []).append(sample)
    return samples, declared


def _plain_blanks(text: str) -> bool:
    """No line starts with a blank, and every blank is a space, a tab or a newline.

    Substring tests (C loops over the text) rather than one regular expression: a regex testing
    each character for Unicode whitespace cost 40 µs on a 1.3 KB page.
    """
    if text[:1] in (" ", "\t") or "\n " in text or "\n\t" in text:
        return False
    if text.isascii():
        return not any(blank in text for blank in _ASCII_ODD_BLANKS)
    return _ODD_BLANK.search(text) is None


def _declared(comments: tuple[str, ...], wanted: frozenset[str]) -> frozenset[str] | None:
    """The names the HELP/TYPE lines of a page declare, as the reference reads them; None when the
    reference refuses one, or types a wanted name as a counter (it would rename that name's samples)."""
    try:
        _, declared, counters = _reference(comments)
    except ScrapeError:
        return None
    return None if counters & wanted else frozenset(declared)


def _parse_selected(text: str, wanted: Collection[str]) -> tuple[dict[str, list[Any]], frozenset[str]]:
    """Parse only the lines of the wanted names (gateway payloads such as Envoy's run to megabytes).

    Line filtering is safe: the text format escapes newlines inside label values.
    """
    samples, declared, _ = _reference([line for line in text.splitlines() if _line_name(line) in wanted])
    return samples, frozenset(declared)


def _reference(lines: Sequence[str]) -> tuple[dict[str, list[Any]], set[str], set[str]]:
    """prometheus_client's reading of ``lines``: samples by name, declared names, counter family names."""
    try:
        families = list(text_string_to_metric_families("\n".join(lines) + "\n"))
    except (ValueError, TypeError, IndexError) as exc:
        raise ScrapeError(f"not Prometheus text ({str(exc)[:120]})", HINT_URL) from None
    samples: dict[str, list[Any]] = {}
    declared: set[str] = set()
    counters: set[str] = set()
    for family in families:
        if family.type == "counter":
            counters.add(family.name)
        declared.update({family.name, family.name + "_total"} if family.type == "counter" else {family.name})
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
    return samples, declared, counters


def _line_name(line: str) -> str:
    if line.startswith("#"):
        parts = line.split(maxsplit=3)
        return parts[2] if len(parts) > 2 and parts[1] in ("HELP", "TYPE") else ""
    end = len(line)
    for stop in "{ \t":
        at = line.find(stop)
        if at != -1:
            end = min(end, at)
    return line[:end]


def _term(
    names: list[str], samples: dict[str, list[Any]], declared: frozenset[str], labels: dict[str, str], text: str
) -> float | None:
    # A sample is (name, labels, value, ...): prometheus_client's Sample or the fast path's tuple.
    for name in names:
        if name in samples:
            matching = [s for s in samples[name] if all(s[1].get(k) == v for k, v in labels.items())]
            if not matching:
                seen = "; ".join(sorted({_labels(s[1]) for s in samples[name]})[:3])
                raise ScrapeError(
                    f"no sample of {name} has the labels {_labels(labels)} (seen: {seen})",
                    "Check targets[].gateway.labels",
                )
            values = [s[2] for s in matching if not math.isnan(s[2])]
            return math.fsum(values) if values else None
        if name in declared:
            return None  # declared, no sample yet: absent rather than zero
    raise ScrapeError(f"no metric named {' or '.join(names)}{_near(names[0], text)}", _fix_hint())


def _labels(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def _near(name: str, text: str) -> str:
    if not _NAME_AT_LINE_START.search(text):
        require_exposition(text, HINT_URL)
    names = set(_NAME_AT_LINE_START.findall(text))
    close = difflib.get_close_matches(name, sorted(names), n=3, cutoff=0.6)
    return f" (similar names there: {', '.join(close)})" if close else f" ({len(names)} other names there)"


def _fix_hint() -> str:
    return "Check targets[].gateway.metric (or pick another gateway.preset); the gateway may need its metrics enabled"


# -- JSON -------------------------------------------------------------------------------------------


def queue_from_json(text: str, path: str) -> float | None:
    """The number at dotted ``path`` (``a.b``, ``data.0.queue``; empty path = the whole document).

    JSON ``null`` gives None. A missing key or index, or a value that is not a number, raises
    :class:`ScrapeError` naming the path.
    """
    try:
        node: Any = json.loads(text)
    except ValueError as exc:
        raise ScrapeError(f"not JSON ({str(exc)[:120]})", HINT_URL) from None
    except RecursionError:
        raise ScrapeError("not JSON a collector can read (nested too deeply)", HINT_URL) from None
    walked: list[str] = []
    for part in [p for p in path.split(".") if p] if path else []:
        node = _step(node, part, ".".join(walked) or "(document)")
        walked.append(part)
    if node is None:
        return None
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        raise ScrapeError(
            f"{path or '(document)'} is {type(node).__name__} {str(node)[:60]!r}, not a number", _json_hint()
        )
    return float(node)


def _step(node: Any, part: str, where: str) -> Any:
    if isinstance(node, dict):
        if part not in node:
            keys = ", ".join(sorted(map(str, node))[:8])
            raise ScrapeError(f"no key {part!r} in {where} (keys: {keys})", _json_hint())
        return node[part]
    if isinstance(node, list):
        try:
            return node[int(part)]
        except (ValueError, IndexError):
            raise ScrapeError(
                f"{where} is a list of {len(node)}; {part!r} is not an index in it", _json_hint()
            ) from None
    raise ScrapeError(f"{where} is {type(node).__name__}, cannot take {part!r} from it", _json_hint())


def _json_hint() -> str:
    return "Check targets[].gateway.json_path (dotted, list indexes as numbers: data.0.queue)"
