"""``alerts test-email`` against aiosmtpd on 127.0.0.1: STARTTLS and AUTH with a self-made
certificate, implicit TLS, and each failure as one line naming the setting to fix."""

from __future__ import annotations

import ssl

import pytest

from app.cli import main
from tests.support.certificates import make_certificate
from tests.support.ports import refused_port
from tests.support.smtp_server import Mailbox, password_check, serve


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    return make_certificate(tmp_path_factory.mktemp("smtp-tls"))


@pytest.fixture
def server_tls(certificate):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    return context


def env(monkeypatch, port, tls, user="", password="", cert=None):
    values = {"SWEETSPOT_SMTP_HOST": "127.0.0.1", "SWEETSPOT_SMTP_PORT": str(port), "SWEETSPOT_SMTP_TLS": tls,
              "SWEETSPOT_SMTP_USER": user, "SWEETSPOT_SMTP_PASSWORD": password,
              "SWEETSPOT_ALERT_FROM": "sweetspot@example.test", "SWEETSPOT_ALERT_TO": "ops@example.test"}  # fmt: skip
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    if cert:
        monkeypatch.setenv("SSL_CERT_FILE", cert)  # ssl's default context trusts the self-made CA


def test_starttls_and_auth_send_and_print_the_servers_answer(monkeypatch, capsys, certificate, server_tls):
    mailbox = Mailbox()
    with serve(mailbox, tls_context=server_tls, require_starttls=True, authenticator=password_check("bot", "pw"),
               auth_require_tls=True) as port:  # fmt: skip
        env(monkeypatch, port, "starttls", "bot", "pw", certificate[0])
        assert main(["alerts", "test-email"]) == 0
    out = capsys.readouterr().out
    assert "the server answered: 250 2.0.0 Ok: queued as test" in out
    assert mailbox.subjects() == ["[TEST] Sweetspot alert e-mail works"]
    assert mailbox.envelopes[0].rcpt_tos == ["ops@example.test"]


def test_implicit_tls(monkeypatch, capsys, certificate, server_tls):
    mailbox = Mailbox()
    with serve(mailbox, ssl_context=server_tls) as port:
        env(monkeypatch, port, "ssl", cert=certificate[0])
        assert main(["alerts", "test-email"]) == 0
    assert len(mailbox.messages) == 1


def test_wrong_password_names_user_and_password(monkeypatch, capsys, certificate, server_tls):
    with serve(Mailbox(), tls_context=server_tls, authenticator=password_check("bot", "pw"), auth_require_tls=True) as port:
        env(monkeypatch, port, "starttls", "bot", "wrong", certificate[0])
        assert main(["alerts", "test-email"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ERROR: the SMTP server 127.0.0.1:") and "refused the login (535" in err
    assert "SWEETSPOT_SMTP_USER / SWEETSPOT_SMTP_PASSWORD" in err and len(err.splitlines()) == 1


def test_starttls_against_a_plain_server_names_the_tls_setting(monkeypatch, capsys):
    with serve(Mailbox()) as port:
        env(monkeypatch, port, "starttls")
        assert main(["alerts", "test-email"]) == 2
    err = capsys.readouterr().err
    assert "does not offer STARTTLS" in err and "SWEETSPOT_SMTP_TLS" in err


def test_ssl_against_a_plain_server_names_the_tls_setting(monkeypatch, capsys):
    with serve(Mailbox()) as port:
        env(monkeypatch, port, "ssl")
        assert main(["alerts", "test-email"]) == 2
    err = capsys.readouterr().err
    assert "TLS failed" in err and "SWEETSPOT_SMTP_TLS" in err


def test_untrusted_certificate_says_so(monkeypatch, capsys, server_tls):
    with serve(Mailbox(), tls_context=server_tls) as port:
        env(monkeypatch, port, "starttls")
        assert main(["alerts", "test-email"]) == 2
    assert "is not trusted here" in capsys.readouterr().err


def test_login_without_tls_names_the_tls_setting(monkeypatch, capsys, server_tls):
    with serve(Mailbox(), tls_context=server_tls, authenticator=password_check("bot", "pw"), auth_require_tls=True) as port:
        env(monkeypatch, port, "none", "bot", "pw")
        assert main(["alerts", "test-email"]) == 2
    err = capsys.readouterr().err
    assert "offers no login" in err and "SWEETSPOT_SMTP_TLS=starttls" in err


def test_connection_refused_names_host_and_port(monkeypatch, capsys):
    env(monkeypatch, refused_port(), "none")
    assert main(["alerts", "test-email"]) == 2
    err = capsys.readouterr().err
    assert "connection refused" in err and "SWEETSPOT_SMTP_HOST / SWEETSPOT_SMTP_PORT" in err


def test_email_off_says_which_setting_turns_it_on(monkeypatch, capsys):
    for name in ("SWEETSPOT_SMTP_HOST", "SWEETSPOT_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    assert main(["alerts", "test-email"]) == 2
    assert "e-mail is off" in capsys.readouterr().err
