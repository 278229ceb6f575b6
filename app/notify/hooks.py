"""Notifications over HTTP beside e-mail, through the same outbox: an Alertmanager's v2 API and a
generic JSON webhook (docs/alerts.md, Alertmanager and webhooks).

A group's notification is composed when it is queued (:func:`compose`: the alerts as Prometheus
labels and annotations, kept in the outbox row) and turned into its body when it is sent
(:func:`body`), so an Alertmanager alert's ``endsAt`` counts from the POST that carries it, not
from the queueing. Alertmanager gets the list of alerts Prometheus would POST; the webhook gets
Alertmanager's own webhook body (version 4) with a Slack-compatible ``text``. A 2xx answer is
delivery; a 5xx, a 429, a timeout or a refused connection is retried with the channel's backoff;
any other 4xx is a clear error, not retried (the request itself is wrong: URL, token, headers); a
3xx is not followed (the POST would lose its body) and the error says where it points.

Each POST has one wall-clock deadline (``timeout_s``) for the whole of it, from the connection to
the answer's last byte read, so a receiver trickling its answer holds nothing past it; of the
answer at most :data:`MAX_ANSWER_BYTES` are read (its first line is all that is kept).
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from typing import Any

import httpx

from app.alerts.model import RESOLVED, AlertState
from app.notify import message
from app.notify.channels import prefix
from app.notify.grouping import Due, Grouper, grouped
from app.notify.outbox import Notification, Outgoing
from collectors.fetch import ca_context, ca_reason, masked, scrubbed, split_userinfo
from core import deadline
from core.bounded import TooLarge, read_head
from core.channels import HttpChannel
from core.errors import SweetspotError
from core.settings import AlertmanagerSettings, WebhookSettings
from core.text import MAX_HEADER, visible

log = logging.getLogger(__name__)
USER_AGENT = "sweetspot-notifier"
MAX_ANSWER_BYTES = 64 * 1024  # of a receiver's answer, read at most this much (200 characters are kept)


class HookError(SweetspotError):
    """A POST the receiver did not accept; ``retry`` False when sending it again cannot help."""

    def __init__(self, message: str, hint: str = "", retry: bool = True) -> None:
        super().__init__(message, hint)
        self.retry = retry


class DeadlineError(HookError):
    """A POST not over within its deadline (retried with backoff, as a timeout)."""


def grouper(channel: HttpChannel, settings: WebhookSettings) -> Grouper:
    to = (channel.shown(settings),)
    return lambda state: grouped(state, settings.group_by, to, prefix(channel))


def compose(channel: HttpChannel, due: Due, dashboard_url: str, now: float, rule_of: message.RuleOf) -> Outgoing:
    """The notification of ``due``: its alerts as Prometheus labels and annotations, and its text."""
    alerts = tuple(_alert(s, dashboard_url, now, message.title(s, rule_of)) for s in (*due.firing, *due.resolved))
    subject = message.subject(due, rule_of)
    # names are data: each on its own line whatever it holds (a model name cannot forge a line of the text)
    lines = [visible(subject, MAX_HEADER),
             *(f"- {visible(message.title(s, rule_of))} ({s.severity}) on {visible(_where(s))}: {visible(s.summary, 1000)}"
               for s in due.firing),
             *(f"- resolved: {visible(message.title(s, rule_of))} on {visible(_where(s))}" for s in due.resolved)]  # fmt: skip
    return Outgoing(due.group_key, due.kind, due.recipients, subject, "\n".join(lines), "", {}, alerts, channel=channel.name)


def _where(state: AlertState) -> str:
    return f"{state.target} / {state.model}" if state.model else state.target


def _alert(state: AlertState, dashboard_url: str, now: float, title: str) -> dict[str, Any]:
    labels = {**state.labels, "alertname": state.rule, "severity": state.severity, "target": state.target}
    if state.model:
        labels["model"] = state.model
    description = f"{title} ({state.severity}) on {_where(state)}: {state.summary}"
    annotations = {"summary": state.summary, "description": description}
    if state.recommendation:
        annotations["recommendation"] = state.recommendation
    return {
        "labels": labels, "annotations": annotations, "state": state.state,
        "starts_at": state.firing_since or state.pending_since or int(now),
        "ends_at": state.resolved_at if state.state == RESOLVED else None,
        "generator_url": message.dashboard_link(dashboard_url, state, now),
    }  # fmt: skip


def body(channel: HttpChannel, item: Notification, settings: WebhookSettings, dashboard_url: str, now: float) -> Any:
    """What is POSTed for a stored notification, at ``now`` (the channel's own shape)."""
    return channel.body(item, settings, dashboard_url, now)


class Sender:
    """The HTTP settings of one channel (headers, token, CA, proxy) and its POSTs, each in a client of
    its own on an event loop of its own: the deadline is asyncio's, which ends any read however it trickles."""

    def __init__(self, channel: HttpChannel, settings: WebhookSettings | AlertmanagerSettings, dashboard_url: str) -> None:
        self.channel, self.settings, self.dashboard_url = channel, settings, dashboard_url
        self.url, self.auth = split_userinfo(channel.endpoint(settings))
        self.headers = {"User-Agent": USER_AGENT, "Content-Type": "application/json", **settings.http.headers}
        if settings.http.bearer_token:
            self.headers["Authorization"] = f"Bearer {settings.http.bearer_token}"
        self.verify: Any = settings.http.tls_verify  # a CA file's context is made at each POST (_verify)
        if not settings.http.tls_verify:
            log.warning("alerts.%s: TLS certificates are not verified (http.tls_verify = false)", channel.name)

    def send(self, item: Notification, now: float) -> str:
        """POST ``item``; the receiver's answer (``HTTP 200 …``), or :class:`HookError`."""
        payload = json.dumps(body(self.channel, item, self.settings, self.dashboard_url, now))
        where, key = self.channel.shown(self.settings), f"alerts.{self.channel.name}"
        try:
            self.verify = self._verify(key)
            status, text, location = asyncio.run(self._post(payload))
        except TimeoutError:
            raise DeadlineError(f"{where} did not answer within {self.settings.timeout_s:g} s (a receiver that is slow, "
                                "or trickles its answer)", f"Check {key}.url; {key}.timeout_s is the deadline") from None
        except (httpx.LocalProtocolError, UnicodeError) as exc:  # its text quotes the header: never shown
            raise HookError(f"cannot send to {where}: a header or the bearer token is not valid HTTP ({type(exc).__name__}; "
                            "the value is not shown)", f"Check {key}.http.headers and {key}.http.bearer_token_env", retry=False) from None
        except (httpx.HTTPError, OSError) as exc:
            raise HookError(f"cannot reach {where} ({scrubbed(_reason(exc), self.settings.http)})", f"Check {key}.url") from None
        # a receiver may echo the credentials it was sent (the URL's, a header, the token): scrubbed
        text = scrubbed(f"HTTP {status} {text}".strip(), self.settings.http, self.channel.endpoint(self.settings))
        if 200 <= status < 300:
            return text
        if status >= 500 or status == 429:
            raise HookError(f"{where} answered {text}", f"the receiver failed; retried with backoff ({key}.retry_initial_s)")
        if 300 <= status < 400:
            pointed = f"to {masked(location)!r}" if location else "without a Location"
            raise HookError(f"{where} answered {text}, redirecting {pointed}: a notification is not re-POSTed elsewhere",
                            f"Set {key}.url to where it points; not retried", retry=False)  # fmt: skip
        hint = (f"Check the token ({key}.http.bearer_token_env) and headers ({key}.http.headers)"
                if status in (401, 403) else f"Check {key}.url (and for a webhook what it expects)")  # fmt: skip
        raise HookError(f"{where} refused the notification: {text}", f"{hint}; not retried", retry=False)

    async def _post(self, payload: str) -> tuple[int, str, str]:
        """(status, the answer's first 200 characters, its Location), all within the deadline."""
        http = self.settings.http
        # trust_env off: the proxy is the one configured (http.proxy), never one from the environment
        # this notification's own deadline, drawn on by the lookup (core/deadline.py: a receiver's name
        # whose lookup never answers holds no thread asyncio.run would wait for), the connection and the read
        with deadline.bound(self.settings.timeout_s):
            async with asyncio.timeout(self.settings.timeout_s), deadline.client(
                    self.settings.timeout_s, auth=self.auth, verify=self.verify, proxy=http.proxy or None) as client, \
                    client.stream("POST", self.url, content=payload, headers=self.headers) as answer:  # fmt: skip
                data = await read_head(answer, MAX_ANSWER_BYTES)
        first = data.decode("utf-8", errors="replace").strip().splitlines()
        return answer.status_code, (first[0] if first else "")[:200], answer.headers.get("Location", "")

    def _verify(self, key: str) -> Any:
        """What the POST verifies TLS with: False, this machine's store (True), or the context of
        ``http.ca_file``, read without blocking (a FIFO as the CA once held the channel)."""
        http = self.settings.http
        if not http.tls_verify or not http.ca_file:
            return http.tls_verify
        try:
            return ca_context(http.ca_file)
        except (OSError, ssl.SSLError, ValueError, TooLarge) as exc:
            raise HookError(f"cannot use {key}.http.ca_file {visible(http.ca_file)!r}: {ca_reason(exc)}",
                            f"Check {key}.http.ca_file: a readable PEM file of the receiver's CA") from None

    def close(self) -> None:
        """Nothing is kept open between POSTs."""


def _reason(exc: BaseException) -> str:
    cause: BaseException = exc
    while cause.__cause__ is not None or cause.__context__ is not None:
        cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    return (str(cause) or type(cause).__name__).splitlines()[0][:200]
