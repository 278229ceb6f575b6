"""The loader: TOML file → environment → defaults, into the schema's dataclasses (core/settings/schema.py),
with every check the ground floor can make alone. Nothing below the entry point reads ``os.environ``:
the loader takes the environment as an argument. Entry points load through ``app.loader.load_settings``."""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import re
import tomllib
import types
import typing
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from core.bounded import TooLarge, read_file
from core.channels import CHANNELS, HTTP_CHANNELS
from core.durations import DurationError, parse_duration
from core.engines import AUTO
from core.engines import NAMES as ENGINE_NAMES
from core.limits import MAX_DURATION_S, MAX_LEARNER_LEVELS, MAX_LEARNER_SAMPLES, finite_problem, limit_problems
from core.redact import masked
from core.schedule import ScheduleError, parse_schedule, zone
from core.settings.environment import (
    ENV_CONFIG,
    ENV_DB_PASSWORD,
    ENV_DB_URL,
    ENV_EMAIL,
    ENV_QUERY_DB_PASSWORD,
    ENV_QUERY_DB_URL,
    ENV_SMTP_PASSWORD,
    ENV_UI_PASSWORD,
)
from core.settings.help_text import MIN_EFFICIENCY_REMOVED
from core.settings.presets import apply_gateway_preset
from core.settings.schema import (
    INTERNAL,
    SERVER_KINDS,
    AlertsSettings,
    ConfigError,
    GatewaySettings,
    HttpSettings,
    PrometheusSettings,
    RuleSettings,
    Settings,
    SweetSpotOverrides,
    SweetSpotSettings,
    TargetSettings,
    field_types,
    is_settings_table,
    sequence_item,
    sweetspot_of,
)
from core.text import name_key, name_problem, visible


def _convert(value: Any, tp: Any, kind: str, key: str) -> Any:
    if kind == "expression":  # a number or the text of an expression; checked against the figures later
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ConfigError(f"{key}: expected a number or an expression, got {value!r}")
        return str(value)
    if kind == "duration":
        try:
            seconds = parse_duration(value)
        except DurationError as exc:
            raise ConfigError(f"{key}: {exc}") from None
        if seconds > MAX_DURATION_S:
            raise ConfigError(f"{key}: {value!r} is out of range; a duration must be ≤ 3650d (write it like 5s, 5m or 2h)")
        return seconds
    if is_settings_table(tp):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected a table, got {value!r}")
        return _build(tp, value, key + ".")
    item = sequence_item(tp)
    if item is not None:
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list ([[{key}]]), got {value!r}")
        return tuple(_convert(v, item, "", f"{key}[{i}]") for i, v in enumerate(value))
    return _scalar(value, tp, key)


def _scalar(value: Any, tp: Any, key: str) -> Any:
    optional = isinstance(tp, types.UnionType) and type(None) in typing.get_args(tp)
    if optional:
        if value is None:
            return None
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    if typing.get_origin(tp) is dict:
        if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
            raise ConfigError(f"{key}: expected a table of strings, got {value!r}")
        return dict(value)
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        if finite_problem(value):
            raise ConfigError(f"{key}: {finite_problem(value)}; write a number such as 1.5")
        return float(value)
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        if finite_problem(value):
            raise ConfigError(f"{key}: {finite_problem(value)}; write a whole number such as 100")
        return value
    if tp in (str, bool) and isinstance(value, tp):
        return value
    raise ConfigError(f"{key}: expected {tp.__name__}, got {value!r}")


REMOVED: dict[type, dict[str, str]] = {
    SweetSpotSettings: {"min_efficiency": MIN_EFFICIENCY_REMOVED},
    SweetSpotOverrides: {"min_efficiency": MIN_EFFICIENCY_REMOVED},
}

# Other spellings of a table's keys, as users of other tools type them: alias → field.
ALIASES: dict[type, dict[str, str]] = {
    RuleSettings: {"for": "for_s", "keep_firing_for": "keep_firing_for_s"},  # Prometheus' names
}


def _build(cls: type, data: Mapping[str, Any], prefix: str = "") -> Any:
    hints = field_types(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.metadata.get("kind") != INTERNAL}
    data = _resolve_aliases(data, ALIASES.get(cls, {}), prefix)
    for key, why in REMOVED.get(cls, {}).items():
        if key in data:
            raise ConfigError(f"{prefix}{key}: {why.format(prefix=prefix)}")
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"unknown setting {prefix}{unknown[0]}{_suggestion(unknown[0], [*fields, *ALIASES.get(cls, {})])} "
                          "(see docs/configuration.md)")
    kwargs = {
        name: _convert(data[name], hints[name], fields[name].metadata.get("kind", ""), prefix + name)
        for name in data
    }
    if cls is HttpSettings:
        kwargs["given"] = frozenset(data)
    return cls(**kwargs)


def _resolve_aliases(data: Mapping[str, Any], aliases: Mapping[str, str], prefix: str) -> Mapping[str, Any]:
    given = [alias for alias in aliases if alias in data]
    if not given:
        return data
    out = dict(data)
    for alias in given:
        if aliases[alias] in out:
            raise ConfigError(f"{prefix}{alias}: {prefix}{aliases[alias]} is given too; keep one of the two")
        out[aliases[alias]] = out.pop(alias)
    return out


def _suggestion(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def _check_wait_metric(gateway: GatewaySettings, key: str) -> None:
    """The gateway's wait histogram: names (``a|b``) read from its Prometheus page, or ``none``."""
    wait = gateway.wait_metric.strip()
    if not wait or wait == "none":
        return
    if gateway.kind != "prometheus":
        raise ConfigError(f"{key}: {wait!r} is read from a Prometheus page; it needs gateway.kind = prometheus "
                          "(or set it to none)")
    names = [n.strip() for n in wait.split("|")]
    bad = [n for n in names if not _METRIC_NAME.fullmatch(n)]
    if bad:
        raise ConfigError(f"{key}: {bad[0]!r} is not a metric name (a histogram's base name, a|b for the first exposed)")


def _check_target(target: TargetSettings, key: str) -> None:
    problem = name_problem(target.name)
    if problem:
        raise ConfigError(f"{key}.name: {problem}; give each target a short name such as prod-70b")
    if not target.vllm_url:
        # without it the target has nothing to scrape; `run` used to start the demo simulator then
        raise ConfigError(f"{key}.vllm_url: required, vLLM's /metrics URL (e.g. http://10.0.0.5:8000/metrics); "
                          "leave out [[targets]] altogether for the demo")  # fmt: skip


def _check_sweet_spot(target: TargetSettings, thresholds: SweetSpotSettings, key: str) -> None:
    """One sweet spot per target, and not above the engine's --max-num-seqs when that is known (0, negative
    and NaN are refused by the limits and the type check)."""
    if target.sweet_spot is not None and target.sweetspot.concurrency is not None:
        raise ConfigError(f"{key}.sweet_spot: {key}.sweetspot.concurrency is given too; keep one of the two")
    spot = thresholds.concurrency
    if spot is not None and target.max_num_seqs is not None and spot > target.max_num_seqs:
        where = (f"{key}.sweet_spot" if target.sweet_spot is not None
                 else f"{key}.sweetspot.concurrency" if target.sweetspot.concurrency is not None
                 else "sweetspot.concurrency")  # fmt: skip
        raise ConfigError(f"{where}: {spot} is above {key}.max_num_seqs ({target.max_num_seqs}): the engine never "
                          "runs that many requests at once; lower it or raise --max-num-seqs")


def _validate(settings: Settings) -> Settings:
    first: dict[str, int] = {}  # names compared as they read (core.text.name_key)
    for i, target in enumerate(settings.targets):
        problem = name_problem(target.name)  # a name that reads as nothing or mixes scripts, before comparing
        if problem:
            raise ConfigError(f"targets[{i}].name: {problem}; give each target a short name such as prod-70b")
        j = first.setdefault(name_key(target.name), i)
        if j != i:
            same = "is used twice" if target.name == settings.targets[j].name else f"reads the same as targets[{j}]'s"
            raise ConfigError(f"targets[{i}].name: '{visible(target.name, 60)}' {same}; names must be unique")
    targets = []
    for i, target in enumerate(settings.targets):
        key = f"targets[{i}]"
        gateway = apply_gateway_preset(target.gateway, key + ".gateway")
        if gateway.kind not in ("none", "prometheus", "json"):
            raise ConfigError(f"{key}.gateway.kind: {gateway.kind!r} is not one of prometheus, json, none")
        if gateway.kind != "none" and not gateway.url:
            raise ConfigError(f"{key}.gateway.url: required when gateway.kind = {gateway.kind}")
        _check_wait_metric(gateway, key + ".gateway.wait_metric")
        if target.engine not in (AUTO, *ENGINE_NAMES):
            raise ConfigError(f"{key}.engine: {target.engine!r} is not one of {', '.join((AUTO, *ENGINE_NAMES))}")
        if target.gpu.source not in ("none", "nvml", "dcgm"):
            raise ConfigError(f"{key}.gpu.source: {target.gpu.source!r} is not one of nvml, dcgm, none")
        if target.gpu.precision not in ("bf16_tensor", "fp16_tensor", "fp8_tensor", "fp16_cuda_core"):
            raise ConfigError(f"{key}.gpu.precision: {target.gpu.precision!r} is not one of bf16_tensor, fp16_tensor, "
                              "fp8_tensor, fp16_cuda_core")  # fmt: skip
        if target.gpu.source == "dcgm" and not target.gpu.url:
            raise ConfigError(f"{key}.gpu.url: required when gpu.source = dcgm (e.g. http://host:9400/metrics)")
        _check_target(target, key)
        thresholds = sweetspot_of(settings, target)
        _check_sweet_spot(target, thresholds, key)
        if thresholds.kv_warning > thresholds.kv_critical:
            raise ConfigError(f"{key}.sweetspot.kv_warning: {thresholds.kv_warning:g} must be ≤ the target's kv_critical "
                              f"({thresholds.kv_critical:g}); lower kv_warning or raise kv_critical")
        targets.append(dataclasses.replace(target, gateway=gateway))
    problem = next(limit_problems(settings), "")
    if problem:
        raise ConfigError(problem)
    if not settings.db_url.startswith(("sqlite:", "postgresql:", "postgresql+")):
        raise ConfigError(f"db_url: {masked(settings.db_url)!r} is not a database URL; write sqlite:///data/sweetspot.db "
                          "or postgresql://user@host/db")
    learner = settings.learner
    if learner.step_s < 1 or learner.span_s < learner.step_s or learner.min_busy_s < 0 or learner.min_level_s < 0 \
            or learner.restart_settle_s < 0 or learner.min_levels < 2:
        raise ConfigError("learner: step_s must be ≥ 1 s and ≤ span_s, min_levels ≥ 2, the other durations ≥ 0")
    if learner.span_s / learner.step_s > MAX_LEARNER_SAMPLES or learner.min_levels > MAX_LEARNER_LEVELS:
        # bounded work: 3650 d at 1 s (3e8 samples a target) stopped all alerting and took over 6 GB
        raise ConfigError(f"learner: span_s / step_s is {learner.span_s / learner.step_s:,.0f} samples a target and "
                          f"min_levels {learner.min_levels}; at most {MAX_LEARNER_SAMPLES:,} samples and "
                          f"{MAX_LEARNER_LEVELS} levels (raise step_s or lower span_s)")
    q = settings.query
    if not 0 < q.timeout_s <= q.max_timeout_s or q.row_limit < 1:
        raise ConfigError("query: timeout_s must be > 0 and ≤ max_timeout_s, and row_limit ≥ 1")
    if q.db_url and not (q.db_url.startswith(("postgresql:", "postgresql+")) and settings.db_url.startswith(("postgresql:", "postgresql+"))):
        raise ConfigError(f"query.db_url: {masked(q.db_url)!r} is for a PostgreSQL db_url (a role reading the views only); "
                          "SQLite's queries are read-only by their connection: leave it empty")
    for i, source in enumerate(settings.prometheus):
        if not source.target_label:
            raise ConfigError(f"prometheus[{i}].target_label: must name a label (e.g. instance)")
        if source.kind not in SERVER_KINDS:
            raise ConfigError(f"prometheus[{i}].kind: {source.kind!r} is not one of {', '.join(SERVER_KINDS)}")
    settings = dataclasses.replace(settings, targets=tuple(targets))
    _check_headers(settings)
    for proxy in settings.ui.trusted_proxies:
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            raise ConfigError(f"ui.trusted_proxies: '{visible(proxy, 60)}' is not an IP address or network "
                              "(e.g. 10.0.0.5 or 10.0.0.0/8)") from None
    _validate_alerts(settings.alerts)
    return settings


def _email_from_environment(data: dict[str, Any], environ: Mapping[str, str]) -> None:
    """SWEETSPOT_SMTP_* and friends over [alerts.email]: e-mail works without a config file."""
    given: dict[str, Any] = {key: environ[name].strip() for name, key in ENV_EMAIL.items() if environ.get(name, "").strip()}
    if not given:
        return
    alerts = data.setdefault("alerts", {})
    email = alerts.setdefault("email", {}) if isinstance(alerts, dict) else None
    if not isinstance(email, dict):
        raise ConfigError("alerts.email: expected a table")
    if "port" in given:
        try:
            given["port"] = int(given["port"])
        except ValueError:
            raise ConfigError(f"SWEETSPOT_SMTP_PORT: not a port number: {given['port']!r}") from None
    if "to" in given:
        given["to"] = [part.strip() for part in given["to"].split(",") if part.strip()]
    email.update(given)


def _validate_alerts(alerts: AlertsSettings) -> None:
    """Every channel's table (core/channels), then the digest's schedule."""
    for channel in CHANNELS:
        problem = next(channel.problems(getattr(alerts, channel.name), f"alerts.{channel.name}"), "")
        if problem:
            raise ConfigError(problem)
    try:
        parse_schedule(alerts.digest.schedule)
        zone(alerts.digest.timezone)
    except ScheduleError as exc:
        raise ConfigError(f"alerts.digest.{exc.key}: {exc}") from None


def _with_bearer_tokens(sources: tuple[PrometheusSettings, ...], environ: Mapping[str, str]) -> tuple[PrometheusSettings, ...]:
    """Each source's token read from the variable it names (the loader is the one reader of the environment)."""
    return tuple(dataclasses.replace(source, http=_token(source.http, f"prometheus[{i}].http.bearer_token_env",
                                                         f"prometheus[{i}].http", environ, required=False))
                 for i, source in enumerate(sources))


def http_tables(settings: Settings) -> Iterator[tuple[str, HttpSettings]]:
    """``(key, settings)`` of every HTTP table of the file: the targets', their sources', the Prometheus ones."""
    for i, target in enumerate(settings.targets):
        yield f"targets[{i}].http", target.http
        yield f"targets[{i}].gateway.http", target.gateway.http
        yield f"targets[{i}].gpu.http", target.gpu.http
    for i, source in enumerate(settings.prometheus):
        yield f"prometheus[{i}].http", source.http


# A header's name is an RFC 9110 token; its value visible ASCII and inner spaces (what every HTTP
# library sends): a CR or LF (a token read from a file ends with one) would be refused at every request.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?")


def header_problem(key: str, name: str, value: str) -> str:
    """Why the header ``name: value`` cannot be sent, naming ``key`` and never showing the value
    (it may be a credential), or "" when it can."""
    if not _HEADER_NAME.fullmatch(name):
        return f"{key}: the header name '{visible(name, 60)}' is not a valid HTTP header name"
    if value and not _HEADER_VALUE.fullmatch(value):
        return (f"{key}.{visible(name, 60)}: the value (not shown: it may hold a credential) has a line break, control "
                "character, non-ASCII letter or space at its start or end; write it on one line without them")
    return ""


def _check_headers(settings: Settings) -> None:
    """Every header and bearer token of every HTTP table can be sent (ConfigError naming the first that cannot)."""
    hooks = ((f"alerts.{c.name}.http", getattr(settings.alerts, c.name).http) for c in HTTP_CHANNELS)
    for key, http in (*http_tables(settings), *hooks):
        check_http(key, http)


def check_http(key: str, http: HttpSettings, token_key: str = "") -> None:
    """ConfigError naming the setting when a header or the bearer token of ``http`` cannot be sent."""
    for name, value in http.headers.items():
        problem = header_problem(key if key.startswith("--") else f"{key}.headers", name, value)
        if problem:
            raise ConfigError(problem)
    if http.bearer_token and header_problem("", "Authorization", http.bearer_token):
        raise ConfigError(f"{token_key or key + '.bearer_token_env'}: the token in {http.bearer_token_env} (not shown) holds "
                          "a line break, control character, space or non-ASCII letter; a token is one word")


def require_scrape_tokens(settings: Settings) -> None:
    """Refuse to scrape while a ``bearer_token_env`` names an unset variable (ConfigError naming it).

    Only what scrapes calls this (the collector, ``backfill``): reading commands (``status``, the UI)
    never send a token, so they run without it.
    """
    for key, http in http_tables(settings):
        if http.bearer_token_env and not http.bearer_token:
            raise ConfigError(f"{key}.bearer_token_env: the environment variable {http.bearer_token_env} is not set "
                              "(export it, or remove bearer_token_env)")


def read_config_file(path: Path) -> dict[str, Any]:
    """Parse a TOML settings file; errors name the file and the line."""
    try:  # a regular file only, with a cap (core/bounded.py): a FIFO or a device is refused, not waited on
        # utf-8-sig: a byte-order mark (as some Windows editors write) is not part of the text
        return tomllib.loads(read_file(path, MAX_SETTINGS_BYTES).decode("utf-8-sig"))
    except TooLarge as exc:
        raise ConfigError(f"{exc} (a settings file is a regular file; check --config or {ENV_CONFIG})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason}); TOML files are UTF-8") from None
    except IsADirectoryError:
        raise ConfigError(f"{path} is a directory, not a settings file (check --config or {ENV_CONFIG})") from None
    except PermissionError:
        raise ConfigError(f"{path}: not readable (permission denied)") from None
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path} (check --config or {ENV_CONFIG})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except ValueError as exc:  # an integer of 4,300+ digits: Python will not convert it
        raise ConfigError(f"{path}: holds a number no setting can take ({str(exc).split(':')[0]})") from None
    except RecursionError:  # 50,000 nested arrays or tables: deeper than the parser follows
        raise ConfigError(f"{path}: nested too deeply to be read (tables or arrays inside each other by the thousand); "
                          "a settings file nests a few levels") from None


MAX_SETTINGS_BYTES = 16 * 1024 * 1024

DEFAULT_TIMEOUT_SHARE = 0.8  # of interval_s, the default scrape_timeout_s at short intervals


def read_settings(
    config_path: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the settings: file (``config_path`` or ``$SWEETSPOT_CONFIG``), then environment, then overrides, with
    every check the ground floor can make alone. Entry points load through ``app.loader.load_settings``."""
    environ = environ or {}
    path = config_path or environ.get(ENV_CONFIG)
    data: dict[str, Any] = read_config_file(Path(path)) if path else {}
    for secret in ("ui_password", "smtp_password"):
        if secret in data:
            raise ConfigError(f"{secret}: secrets are read from the environment only; remove it from the file")
    email = data["alerts"].get("email") if isinstance(data.get("alerts"), dict) else None
    if isinstance(email, dict) and "password" in email:
        raise ConfigError(f"alerts.email.password: not read from the file; set {ENV_SMTP_PASSWORD} in the environment instead")
    if environ.get(ENV_DB_URL):
        data["db_url"] = environ[ENV_DB_URL]
    if environ.get(ENV_QUERY_DB_URL):
        query = data.setdefault("query", {})
        if isinstance(query, dict):
            query["db_url"] = environ[ENV_QUERY_DB_URL]
    _email_from_environment(data, environ)
    data.update({k: v for k, v in (overrides or {}).items() if v is not None})
    settings = _build(Settings, data)
    if "scrape_timeout_s" not in data:  # the default timeout ends well within the interval (the round is stored after it)
        settings = dataclasses.replace(settings, scrape_timeout_s=min(settings.scrape_timeout_s, DEFAULT_TIMEOUT_SHARE * settings.interval_s))
    settings = dataclasses.replace(
        settings,
        db_url=with_db_password(userinfo_quoted(settings.db_url), environ.get(ENV_DB_PASSWORD, "")),
        ui_password=environ.get(ENV_UI_PASSWORD, ""),
        smtp_password=environ.get(ENV_SMTP_PASSWORD, ""),
        targets=tuple(_with_tokens(t, f"targets[{i}]", environ) for i, t in enumerate(settings.targets)),
        prometheus=_with_bearer_tokens(settings.prometheus, environ),
        alerts=_hooks_with_tokens(settings.alerts, environ),
        query=dataclasses.replace(settings.query, db_url=with_db_password(userinfo_quoted(settings.query.db_url),
                                                                           environ.get(ENV_QUERY_DB_PASSWORD, ""),
                                                                           "query.db_url", ENV_QUERY_DB_PASSWORD)),
    )
    return _validate(settings)


_USERINFO_SPECIALS = {c: urllib.parse.quote(c, safe="") for c in "@/?# "}


def userinfo_quoted(db_url: str) -> str:
    """``db_url`` with the ``@ / ? #`` and spaces of its user and password percent-encoded, its
    userinfo running up to the URL's last ``@``: a base64 password (``/``) or one holding ``@`` then
    reaches the server whole, and no driver message quotes a piece of it as the host name."""
    scheme, sep, rest = db_url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not sep or not at or not any(c in userinfo for c in _USERINFO_SPECIALS):
        return db_url
    user, colon, password = userinfo.partition(":")
    quote = lambda part: "".join(_USERINFO_SPECIALS.get(c, c) for c in part)  # noqa: E731
    return f"{scheme}://{quote(user)}{colon}{quote(password)}@{host}"


def with_db_password(db_url: str, password: str, key: str = "db_url", variable: str = ENV_DB_PASSWORD) -> str:
    """``db_url`` with ``password`` (from SWEETSPOT_DB_PASSWORD) as its user's password, percent-encoded.

    The password stays out of the URL people write and see (compose files, ``ps``, the dashboard);
    every printer masks db_url all the same (core/redact.py)."""
    if not password:
        return db_url
    parts = urllib.parse.urlsplit(db_url)
    user, at, host = parts.netloc.rpartition("@")
    if not parts.scheme.startswith("postgresql"):
        raise ConfigError(f"{variable}: set, but {key} {masked(db_url)!r} is not a postgresql:// URL; unset it")
    if not at or not user:
        raise ConfigError(f"{variable}: set, but {key} names no user; write it as postgresql://USER@HOST/DB")
    if parts.password is not None:
        raise ConfigError(f"{variable}: set, but {key} holds a password too; keep only the variable "
                          "(postgresql://USER@HOST/DB)")
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:{urllib.parse.quote(password, safe='')}@{host}"))


def http_from_flags(headers: Sequence[str], bearer_token_env: str, ca_file: str,
                    environ: Mapping[str, str], flag: str = "--header") -> HttpSettings:
    """HttpSettings from command-line flags: ``headers`` as ``Name: value``, the token read from the
    environment variable ``bearer_token_env`` names."""
    table = {}
    for header in headers:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"{flag}: a header without ':' (not shown: it may hold a credential); write it as 'Name: value'")
        table[name.strip()] = value.strip()
    http = _token(HttpSettings(headers=table, bearer_token_env=bearer_token_env, ca_file=ca_file), "--bearer-token-env", "", environ)
    check_http(flag, http, "--bearer-token-env")
    return http


def _token(http: HttpSettings, env_key: str, at: str, environ: Mapping[str, str], required: bool = True) -> HttpSettings:
    """``http`` with its bearer token read from the variable ``bearer_token_env`` names (``env_key``
    names that setting in errors; ``at`` the table, where a token written in the file is refused).
    Not ``required``, an unset variable leaves the token empty (:func:`require_scrape_tokens` judges it)."""
    if http.bearer_token:
        raise ConfigError(f"{at}.bearer_token: secrets are read from the environment only; "
                          "set bearer_token_env to the variable's name instead")
    if not http.bearer_token_env:
        return http
    # a token read from a file or a Kubernetes secret often ends with a line break: never part of it
    value = environ.get(http.bearer_token_env, "").strip()
    if not value and required:
        raise ConfigError(f"{env_key}: the environment variable {http.bearer_token_env} is not set "
                          "(export it, or remove bearer_token_env)")
    return dataclasses.replace(http, bearer_token=value)


def _hooks_with_tokens(alerts: AlertsSettings, environ: Mapping[str, str]) -> AlertsSettings:
    """Each POSTing channel's bearer token, read from the variable it names."""
    hooks = {c.name: getattr(alerts, c.name) for c in HTTP_CHANNELS}
    return dataclasses.replace(alerts, **{
        key: dataclasses.replace(hook, http=_token(hook.http, f"alerts.{key}.http.bearer_token_env", f"alerts.{key}.http", environ))
        for key, hook in hooks.items()
    })  # fmt: skip


def _with_tokens(target: TargetSettings, key: str, environ: Mapping[str, str]) -> TargetSettings:
    """``target`` with each bearer token read from the environment variable its settings name."""

    def token(http: HttpSettings, at: str) -> HttpSettings:
        return _token(http, f"{at}.bearer_token_env", at, environ, required=False)

    return dataclasses.replace(
        target, http=token(target.http, f"{key}.http"),
        gateway=dataclasses.replace(target.gateway, http=token(target.gateway.http, f"{key}.gateway.http")),
        gpu=dataclasses.replace(target.gpu, http=token(target.gpu.http, f"{key}.gpu.http")),
    )
