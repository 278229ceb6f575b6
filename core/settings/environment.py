"""The environment the loader reads (the one reader of ``os.environ``'s values: entry points pass it
in), each variable with the line that documents it."""

from __future__ import annotations

# Environment variables the loader honours (documented in docs/configuration.md).
ENV_CONFIG = "SWEETSPOT_CONFIG"
ENV_DB_URL = "SWEETSPOT_DB_URL"
ENV_DB_PASSWORD = "SWEETSPOT_DB_PASSWORD"
ENV_QUERY_DB_URL = "SWEETSPOT_QUERY_DB_URL"
ENV_QUERY_DB_PASSWORD = "SWEETSPOT_QUERY_DB_PASSWORD"
ENV_UI_PASSWORD = "SWEETSPOT_UI_PASSWORD"
ENV_SMTP_PASSWORD = "SWEETSPOT_SMTP_PASSWORD"
# Alert e-mail without a config file (docs/alerts.md, E-mail): env → [alerts.email] key.
ENV_EMAIL = {
    "SWEETSPOT_SMTP_HOST": "host",
    "SWEETSPOT_SMTP_PORT": "port",
    "SWEETSPOT_SMTP_USER": "user",
    "SWEETSPOT_SMTP_TLS": "tls",
    "SWEETSPOT_ALERT_FROM": "from_address",
    "SWEETSPOT_ALERT_TO": "to",
    "SWEETSPOT_DASHBOARD_URL": "dashboard_url",
}
ENVIRONMENT_VARIABLES = {
    ENV_CONFIG: "path of the TOML settings file (same as --config)",
    ENV_DB_URL: "database URL; overrides db_url from the file",
    ENV_DB_PASSWORD: "password of db_url's PostgreSQL user, kept out of the URL (postgresql://USER@HOST/DB)",
    ENV_QUERY_DB_URL: "the URL ad-hoc queries connect with on PostgreSQL; overrides query.db_url from the file",
    ENV_QUERY_DB_PASSWORD: "password of query.db_url's PostgreSQL user, kept out of the URL",
    ENV_UI_PASSWORD: "when set, the UI asks for this password",
    ENV_SMTP_PASSWORD: "password for the SMTP server that sends alert e-mails",
    "SWEETSPOT_SMTP_HOST": "SMTP server that sends alert e-mails (alerts.email.host); unset = e-mail off",
    "SWEETSPOT_SMTP_PORT": "its port (alerts.email.port)",
    "SWEETSPOT_SMTP_USER": "user to log in as (alerts.email.user)",
    "SWEETSPOT_SMTP_TLS": "none, starttls or ssl (alerts.email.tls)",
    "SWEETSPOT_ALERT_FROM": "From address of alert e-mails (alerts.email.from_address)",
    "SWEETSPOT_ALERT_TO": "comma-separated recipients of alert e-mails (alerts.email.to)",
    "SWEETSPOT_DASHBOARD_URL": "the dashboard's address, for links in e-mails (alerts.email.dashboard_url)",
}
