"""core.redact.masked: every userinfo password and every credential of a query string, and nothing else."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.redact import masked, secret_parameter


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://sweetspot:s3cret@db:5432/sweetspot", "postgresql://sweetspot:***@db:5432/sweetspot"),
    ("postgresql+psycopg://u:p@ss@db/x", "postgresql+psycopg://u:***@db/x"),
    ("http://u:pw@h:8000/metrics?token=abc&x=1", "http://u:***@h:8000/metrics?token=***&x=***"),
    ("http://h/metrics?TOKEN=abc", "http://h/metrics?TOKEN=***"),
    ("http://h/m?a=1&access_token=t1&secretKey=s&accessKey=a&privateKey=p&bearer=b&passphrase=q&pw=w",
     "http://h/m?a=***&access_token=***&secretKey=***&accessKey=***&privateKey=***&bearer=***&passphrase=***&pw=***"),
    ("postgresql://db/x?password=pw&sslmode=require", "postgresql://db/x?password=***&sslmode=***"),
    ("[litellm] prometheus http://u:pw@gw:4000/metrics?apikey=k litellm_in_flight_requests",
     "[litellm] prometheus http://u:***@gw:4000/metrics?apikey=*** litellm_in_flight_requests"),
    ("http://h/m?token=abc#frag", "http://h/m?token=***#***"),  # a fragment may be the token (#access_token=)
    # a password holding "/", "?", "#", a space or "@": masked up to the authority's last "@"
    ("postgresql://u:a/b?c#d e@f@db:5432/x", "postgresql://u:***@db:5432/x"),
    ("postgresql://u:ab/cd+ef==@db/x", "postgresql://u:***@db/x"),
    # a token given as the user name (no password); a database URL's user name is not a secret
    ("https://ghp_abc123@host/metrics", "https://***@host/metrics"),
    ("postgresql://sweetspot@db/sweetspot", "postgresql://sweetspot@db/sweetspot"),
    # outside a URL (a path alone), the credential names
    ("GET /metrics?secretKey=s&page=2", "GET /metrics?secretKey=***&page=2"),
])  # fmt: skip
def test_secrets_are_masked(url: str, shown: str) -> None:
    assert masked(url) == shown
    assert masked(shown) == shown  # idempotent: a stored masked value stays as it is


@pytest.mark.parametrize("url", [
    "sqlite:///data/sweetspot.db", "http://h:8000/metrics", "http://h/m?token=", "not a url", "a=b; c=d",
])  # fmt: skip
def test_what_holds_no_secret_is_unchanged(url: str) -> None:
    assert masked(url) == url


_PASSWORD = st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), min_size=1, max_size=30)
_NAME = st.from_regex(r"[A-Za-z][A-Za-z0-9_.-]{0,15}", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(password=_PASSWORD.filter(lambda p: len(p.strip()) >= 1), user=_NAME,
       scheme=st.sampled_from(["postgresql", "postgresql+psycopg", "http", "https"]))
def test_any_password_of_a_url_is_masked_whole(password: str, user: str, scheme: str) -> None:
    """Whatever the password holds (``/ ? # @``, spaces, any letter), a URL value shows none of it."""
    url = f"{scheme}://{user}:{password}@db.example:5432/sweetspot"
    shown = masked(url)
    assert shown == f"{scheme}://{user}:***@db.example:5432/sweetspot"


@settings(max_examples=300, deadline=None)
@given(names=st.lists(_NAME, min_size=1, max_size=5),
       values=st.lists(st.from_regex(r"[A-Za-z0-9%+/.~_-]{1,20}", fullmatch=True), min_size=5, max_size=5),
       token=st.from_regex(r"[A-Za-z0-9_-]{8,30}", fullmatch=True))
def test_every_query_value_and_a_user_token_are_masked(names: list[str], values: list[str], token: str) -> None:
    query = "&".join(f"{n}={v}" for n, v in zip(names, values, strict=False))
    line = f"cannot reach https://{token}@gw.example/metrics?{query} (connection refused)"
    shown = masked(line)
    assert shown.startswith("cannot reach https://***@gw.example/metrics?")
    assert f"?{'&'.join(f'{n}=***' for n in names)} (connection refused)" in shown
    assert masked(shown) == shown


def test_a_webhook_path_is_masked() -> None:
    from core.redact import masked_path

    assert masked_path("https://hooks.slack.com/services/T0/B1/XyZ") == "https://hooks.slack.com/***"
    assert masked_path("https://u:p@h:9093/") == "https://u:***@h:9093/"
    assert masked_path("") == ""


def test_the_documented_names_are_secret_and_others_are_not() -> None:
    assert all(map(secret_parameter, ["token", "Access_Token", "API-KEY", "sessionid", "client_secret", "jwt"]))
    assert all(map(secret_parameter, ["secretKey", "accessKey", "privateKey", "bearer", "passphrase", "pw"]))
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


def test_config_json_masks_a_webhooks_secret_path_and_every_query_value(tmp_path) -> None:
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    path = tmp_path / "s.toml"
    path.write_text('[alerts.webhook]\nurl = "https://hooks.slack.com/services/T0AAA/B0BBB/XyZsecretPath"\n'
                    '[alerts.alertmanager]\nurl = "http://am:9093/base?secretKey=k9q"\n'
                    '[[targets]]\nname = "a"\nvllm_url = "https://tok3n@vllm:8000/metrics?accessKey=ak7&page=2"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEETSPOT_")}
    done = subprocess.run([sys.executable, "-m", "app", "--config", str(path), "config", "--json"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["alerts"]["webhook"]["url"] == "https://hooks.slack.com/***"
    assert shown["alerts"]["alertmanager"]["url"] == "http://am:9093/***"
    assert shown["targets"][0]["vllm_url"] == "https://***@vllm:8000/metrics?accessKey=***&page=***"
    assert not [s for s in ("XyZsecretPath", "k9q", "tok3n", "ak7") if s in done.stdout]
