"""The settings: the public entry every layer imports (``from core.settings import Settings``).

One package, one job a module:

- ``schema.py``: the typed dataclasses (one a table of the file, ``DeliverySettings`` shared by the
  e-mail, webhook and Alertmanager tables) and what the product asks of loaded settings;
- ``loader.py``: TOML file → environment → defaults into the schema, and every check of the values;
- ``presets.py``: the gateway presets (docs/gateways.md);
- ``environment.py``: the environment variables the loader honours, with their help;
- ``help_text.py``: sentences shown to people beyond each setting's ``help``.
"""

from __future__ import annotations

from core.channels.base import GROUP_BY_KEYS
from core.channels.email import TLS_MODES
from core.settings.environment import (
    ENV_CONFIG,
    ENV_DB_PASSWORD,
    ENV_DB_URL,
    ENV_EMAIL,
    ENV_QUERY_DB_PASSWORD,
    ENV_QUERY_DB_URL,
    ENV_SMTP_PASSWORD,
    ENV_UI_PASSWORD,
    ENVIRONMENT_VARIABLES,
)
from core.settings.help_text import (
    MIN_EFFICIENCY_REMOVED,
    NO_CEILING,
    ceiling_missing,
)
from core.settings.loader import (
    DEFAULT_TIMEOUT_SHARE,
    check_http,
    header_problem,
    http_from_flags,
    http_tables,
    read_config_file,
    read_settings,
    require_scrape_tokens,
    userinfo_quoted,
    with_db_password,
)
from core.settings.presets import (
    GATEWAY_PRESETS,
    apply_gateway_preset,
)
from core.settings.schema import (
    DEFAULT_DB_URL,
    DEFAULT_MAX_SERIES,
    DEMO_TARGET,
    INTERNAL,
    REFERENCE_CEILING,
    SERVER_KINDS,
    AlertmanagerSettings,
    AlertsSettings,
    CeilingSettings,
    ConfigError,
    DeliverySettings,
    DigestSettings,
    EmailRoute,
    EmailSettings,
    GatewaySettings,
    GpuSettings,
    HttpSettings,
    LearnerSettings,
    MuteWindowSettings,
    PrometheusSettings,
    QuerySettings,
    RuleSettings,
    Settings,
    SweetSpotOverrides,
    SweetSpotSettings,
    TargetSettings,
    TelemetrySettings,
    UiSettings,
    WebhookSettings,
    effective_sweetspot,
    is_reference,
    iter_settings,
    query_db_url,
    stale_after,
    sweetspot_of,
)

__all__ = [
    "ENV_CONFIG",
    "ENV_DB_URL",
    "ENV_DB_PASSWORD",
    "ENV_QUERY_DB_URL",
    "ENV_QUERY_DB_PASSWORD",
    "ENV_UI_PASSWORD",
    "ENV_SMTP_PASSWORD",
    "ENV_EMAIL",
    "ENVIRONMENT_VARIABLES",
    "NO_CEILING",
    "ceiling_missing",
    "MIN_EFFICIENCY_REMOVED",
    "DEFAULT_DB_URL",
    "DEFAULT_MAX_SERIES",
    "DEMO_TARGET",
    "ConfigError",
    "INTERNAL",
    "HttpSettings",
    "LearnerSettings",
    "GatewaySettings",
    "GpuSettings",
    "CeilingSettings",
    "REFERENCE_CEILING",
    "TargetSettings",
    "PrometheusSettings",
    "SERVER_KINDS",
    "SweetSpotSettings",
    "SweetSpotOverrides",
    "stale_after",
    "effective_sweetspot",
    "sweetspot_of",
    "RuleSettings",
    "MuteWindowSettings",
    "UiSettings",
    "EmailRoute",
    "GROUP_BY_KEYS",
    "TLS_MODES",
    "DeliverySettings",
    "EmailSettings",
    "DigestSettings",
    "WebhookSettings",
    "AlertmanagerSettings",
    "AlertsSettings",
    "QuerySettings",
    "TelemetrySettings",
    "Settings",
    "is_reference",
    "query_db_url",
    "iter_settings",
    "GATEWAY_PRESETS",
    "apply_gateway_preset",
    "http_tables",
    "header_problem",
    "check_http",
    "require_scrape_tokens",
    "read_config_file",
    "DEFAULT_TIMEOUT_SHARE",
    "read_settings",
    "userinfo_quoted",
    "with_db_password",
    "http_from_flags",
]
