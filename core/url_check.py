"""Whether a URL setting can be used: one check every layer shares (the limits, the channels' tables)."""

from __future__ import annotations

import importlib.util
import urllib.parse

from core.redact import masked
from core.text import host_problem

HTTP_SCHEMES = ("http", "https")


def url_problem(value: str, schemes: tuple[str, ...] = HTTP_SCHEMES, example: str = "http://10.0.0.5:8000/metrics") -> str:
    """Why ``value`` is not a URL of one of ``schemes`` with a host, or "" when it is (its secrets masked)."""
    shown = masked(value)
    if value != value.strip() or any(ord(c) < 0x21 or 0x7F <= ord(c) <= 0x9F or c.isspace() for c in value):
        # urlsplit strips leading spaces and drops tabs and line breaks, so the URL checked is not the one used
        return f"{shown!r} holds a space, tab, line break or control character; write the URL alone, e.g. {example}"
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018 - a port out of range or not a number raises here
    except ValueError as exc:
        return f"{shown!r} is not a URL ({exc}); write it like {example}"
    if parts.scheme not in schemes or not parts.hostname:
        wanted = ", ".join(f"{s}://" for s in schemes[:-1]) + f" or {schemes[-1]}://"
        return f"{shown!r} is not an {wanted} URL with a host (e.g. {example})"
    host = host_problem(parts.hostname)  # the one name type's rule for hosts (core/text.py)
    if host:
        return f"{shown!r}: its host {host}"
    if parts.scheme == "socks5" and importlib.util.find_spec("socksio") is None:
        return f"{shown!r}: a SOCKS proxy needs the socksio package (pip install 'httpx[socks]'), or use an http:// proxy"
    return ""
