"""What a notification channel is (:class:`Channel`), and the shapes of what it reads.

A channel is one module of this package and one line in :data:`core.channels.CHANNELS`: its table
``[alerts.<name>]`` (a :class:`core.settings.DeliverySettings`), the checks of that table, which of
its fields hold a credential, and, for an HTTP channel, where it POSTs and what. The notifier, the
loader's checks, the limits, ``config``'s masking, ``status`` and the docs loop over the tuple; no
code chooses a channel by its name.

This package sits below the settings (the limits read it), so it names the settings' shapes as
protocols here rather than importing them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import httpx

from core.redact import masked
from core.text import terminal
from core.url_check import url_problem

GROUP_BY_KEYS = ("rule", "target", "model", "severity")  # what a channel's notifications may be grouped by


class DeliveryTable(Protocol):
    """A channel's table: how its notifications are grouped, timed and retried (DeliverySettings)."""

    @property
    def group_by(self) -> tuple[str, ...]: ...
    @property
    def repeat_interval_s(self) -> float: ...
    @property
    def timeout_s(self) -> float: ...
    @property
    def enabled(self) -> bool: ...


class HttpOptions(Protocol):
    """The HTTP settings of a POSTing channel (HttpSettings)."""

    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def bearer_token(self) -> str: ...


class HttpTable(DeliveryTable, Protocol):
    """The table of a channel that POSTs (WebhookSettings)."""

    @property
    def url(self) -> str: ...
    @property
    def http(self) -> HttpOptions: ...


class Stored(Protocol):
    """A queued notification as the outbox holds it (app.notify.outbox.Notification)."""

    @property
    def group_key(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def body_text(self) -> str: ...
    @property
    def alerts(self) -> Sequence[Mapping[str, Any]]: ...


class Channel(Protocol):
    """A way notifications leave: its ``name`` is its table ``[alerts.<name>]``, the outbox's channel
    and the word ``status`` shows; ``secrets`` are the fields of its table that hold a credential
    (``config --json`` prints them masked: a URL down to its origin, anything else as ``***``)."""

    name: str
    secrets: tuple[str, ...]

    def problems(self, table: Any, key: str) -> Iterator[str]:
        """One line per value of ``table`` (the channel's settings, at ``key``) that cannot be used."""
        ...


@runtime_checkable
class HttpChannel(Channel, Protocol):
    """A channel that POSTs JSON through app/notify/hooks.py's sender (retries, deadline, TLS, proxy)."""

    def endpoint(self, table: Any) -> str:
        """The URL POSTed to."""
        ...

    def shown(self, table: Any) -> str:
        """Where notifications go, as stored, logged and shown (never a credential)."""
        ...

    def body(self, item: Stored, table: Any, dashboard_url: str, now: float) -> Any:
        """The JSON POSTed for ``item`` at ``now``."""
        ...


class Posting:
    """What the POSTing channels share unless they say otherwise: the URL POSTed to as given, shown
    to its origin (a webhook's path often is its secret: a Slack incoming webhook's is), masked by
    ``config --json``, and the HTTP table's checks. A subclass names itself and its ``body``."""

    name = ""
    secrets: tuple[str, ...] = ("url",)

    def problems(self, table: Any, key: str) -> Iterator[str]:
        yield from http_problems(table, key)

    def endpoint(self, table: Any) -> str:
        return str(table.url)

    def shown(self, table: Any) -> str:
        return origin_only(self.endpoint(table))


def group_by_problems(table: DeliveryTable, key: str, known: Sequence[str]) -> Iterator[str]:
    unknown = [k for k in table.group_by if k not in known]
    if unknown:
        yield f"{key}.group_by: {unknown[0]!r} is not one of {', '.join(known)}"


def http_problems(table: HttpTable, key: str) -> Iterator[str]:
    """The checks every POSTing channel's table takes: its URL, its grouping keys."""
    problem = table.url and url_problem(table.url)
    if problem:
        yield f"{key}.url: {problem}"
    yield from group_by_problems(table, key, GROUP_BY_KEYS)


def origin_only(url: str) -> str:
    """``url`` as shown when its path is its secret (a Slack incoming webhook's is): its origin, and
    ``/…`` when it has a path."""
    parts = httpx.URL(masked(url))
    return f"{parts.scheme}://{parts.netloc.decode()}" + ("/…" if parts.path not in ("", "/") else "")


def slack_escape(text: str) -> str:
    """Slack reads ``&``, ``<`` and ``>`` as markup (links, mentions such as ``<!channel>``): alert text is
    data, never markup (Slack's rule: escape exactly these three). Line breaks within a line are shown
    as ``\\n`` (:func:`core.text.terminal`): only the text's own lines break it."""
    return terminal(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat().replace("+00:00", "Z")


def prometheus_alert(a: Mapping[str, Any], valid_s: float, now: float) -> dict[str, Any]:
    """One stored alert as Prometheus POSTs it: a firing one ends ``valid_s`` after this POST unless repeated."""
    ends = a["ends_at"] if a["ends_at"] is not None else now + valid_s
    out = {"labels": a["labels"], "annotations": a["annotations"], "startsAt": iso(a["starts_at"]), "endsAt": iso(ends)}
    if a["generator_url"]:
        out["generatorURL"] = a["generator_url"]
    return out


def valid_for(table: DeliveryTable) -> float:
    """How long a POSTed firing alert holds unless repeated: Prometheus' 4 × max(resend delay, evaluation interval)."""
    return 4 * max(table.repeat_interval_s, 60.0)
