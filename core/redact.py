"""Secrets taken out of URLs (and of any text holding URLs) before they are shown, logged or stored.

:func:`masked` replaces with ``***`` the password of every URL's userinfo, up to the authority's
last ``@`` (``http://user:***@host``, a PostgreSQL ``db_url`` included), a user name given without
a password (a token), the value of every query parameter of a URL, and elsewhere the value of every
parameter whose name says it is a credential (``?token=***``, :func:`secret_parameter`);
:func:`masked_path` also hides a URL's path (a Slack-style webhook's path is its credential).
Everything else stays as written, so a masked URL still tells which server and which path. :class:`MaskingFormatter`
applies it to every log line. docs/security.md lists where it is applied.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote_plus

MASK = "***"
# Query parameter names that carry a credential, compared lowercased and percent-decoded: outside a
# URL (a path and query alone) only these are masked; inside one every value is.
SECRET_PARAMETERS = frozenset({
    "token", "access_token", "refresh_token", "id_token", "auth", "auth_token", "authorization",
    "api_key", "apikey", "api-key", "key", "password", "passwd", "pwd", "pass", "secret", "client_secret",
    "sig", "signature", "credential", "credentials", "session", "sessionid", "jwt", "pw", "bearer", "passphrase",
})  # fmt: skip
# ... and every name whose last word (after "_", "-" or ".") is one of these (private_key,
# X-Amz-Signature, x-goog-credential), or that ends with one of SECRET_ENDINGS (accesstoken).
SECRET_LAST_WORDS = frozenset({"token", "key", "secret", "password", "signature", "credential", "sig", "auth"})
SECRET_ENDINGS = ("token", "secret", "password", "apikey", "passphrase", "secretkey", "accesskey", "privatekey")

# A URL in a text: its scheme, then everything up to the next whitespace. Its userinfo password runs
# up to the authority's last "@" (a password may hold "/", "?", "#", "@"): in a text that is one URL
# (a setting's value) up to the value's last "@", whatever the password holds, spaces included; in a
# longer text up to the URL's last "@" before whitespace.
_SCHEME = r"\b[a-zA-Z][a-zA-Z0-9+.-]*://"
_URL = re.compile(_SCHEME + r"[^\s]*")
_ONE_URL = re.compile(r"\s*(" + _SCHEME + r").*\S\s*", re.DOTALL)
_USERINFO = re.compile(r"(" + _SCHEME + r")([^/?#:@\s]*)(?:(:.*)@(?=[^@]*$)|@)", re.DOTALL)
_DATABASE_SCHEMES = ("postgresql", "postgres", "mysql", "sqlite", "mariadb", "oracle", "mssql")
# A parameter of a query string: after "?" or "&" (or ";", an old separator some servers honour).
_QUERY_PARAMETER = re.compile(r"([?&;])([^=&;#?\s]+)=([^&;#\s'\"]*)")
_WORD = re.compile(r"[-_.]")
# The parts of a URL's query: ``name=value`` or a bare ``value``, split at "&" and ";".
_QUERY_PART = re.compile(r"([^=&;]*)(=?)([^&;]*)")
# A ``;name=value`` parameter of a URL's path (``/x;jsessionid=…``).
_PATH_PARAMETER = re.compile(r"(;)([^=;/?#\s]+)=([^;/?#\s]*)")
# Passwords that say "the user name is the token" (GitHub's, Bitbucket's): with one, or with an
# empty password, the user name is masked too.
PLACEHOLDER_PASSWORDS = frozenset({"", "x-oauth-basic", "x-token-auth", "x-oauth-token"})


def secret_parameter(name: str) -> bool:
    """True when a query parameter of this name carries a credential (case-insensitive)."""
    name = unquote_plus(name).strip().lower()
    return (name in SECRET_PARAMETERS or _WORD.split(name)[-1] in SECRET_LAST_WORDS
            or name.endswith(SECRET_ENDINGS))


def masked(text: str) -> str:
    """``text`` (a URL, or a line holding URLs) with its secrets replaced by ``***``: each URL's userinfo
    password (up to the authority's last ``@``), the user name of a userinfo without a password (a
    token given as the user, ``https://***@host``; a database URL keeps its user name), and the value
    of every query-string parameter of a URL (names kept: ``?page=***&token=***``); outside URLs, the
    value of every query parameter whose name says it is a credential (:func:`secret_parameter`).
    Idempotent; a text without a secret is returned unchanged."""
    if "://" not in text:
        return _QUERY_PARAMETER.sub(_mask_secret_parameter, text) if "=" in text else text
    if "\n" not in text and _ONE_URL.fullmatch(text):
        return _mask_url(text)
    text = _URL.sub(lambda m: _mask_url(m[0]), text)
    return _QUERY_PARAMETER.sub(_mask_secret_parameter, text) if "=" in text else text


def _mask_url(url: str) -> str:
    """One URL (``url`` holds no other), masked by its structure: the userinfo up to its last ``@``
    (:func:`_mask_userinfo`); in the path, the value of each ``;name=value`` parameter; in the query,
    every part (``name=***``, a bare value ``***``); the fragment whole (``#***``: an OAuth implicit
    grant's ``#access_token=``, never needed to tell which server)."""
    if "@" in url:
        url = _USERINFO.sub(_mask_userinfo, url, count=1)
    scheme_end = url.find("://") + 3
    fragment = url.find("#", scheme_end)
    if fragment >= 0:
        url = url[:fragment] + (f"#{MASK}" if url[fragment + 1 :] not in ("", MASK) else url[fragment:])
    query = url.find("?", scheme_end)
    path = url[:query] if query >= 0 else url.split("#", 1)[0]
    if ";" in path:
        url = _PATH_PARAMETER.sub(_mask_parameter, path) + url[len(path) :]
        query = url.find("?", scheme_end)
    if query >= 0:
        end = url.find("#", query)
        end = len(url) if end < 0 else end
        url = url[: query + 1] + _QUERY_PART.sub(_mask_query_part, url[query + 1 : end]) + url[end:]
    return url


def _mask_query_part(match: re.Match[str]) -> str:
    name, equals, value = match.groups()
    if not equals:  # a bare value (``?ghp_…``): the whole part may be the credential
        return name if name in ("", MASK) else MASK
    return f"{name}={MASK}" if value else match[0]


def _mask_userinfo(match: re.Match[str]) -> str:
    scheme, user, password = match.groups()
    database = scheme.lower().split("+")[0].rstrip(":/") in _DATABASE_SCHEMES  # its user name is a role, not a secret
    if password is not None:
        if password[1:].lower() in PLACEHOLDER_PASSWORDS and user and not database:
            # the user is the token (``ghp_…:x-oauth-basic@``, ``tok:@``): both are masked
            return f"{scheme}{MASK}:{MASK}@"
        return f"{scheme}{user}:{MASK}@"
    if not user or database:
        return match[0]
    return f"{scheme}{MASK}@"


def _mask_parameter(match: re.Match[str]) -> str:
    sep, name, value = match.groups()
    return f"{sep}{name}={MASK}" if value else match[0]


def _mask_secret_parameter(match: re.Match[str]) -> str:
    sep, name, value = match.groups()
    return f"{sep}{name}={MASK}" if value and secret_parameter(name) else match[0]


def masked_path(url: str) -> str:
    """``url`` :func:`masked`, and its path, query and fragment replaced by ``/***`` (a webhook URL
    such as ``https://hooks.slack.com/services/T0/B0/XXXX`` is itself the credential)."""
    shown = masked(url.strip())
    start = shown.find("://")
    if start < 0:
        return shown
    end = next((i for i in range(start + 3, len(shown)) if shown[i] in "/?#"), len(shown))
    rest = shown[end:]
    return shown[:end] + (f"/{MASK}" if rest.strip("/") else rest)


class MaskingFormatter(logging.Formatter):
    """A log formatter whose every line, traceback included, goes through :func:`masked`: what a
    library logs (an exception naming a URL) is covered as well as the product's own messages."""

    def format(self, record: logging.LogRecord) -> str:
        return masked(super().format(record))
