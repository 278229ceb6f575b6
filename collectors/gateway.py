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
from collections.abc import Collection
from typing import Any

from collectors.expfmt import SelectiveParser, require_exposition
from collectors.fetch import Fetcher, fetch_text
from collectors.records import GatewayReading, Histogram
from collectors.vllm import merge_histograms
from core.errors import ScrapeError
from core.redact import masked
from core.settings import GatewaySettings, HttpSettings, apply_gateway_preset

HINT_URL = "Check targets[].gateway.url"
_NAME_AT_LINE_START = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)", re.MULTILINE)
_VALID_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_COMMENT = re.compile(r"^[^\S\n]*#[^\S\n]+(HELP|TYPE)[^\S\n]+([a-zA-Z_:][a-zA-Z0-9_:]*)[^\S\n]*(\S*)", re.MULTILINE)


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
    wait, note = None, ""
    if gateway.kind == "prometheus" and wait_metric_names(gateway):
        wait, note = wait_from_prometheus(text, wait_metric_names(gateway))
    return GatewayReading(queue_depth=value, source=f"{gateway.preset or gateway.kind} {what}", wait=wait, wait_note=note)


def wait_metric_names(gateway: GatewaySettings) -> tuple[str, ...]:
    """The wait histogram's names (``a|b``: the first exposed), none where unset or ``none``."""
    wait = gateway.wait_metric.strip()
    return () if wait in ("", "none") else tuple(n.strip() for n in wait.split("|") if n.strip())


def wait_from_prometheus(text: str, names: tuple[str, ...]) -> tuple[Histogram | None, str]:
    """The gateway's own wait histogram in ``text``: the first of ``names`` exposed, its series
    (labels other than ``le``) summed on the bounds they share; or None and why (absent, no +Inf
    bucket nor count, a value NaN or negative, a bound that is no number). Never raises: the queue
    depth read from the same page stands whatever its wait histogram is."""
    wanted = {f"{n}_{part}" for n in names for part in ("bucket", "count", "sum")}
    try:
        found, labels, values = SelectiveParser(wanted).parse_columns(text)
    except ScrapeError as exc:
        return None, f"wait histogram unreadable ({str(exc)[:120]})"
    for name in names:
        series: dict[frozenset[tuple[str, str]], dict[str, Any]] = {}
        for sample, lab, value in zip(found, labels, values, strict=True):
            part = sample.removeprefix(name + "_")
            if sample == part or part not in ("bucket", "count", "sum"):
                continue
            key = frozenset((k, v) for k, v in lab.items() if k != "le")
            one = series.setdefault(key, {"buckets": {}, "count": None, "sum": None})
            if part == "bucket":
                try:
                    bound = float(lab.get("le", "nan"))
                except ValueError:
                    bound = math.nan
                if math.isnan(bound):
                    return None, f"{name}_bucket has a bucket whose le={lab.get('le')!r} is not a bound"
                one["buckets"][bound] = value
            else:
                one[part] = value
        if series:
            return _wait_histogram(name, list(series.values()))
    return None, f"no histogram named {' or '.join(names)} on the gateway's page"


def _wait_histogram(name: str, series: list[dict[str, Any]]) -> tuple[Histogram | None, str]:
    histograms = []
    for one in series:
        buckets, count = dict(one["buckets"]), one["count"]
        if math.inf not in buckets and count is not None:
            buckets[math.inf] = count  # a missing +Inf bucket is the _count (DOMAIN.md)
        if math.inf not in buckets:
            return None, f"{name} has no +Inf bucket and no _count: its waits cannot be counted"
        bounds = tuple(sorted(buckets))
        cumulative = tuple(buckets[b] for b in bounds)
        values = [*cumulative, *(v for v in (count, one["sum"]) if v is not None)]
        if not all(map(math.isfinite, values)) or min(values) < 0:
            return None, f"{name} has a NaN, infinite or negative value"
        if any(b < a for a, b in zip(cumulative, cumulative[1:], strict=False)):
            return None, f"{name}'s buckets are not cumulative"
        histograms.append(Histogram(bounds, cumulative, count, one["sum"]))
    return merge_histograms(histograms), ""


def resolve_preset(settings: GatewaySettings) -> GatewaySettings:
    """Settings with the preset applied (the loader does it too; this covers settings built in code)."""
    return apply_gateway_preset(settings)


# -- Prometheus -------------------------------------------------------------------------------------


def queue_from_prometheus(text: str, metric: str, labels: dict[str, str] | None = None) -> float | None:
    """Sum of the samples named by ``metric`` (``a+b``, ``a|b``) whose labels include ``labels``.

    Read with the selective parser (collectors.expfmt): gateway pages such as Envoy's run to
    megabytes, and only the wanted names' lines are looked at. Sample names are read as exposed.
    """
    terms = [[name.strip() for name in term.split("|") if name.strip()] for term in metric.split("+")]
    wanted = {name for term in terms for name in term}
    if not metric.strip() or not all(terms) or not all(map(_VALID_NAME.fullmatch, wanted)):
        raise ScrapeError(f"gateway metric {metric!r} is empty or malformed", "Set targets[].gateway.metric")
    try:
        names, sample_labels, values = SelectiveParser(wanted).parse_columns(text)
    except ScrapeError as exc:
        raise ScrapeError(f"not Prometheus text ({str(exc)[:120]})", HINT_URL) from None
    samples: dict[str, list[Any]] = {}
    for sample in zip(names, sample_labels, values, strict=True):
        samples.setdefault(sample[0], []).append(sample)
    declared = _declared(text, wanted)
    found = [_term(term, samples, declared, labels or {}, text) for term in terms]
    present = [v for v in found if v is not None]
    return math.fsum(present) if present else None


def _declared(text: str, wanted: Collection[str]) -> frozenset[str]:
    """The wanted names a HELP or TYPE line declares (a counter ``x`` declares ``x_total`` too)."""
    declared: set[str] = set()
    for comment, name, kind in _COMMENT.findall(text):
        declared.update((name, name + "_total") if comment == "TYPE" and kind == "counter" else (name,))
    return frozenset(declared.intersection(wanted))


def _term(
    names: list[str], samples: dict[str, list[Any]], declared: frozenset[str], labels: dict[str, str], text: str
) -> float | None:
    # A sample is the selective parser's (name, labels, value) tuple.
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
