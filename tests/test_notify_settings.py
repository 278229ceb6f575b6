"""[alerts.email] and [alerts.digest]: environment variables without a file, and one-line errors."""

from __future__ import annotations

import pytest

from app.loader import load_settings
from core.schedule import last_due, parse_schedule
from core.settings import ConfigError

ENV = {
    "SWEETSPOT_SMTP_HOST": "mail.example.test", "SWEETSPOT_SMTP_PORT": "2525", "SWEETSPOT_SMTP_USER": "bot",
    "SWEETSPOT_SMTP_PASSWORD": "s3cret", "SWEETSPOT_SMTP_TLS": "ssl", "SWEETSPOT_ALERT_FROM": "bot@example.test",
    "SWEETSPOT_ALERT_TO": "a@example.test, b@example.test", "SWEETSPOT_DASHBOARD_URL": "http://dash:8501",
}  # fmt: skip


def test_environment_alone_configures_email():
    s = load_settings(None, ENV)
    email = s.alerts.email
    assert (email.host, email.port, email.user, email.tls) == ("mail.example.test", 2525, "bot", "ssl")
    assert email.to == ("a@example.test", "b@example.test") and email.from_address == "bot@example.test"
    assert email.dashboard_url == "http://dash:8501" and s.smtp_password == "s3cret" and email.enabled


def test_environment_overrides_the_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[alerts.email]\nhost = "file-host"\nfrom_address = "f@x"\nto = ["t@x"]\ngroup_wait_s = "1m"\n'
                    '[[alerts.email.routes]]\nseverity = "critical"\nto = ["oncall@x"]\n')  # fmt: skip
    s = load_settings(path, {"SWEETSPOT_SMTP_HOST": "env-host"})
    assert s.alerts.email.host == "env-host" and s.alerts.email.group_wait_s == 60.0
    assert s.alerts.email.routes[0].to == ("oncall@x",) and s.alerts.email.effective_port == 587


def test_no_host_means_email_off():
    assert not load_settings(None, {}).alerts.email.enabled


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({**ENV, "SWEETSPOT_SMTP_TLS": "tls"}, "alerts.email.tls: 'tls' is not one of none, starttls, ssl"),
        ({**ENV, "SWEETSPOT_SMTP_PORT": "smtp"}, "SWEETSPOT_SMTP_PORT: not a port number"),
        ({k: v for k, v in ENV.items() if k != "SWEETSPOT_ALERT_FROM"}, "alerts.email.from_address: required"),
        ({k: v for k, v in ENV.items() if k != "SWEETSPOT_ALERT_TO"}, "alerts.email.to: no recipient"),
    ],
)
def test_bad_email_settings_name_the_key(env, message):
    with pytest.raises(ConfigError, match=message):
        load_settings(None, env)


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[alerts.digest]\nschedule = "at 8"\n', "alerts.digest.schedule"),
        ('[alerts.digest]\ntimezone = "Mars/Olympus"\n', "alerts.digest.timezone: unknown time zone"),
        ('[alerts.email]\ngroup_by = ["host"]\n', "alerts.email.group_by: 'host'"),
        ('[alerts.email]\npassword = "x"\n', "alerts.email.password: .* set SWEETSPOT_SMTP_PASSWORD"),
    ],
)
def test_bad_file_settings_name_the_key(tmp_path, toml, message):
    path = tmp_path / "c.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=message):
        load_settings(path, {})


def test_last_due_daily_and_weekly_in_a_time_zone():
    # 2025-12-01 is a Monday; 07:30 UTC = 08:30 in Paris (winter time)
    now = 1_764_574_200.0
    assert last_due(parse_schedule("daily 08:00"), "Europe/Paris", now) == now - 1800
    assert last_due(parse_schedule("daily 09:00"), "Europe/Paris", now) == now - 1800 - 23 * 3600
    assert last_due(parse_schedule("monday 08:00"), "Europe/Paris", now) == now - 1800
    assert last_due(parse_schedule("Tuesday 08:00"), "Europe/Paris", now) == now - 1800 - 6 * 86400
