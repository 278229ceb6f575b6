"""The generated tables of the hand-written docs pages, each between two markers in its page, so that
a new limit, channel or default rule reaches the docs through ``make docs`` rather than by
hand-pasted rows; the prose around them stays hand-written:

- docs/configuration.md: the limits (core/limits.py ``LIMITS``) and the settings of every POSTing
  channel (core/channels ``HTTP_CHANNELS``, their tables' own help);
- docs/alerts.md: the default rules (app/alerts/rules.py ``DEFAULT_RULES``).

app/reference_doc.py (``make docs``) writes them and ``--check`` fails when one drifted;
tests/test_reference_doc.py runs the same comparison.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.alerts.rules import DEFAULT_RULES
from core.channels import HTTP_CHANNELS
from core.durations import format_duration
from core.limits import LIMITS
from core.settings import AlertsSettings, SweetSpotSettings, iter_settings

DOCS = Path(__file__).resolve().parent.parent / "docs"
# What the shared HTTP table means for a channel that POSTs notifications (its own help speaks of scraping)
_HOOK_HTTP = {
    "headers": "extra HTTP headers of every POST, e.g. `{ X-Scope-OrgID = \"team-a\" }`",
    "bearer_token_env": "environment variable holding a bearer token (`Authorization: Bearer …`); the command stops when it is not set",
    "ca_file": "PEM file of the CA that signed the receiver's certificate (default: the system's store)",
    "tls_verify": "verify the receiver's TLS certificate",
    "proxy": "HTTP(S) proxy URL (environment proxy variables are not read)",
    "bearer_token": "read from `bearer_token_env` only; a file that sets it is refused",
    "follow_redirects_across_origins": "not used: a notification is one POST that follows no redirect (a 3xx answer is a "
                                       "refused notification, naming where it points)",
}  # fmt: skip


def _default(kind: str, value: Any) -> str:
    if value is None:
        return "unset"
    if kind == "duration":
        return f"`{format_duration(value)}`"
    if value == "" or kind == "secret":
        return ""
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple | list | dict):
        return f"`{json.dumps(list(value) if not isinstance(value, dict) else value, ensure_ascii=False)}`"
    return f"`{value:g}`" if isinstance(value, float) else f"`{value}`"


def _type(kind: str) -> str:
    return {"dict[str, str]": "table", "tuple[str, ...]": "list of str"}.get(kind, kind)


def _row(*cells: str) -> str:
    return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"


def limits_markdown() -> str:
    """The limits table: every ranged setting, what it allows and its default."""
    defaults = {key: (kind, default) for key, kind, default, _ in iter_settings()}
    rows = [_row(f"`{key}`", limit.text(), _default(*defaults.get(key, ("", None)))) for key, limit in LIMITS.items()]
    return "\n".join(["| setting | allowed | default |", "|---|---|---|", *rows])


def channels_markdown() -> str:
    """One table of every POSTing channel's settings, channel by channel, in the tuple's order."""
    rows = []
    for channel in HTTP_CHANNELS:
        prefix = f"alerts.{channel.name}."
        for key, kind, default, help_text in iter_settings(type(getattr(AlertsSettings(), channel.name)), prefix):
            leaf = key.removeprefix(prefix)
            meaning = _HOOK_HTTP.get(leaf.removeprefix("http."), help_text) if leaf.startswith("http.") else help_text
            rows.append(_row(f"`{key}`", _type(kind), _default(kind, default), meaning))
    return "\n".join(["| setting | type | default | meaning |", "|---|---|---|---|", *rows])


def _seconds(value: float) -> str:
    return format_duration(value) if value else "0"


def default_rules_markdown() -> str:
    """The default rules: condition, window, severity, timers and what the e-mail shows."""
    thresholds = {f.name: getattr(SweetSpotSettings(), f.name) for f in dataclasses.fields(SweetSpotSettings)}
    rows = []
    for rule in DEFAULT_RULES:
        default = thresholds.get(rule.threshold)
        condition = f"`{rule.expr} {rule.op} {rule.threshold}`" + (f" ({default:g} by default)" if default is not None else "")
        condition += f" while `{rule.when}`" if rule.when else ""
        mail = f"{rule.title or rule.name}" + (f", chart: {rule.panel}" if rule.panel else "")
        rows.append(_row(f"`{rule.name}`", condition, format_duration(rule.window_s), rule.severity, _seconds(rule.for_s),
                         _seconds(rule.keep_firing_for_s), mail))  # fmt: skip
    return "\n".join(["| rule | condition | window | severity | for | keep firing | e-mail title, chart |",
                      "|---|---|---|---|---|---|---|", *rows])  # fmt: skip


# page under docs/ → its blocks, each by name
BLOCKS: dict[str, dict[str, Callable[[], str]]] = {
    "configuration.md": {"limits": limits_markdown, "channels": channels_markdown},
    "alerts.md": {"default rules": default_rules_markdown},
}


def _marks(name: str) -> tuple[str, str]:
    return (f"<!-- generated by `make docs` from the code: {name} (edit the code, not these rows) -->",
            f"<!-- end of generated: {name} -->")  # fmt: skip


def render(page: str, name: str) -> str:
    """``page`` (the text of docs/``name``) with every generated block rewritten from the code (a
    block missing its markers is an error)."""
    for block, make in BLOCKS[name].items():
        start, end = _marks(block)
        pattern = re.compile(re.escape(start) + r"\n.*?\n" + re.escape(end), re.S)
        if not pattern.search(page):
            raise ValueError(f"docs/{name}: the markers of the generated block {block!r} are missing")
        page = pattern.sub(lambda _: f"{start}\n{make()}\n{end}", page, count=1)  # noqa: B023 - used at once
    return page
