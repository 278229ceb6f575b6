"""core.redact.masked: every userinfo password and every credential of a query string, and nothing else."""

from __future__ import annotations

import pytest

from core.redact import masked, secret_parameter


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://sweetspot:s3cret@db:5432/sweetspot", "postgresql://sweetspot:***@db:5432/sweetspot"),
    ("postgresql+psycopg://u:p@ss@db/x", "postgresql+psycopg://u:***@db/x"),
    ("http://u:pw@h:8000/metrics?token=abc&x=1", "http://u:***@h:8000/metrics?token=***&x=1"),
    ("http://h/metrics?TOKEN=abc", "http://h/metrics?TOKEN=***"),
    ("http://h/m?a=1&access_token=t1&api_key=k1&apikey=k2&key=k3&password=p&secret=s&auth=a&sig=g",
     "http://h/m?a=1&access_token=***&api_key=***&apikey=***&key=***&password=***&secret=***&auth=***&sig=***"),
    ("https://b.s3/o?X-Amz-Signature=abc&X-Amz-Credential=c&X-Amz-Security-Token=t&X-Amz-Date=2026",
     "https://b.s3/o?X-Amz-Signature=***&X-Amz-Credential=***&X-Amz-Security-Token=***&X-Amz-Date=2026"),
    ("http://h/m?api%5Fkey=k&private_key=p&accessToken=t", "http://h/m?api%5Fkey=***&private_key=***&accessToken=***"),
    ("postgresql://db/x?password=pw&sslmode=require", "postgresql://db/x?password=***&sslmode=require"),
    ("[litellm] prometheus http://u:pw@gw:4000/metrics?apikey=k litellm_in_flight_requests",
     "[litellm] prometheus http://u:***@gw:4000/metrics?apikey=*** litellm_in_flight_requests"),
    ("http://h/m?token=abc#frag", "http://h/m?token=***#frag"),
])  # fmt: skip
def test_secrets_are_masked(url: str, shown: str) -> None:
    assert masked(url) == shown
    assert masked(shown) == shown  # idempotent: a stored masked value stays as it is


@pytest.mark.parametrize("url", [
    "sqlite:///data/sweetspot.db", "http://user@h:8000/metrics", "http://h:8000/metrics?monkey=1&keyword=2&page=3",
    "http://h/m?token=", "http://h:8000/a@b", "not a url",
])  # fmt: skip
def test_what_holds_no_secret_is_unchanged(url: str) -> None:
    assert masked(url) == url


def test_the_documented_names_are_secret_and_others_are_not() -> None:
    assert all(map(secret_parameter, ["token", "Access_Token", "API-KEY", "sessionid", "client_secret", "jwt"]))
    assert not any(map(secret_parameter, ["page", "match[]", "query", "step", "monkey", "keyword", "tokens"]))


def test_docs_security_lists_every_name() -> None:
    from pathlib import Path

    from core.redact import SECRET_ENDINGS, SECRET_LAST_WORDS, SECRET_PARAMETERS

    doc = (Path(__file__).resolve().parent.parent / "docs" / "security.md").read_text()
    missing = [n for n in (*SECRET_PARAMETERS, *SECRET_LAST_WORDS, *SECRET_ENDINGS) if f"`{n}`" not in doc]
    assert not missing, f"docs/security.md does not name {missing}"


def test_every_log_line_is_masked_tracebacks_included() -> None:
    import logging

    from core.redact import MaskingFormatter

    try:
        raise RuntimeError("GET http://u:pw1@h/metrics?token=tok1 failed")
    except RuntimeError:
        import sys

        record = logging.LogRecord("httpx", logging.INFO, __file__, 1, "HTTP Request: GET %s", ("http://h/m?api_key=k1",),
                                   sys.exc_info())
    line = MaskingFormatter("%(name)s: %(message)s").format(record)
    assert "api_key=***" in line and "u:***@h" in line and "token=***" in line
    assert not any(s in line for s in ("pw1", "tok1", "k1"))
