"""Secrets taken out of URLs (and of any text holding URLs) before they are shown, logged or stored.

:func:`masked` replaces with ``***`` the password of every URL's userinfo
(``http://user:***@host``, a PostgreSQL ``db_url`` included) and the value of every query parameter
whose name says it is a credential (``?token=***``, :func:`secret_parameter`). Everything else
stays as written, so a masked URL still tells which server and which path. :class:`MaskingFormatter`
applies it to every log line. docs/security.md lists where it is applied.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote_plus

MASK = "***"
# Query parameter names that carry a credential, compared lowercased and percent-decoded.
SECRET_PARAMETERS = frozenset({
    "token", "access_token", "refresh_token", "id_token", "auth", "auth_token", "authorization",
    "api_key", "apikey", "api-key", "key", "password", "passwd", "pwd", "pass", "secret", "client_secret",
    "sig", "signature", "credential", "credentials", "session", "sessionid", "jwt",
})  # fmt: skip
# ... and every name whose last word (after "_", "-" or ".") is one of these (private_key,
# X-Amz-Signature, x-goog-credential), or that ends with one of SECRET_ENDINGS (accesstoken).
SECRET_LAST_WORDS = frozenset({"token", "key", "secret", "password", "signature", "credential", "sig", "auth"})
SECRET_ENDINGS = ("token", "secret", "password", "apikey")

# Up to the authority's last "@", as httpx and urllib split it: a password with an unescaped "@" is
# masked whole. Not anchored: a stored "[litellm] prometheus http://u:pw@gw/metrics" is masked too.
_USERINFO_PASSWORD = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://[^/?#:\s]*):[^/?#\s]*@")
# A parameter of a query string: after "?" or "&" (or ";", an old separator some servers honour).
_QUERY_PARAMETER = re.compile(r"([?&;])([^=&;#?\s]+)=([^&;#\s]*)")
_WORD = re.compile(r"[-_.]")


def secret_parameter(name: str) -> bool:
    """True when a query parameter of this name carries a credential (case-insensitive)."""
    name = unquote_plus(name).strip().lower()
    return (name in SECRET_PARAMETERS or _WORD.split(name)[-1] in SECRET_LAST_WORDS
            or name.endswith(SECRET_ENDINGS))


def masked(text: str) -> str:
    """``text`` (a URL, or a line holding URLs) with every userinfo password and every credential of a
    query string replaced by ``***``; idempotent, and a text without either is returned unchanged."""
    if "@" in text:
        text = _USERINFO_PASSWORD.sub(rf"\1:{MASK}@", text)
    if "=" in text:
        text = _QUERY_PARAMETER.sub(_mask_parameter, text)
    return text


def _mask_parameter(match: re.Match[str]) -> str:
    sep, name, value = match.groups()
    return f"{sep}{name}={MASK}" if value and secret_parameter(name) else match[0]


class MaskingFormatter(logging.Formatter):
    """A log formatter whose every line, traceback included, goes through :func:`masked`: what a
    library logs (an exception naming a URL) is covered as well as the product's own messages."""

    def format(self, record: logging.LogRecord) -> str:
        return masked(super().format(record))
