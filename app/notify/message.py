"""The alert e-mail: subject, plain text, HTML with inline charts, and the MIME message. Pure.

Subject ``[FIRING:2] prod-70b: preemptions, TTFT P95`` (``[RESOLVED] …`` once nothing is left
firing). For each alert: the clause that broke (value against threshold and window, as the
evaluator's summary says it), since when, the recommendation and a link to the dashboard's
Overview over the incident (``dashboard_url`` + the URL parameters of app/ui/url_params.py).

Every name in it (rule, target, model, group values) comes from outside: it is written as
:mod:`core.text` makes it safe for its place (a CR/LF or escape sequence shown as ``\r\n``,
``\x1b``, lengths bounded), so a hostile name costs its own field, never the e-mail.
"""

from __future__ import annotations

import base64
import html
import time
from collections.abc import Callable, Sequence
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Any
from urllib.parse import urlencode

from app.alerts.model import AlertState
from app.alerts.rules import Rule
from app.notify.grouping import Due
from app.notify.images import WIDTH
from app.notify.outbox import Notification, Outgoing
from core.settings import EmailSettings
from core.text import header, visible

LEAD_S = 1800.0  # the dashboard link starts this long before the alert's condition first held
SUMMARY_LIMIT = 1000  # characters of an alert's summary or recommendation in an e-mail
Chart = Callable[[AlertState], bytes | None]
RuleOf = Callable[[AlertState], Rule | None]  # the rule an alert's state comes from (app.alerts.rules.declared)


def title(state: AlertState, rule_of: RuleOf) -> str:
    """The alert's short name: the title its rule declares, else the rule's name with spaces."""
    rule = rule_of(state)
    return visible(rule.title if rule is not None and rule.title else state.rule.replace("_", " "))


def when(ts: float | None) -> str:
    return "—" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(ts))


def dashboard_link(base: str, state: AlertState, now: float) -> str:
    """The Overview over the incident: from ``LEAD_S`` before it began until the next minute after ``now``."""
    if not base:
        return ""
    began = state.pending_since or state.firing_since or now
    start, end = began - LEAD_S, (now // 60 + 1) * 60
    params = {"target": state.target, **({"model": state.model} if state.model else {}), "range": "custom",
              "start": _local(start), "end": _local(end)}  # fmt: skip
    return f"{base.rstrip('/')}/?{urlencode(params)}"


def _local(ts: float) -> str:
    # st.datetime_input reads naive local times (%Y-%m-%dT%H:%M) from the URL (app/ui/url_params.py)
    return time.strftime("%Y-%m-%dT%H:%M", time.localtime(ts))


def subject(due: Due, rule_of: RuleOf) -> str:
    names = list(dict.fromkeys(title(s, rule_of) for s in (due.firing or due.resolved)))
    head = f"[FIRING:{len(due.firing)}]" if due.firing else "[RESOLVED]"
    return header(f"{head} {visible(due.label)}: {', '.join(names)}")


def compose(due: Due, email: EmailSettings, now: float, chart: Chart, rule_of: RuleOf) -> Outgoing:
    """The e-mail for ``due``; ``chart(state)`` draws the PNG of a firing alert's figure (None: none);
    ``rule_of(state)`` is the rule that declares its title."""
    images: dict[str, str] = {}
    text: list[str] = []
    blocks: list[str] = []
    for heading, alerts in (("Firing", due.firing), ("Resolved", due.resolved)):
        if not alerts:
            continue
        text.append(f"{heading}:")
        blocks.append(f"<h2>{heading}</h2>")
        for state in alerts:
            png = chart(state) if heading == "Firing" else None
            cid = ""
            if png is not None:
                cid = f"chart{len(images) + 1}"
                images[cid] = base64.b64encode(png).decode()
            link = dashboard_link(email.dashboard_url, state, now)
            name = title(state, rule_of)
            text.extend(_text(state, name, heading == "Resolved", link))
            blocks.append(_html(state, name, heading == "Resolved", link, cid))
    # nothing to silence in an e-mail that only says alerts resolved
    footer = "Sent by Sweetspot." + (" Silence it: python -m app alerts silence add (docs/alerts.md)." if due.firing else "")
    head = subject(due, rule_of)
    body_text = "\n".join([head, "", *text, footer]) + "\n"
    body_html = (
        f"<html><body style='font-family:sans-serif'><h1 style='font-size:18px'>{html.escape(head)}</h1>"
        + "".join(blocks) + f"<p style='color:#777'>{html.escape(footer)}</p></body></html>"
    )  # fmt: skip
    about = tuple(summary_of(s) for s in (*due.firing, *due.resolved))
    return Outgoing(due.group_key, due.kind, due.recipients, head, body_text, body_html, images, about)


def summary_of(state: AlertState) -> dict[str, Any]:
    """What the outbox keeps of an alert a notification was about."""
    return {"rule": state.rule, "target": state.target, "model": state.model, "state": state.state,
            "severity": state.severity}  # fmt: skip


def _text(state: AlertState, name: str, resolved: bool, link: str) -> list[str]:
    lines = [f"- {name} ({state.severity}) on {_where(state)}: {_summary(state)}"]
    lines.append(f"  firing since {when(state.firing_since)}" + (f", resolved at {when(state.resolved_at)}" if resolved else ""))
    if state.recommendation and not resolved:
        lines.append(f"  What to do: {visible(state.recommendation, SUMMARY_LIMIT)}")
    if link:
        lines.append(f"  Dashboard: {link}")
    return [*lines, ""]


def _html(state: AlertState, name: str, resolved: bool, link: str, cid: str) -> str:
    e = html.escape
    colour = "#2ca02c" if resolved else ("#d62728" if state.severity == "critical" else "#ff7f0e")
    parts = [
        f"<div style='border-left:4px solid {colour};padding-left:10px;margin:12px 0'>",
        f"<p><b>{e(name)}</b> ({e(state.severity)}) on {e(_where(state))}<br>{e(_summary(state))}</p>",
        f"<p>Firing since {e(when(state.firing_since))}"
        + (f", resolved at {e(when(state.resolved_at))}" if resolved else "") + "</p>",
    ]  # fmt: skip
    if state.recommendation and not resolved:
        parts.append(f"<p><b>What to do:</b> {e(visible(state.recommendation, SUMMARY_LIMIT))}</p>")
    if cid:
        parts.append(f"<p><img src='cid:{cid}' alt='{e(name)}, last hour' width='{WIDTH}'></p>")
    if link:
        parts.append(f"<p><a href='{e(link)}'>Open the dashboard at this incident</a></p>")
    return "".join(parts) + "</div>"


def _where(state: AlertState) -> str:
    return f"{visible(state.target)} / {visible(state.model)}" if state.model else visible(state.target)


def _summary(state: AlertState) -> str:
    return visible(state.summary, SUMMARY_LIMIT)


def mime(notification: Notification, sender: str, domain: str = "sweetspot.local") -> EmailMessage:
    """The RFC 5322 message of a stored notification. Its Message-ID is derived from the outbox id,
    so the one duplicate a crash can cause (docs/alerts.md) carries the same id as the first copy."""
    msg = EmailMessage()
    # header() again: a notification queued before names were made safe must still be deliverable
    msg["Subject"] = header(notification.subject)
    msg["From"] = sender
    msg["To"] = ", ".join(notification.recipients)
    msg["Date"] = formatdate(notification.created_at, localtime=True)
    msg["Message-ID"] = f"<sweetspot.{notification.created_at}.{notification.id}@{domain}>"
    msg["X-Sweetspot-Group"] = header(notification.group_key)
    msg.set_content(notification.body_text)
    msg.add_alternative(notification.body_html, subtype="html")
    html_part = msg.get_body(("html",))
    assert isinstance(html_part, EmailMessage)
    for cid, data in notification.images.items():
        html_part.add_related(base64.b64decode(data), maintype="image", subtype="png", cid=f"<{cid}>")
    return msg


def trial_message(sender: str, to: Sequence[str], now: float) -> EmailMessage:
    """The message of ``alerts test-email``."""
    msg = EmailMessage()
    msg["Subject"] = "[TEST] Sweetspot alert e-mail works"
    msg["From"] = sender
    msg["To"] = ", ".join(to)
    msg["Date"] = formatdate(now, localtime=True)
    msg["Message-ID"] = make_msgid("sweetspot-test")
    msg.set_content("This is a test message from python -m app alerts test-email. Alert e-mails will arrive like this one.\n")
    return msg
