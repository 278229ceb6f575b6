"""Typed settings, loaded once at the entry point: TOML file → environment → defaults.

The dataclasses below are the single table of settings: their fields (with the ``help`` metadata)
drive the loader, the validation messages, ``python -m app config --describe`` and the test that
fails when a setting is missing from docs/configuration.md. Nothing below the entry point reads
``os.environ``: the loader takes the environment as an argument.
"""

from __future__ import annotations

import dataclasses
import tomllib
import types
import typing
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.durations import DurationError, parse_duration
from core.errors import SweetspotError
from core.schedule import ScheduleError, parse_schedule, zone

DEFAULT_DB_URL = "sqlite:///data/sweetspot.db"
# Prometheus' sample_limit idea: a page with more model × engine label sets than this keeps its first
# ones. A vLLM server has one series per engine and served model (a data-parallel 64 counts 64).
DEFAULT_MAX_SERIES = 1000

# Environment variables the loader honours (documented in docs/configuration.md).
ENV_CONFIG = "SWEETSPOT_CONFIG"
ENV_DB_URL = "SWEETSPOT_DB_URL"
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


class ConfigError(SweetspotError, ValueError):
    """A settings file or value that cannot be used; the message names the key."""


# The kind of a field that is bookkeeping, not a setting: not read from the file, not documented.
INTERNAL = "internal"


def _setting(default: Any, help: str, *, kind: str = "", factory: Any = None) -> Any:
    meta = {"help": help, "kind": kind}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class HttpSettings:
    """How a source is fetched over HTTP; a source's own table overrides its target's (``over``)."""

    headers: dict[str, str] = _setting(None, "extra request headers, a table of name = value", factory=dict)
    bearer_token_env: str = _setting("", "name of the environment variable holding a bearer token (never the token)")
    ca_file: str = _setting("", "PEM file of the CA that signed the server's certificate (default: the system's store)")
    tls_verify: bool = _setting(True, "verify the server's TLS certificate; false is logged as a warning at start")
    proxy: str = _setting("", "HTTP(S) proxy URL for this source, e.g. http://proxy:3128")
    bearer_token: str = _setting("", "the token itself; only from the environment variable named by bearer_token_env",
                                 kind="secret")
    # The keys the file's table named, whatever their values: a source's tls_verify = true or
    # ca_file = "" must win over its target's, which comparing with the defaults cannot tell.
    # None (built in code): the fields that differ from their defaults.
    given: frozenset[str] | None = field(default=None, compare=False, repr=False, metadata={"kind": INTERNAL})

    def __post_init__(self) -> None:
        if self.given is None:
            changed = frozenset(f.name for f in dataclasses.fields(self) if f.name != "given"
                                and (f.default is dataclasses.MISSING or getattr(self, f.name) != f.default))
            object.__setattr__(self, "given", changed)

    def over(self, base: HttpSettings) -> HttpSettings:
        """These settings where given, ``base``'s elsewhere; headers are merged. The token goes with
        the variable that names it (a source's ``bearer_token_env = ""`` sends none)."""
        names = set(self.given or ()) - {"headers", "given"}
        if "bearer_token_env" in names:
            names.add("bearer_token")
        given = {name: getattr(self, name) for name in names}
        return dataclasses.replace(base, headers={**base.headers, **self.headers}, **given)


@dataclass(frozen=True)
class GatewaySettings:
    """Where a target's gateway queue depth comes from (DOMAIN.md §5)."""

    preset: str = _setting(
        "", "a preset name from docs/gateways.md, e.g. litellm or envoy (fills kind/metric/json_path)"
    )
    kind: str = _setting("none", "prometheus, json or none")
    url: str = _setting("", "Prometheus metrics URL, or the JSON URL when kind = json")
    metric: str = _setting("", "sample name read as queue depth (kind = prometheus); a+b sums, a|b takes the first exposed")
    labels: dict[str, str] = _setting(
        None, "only samples whose labels match all of these count (kind = prometheus)", factory=dict
    )
    json_path: str = _setting("", "dotted path to the number in the JSON document (kind = json)")
    http: HttpSettings = _setting(None, "HTTP settings of the gateway source (over targets[].http)", factory=HttpSettings)


@dataclass(frozen=True)
class GpuSettings:
    """Where a target's GPU figures come from."""

    source: str = _setting("none", "nvml (GPUs of this host), dcgm (a dcgm-exporter URL) or none")
    url: str = _setting("", "dcgm-exporter metrics URL (source = dcgm), default port 9400")
    http: HttpSettings = _setting(None, "HTTP settings of the dcgm source (over targets[].http)", factory=HttpSettings)


@dataclass(frozen=True)
class CeilingSettings:
    """Inputs of the bandwidth ceiling: ceiling tok/s = bandwidth per GPU ÷ (weight bytes ÷ TP)."""

    weight_gb: float = _setting(40.0, "model weight size in GB (70B at 4 bit ≈ 40)")
    tensor_parallel: int = _setting(8, "tensor-parallel size (GPUs the weights are split over)")
    bandwidth_gbps: float | None = _setting(
        None, "peak memory bandwidth per GPU in GB/s; unset = from NVML, else 900 (V100)"
    )


@dataclass(frozen=True)
class TargetSettings:
    """One vLLM deployment to watch."""

    name: str = _setting("default", "short unique name shown in the UI and used by --target")
    vllm_url: str = _setting("", "vLLM Prometheus endpoint, e.g. http://host:8000/metrics")
    engine: str = _setting("auto", "vllm, sglang, or auto (the page's names decide); vllm_url is then SGLang's /metrics")
    gateway: GatewaySettings = _setting(None, "gateway queue-depth source", factory=GatewaySettings)
    gpu: GpuSettings = _setting(None, "GPU figures source", factory=GpuSettings)
    ceiling: CeilingSettings = _setting(None, "bandwidth ceiling inputs", factory=CeilingSettings)
    sweetspot: SweetSpotOverrides = _setting(
        None, "this target's own sweet-spot thresholds (unset keys: the global [sweetspot])",
        factory=lambda: SweetSpotOverrides(),  # defined below, with the thresholds it overrides
    )
    http: HttpSettings = _setting(None, "HTTP settings of every source of this target", factory=HttpSettings)
    max_series: int | None = _setting(None, "this target's own limit on series (unset: the global max_series)")

    def source_http(self, source: str) -> HttpSettings:
        """The HTTP settings of ``source`` (vllm, gateway or gpu): its own over the target's."""
        own = {"gateway": self.gateway.http, "gpu": self.gpu.http}.get(source)
        return own.over(self.http) if own is not None else self.http


@dataclass(frozen=True)
class PrometheusSettings:
    """A Prometheus (or compatible: VictoriaMetrics, Thanos, Mimir) that already scrapes vLLM servers."""

    url: str = _setting("", "base URL of the Prometheus server, e.g. http://prometheus:9090")
    selector: str = _setting('{job="vllm"}', "series selector of the vLLM series, e.g. {job=\"vllm\"}")
    target_label: str = _setting("instance", "the label whose every value is one target")
    gateway_selector: str = _setting("", "selector of the gateway queue-depth series (empty: none)")
    gateway_label: str = _setting("", "label of the gateway series that names the target (default: target_label)")
    dcgm_selector: str = _setting("", "selector of the dcgm-exporter series (empty: none)")
    dcgm_label: str = _setting("", "label of the dcgm series that names the target (default: target_label)")
    gone_after_s: float = _setting(300.0, "a target absent this long from the answers is marked down", kind="duration")
    # The same HTTP settings as a target's sources (basic auth also from the URL: https://user:pass@host)
    http: HttpSettings = _setting(None, "HTTP settings (headers, bearer token, CA file, TLS verification, proxy)",
                                  factory=HttpSettings)
    ceiling: CeilingSettings = _setting(None, "bandwidth ceiling inputs of the targets it finds", factory=CeilingSettings)


@dataclass(frozen=True)
class SweetSpotSettings:
    """Thresholds that define "in the sweet spot" (DOMAIN.md §3)."""

    ttft_p95_slo_s: float = _setting(3.0, "TTFT P95 above this many seconds leaves the sweet spot", kind="duration")
    concurrency: int = _setting(16, "sweet-spot concurrency: running requests above it leave the sweet spot")
    kv_warning: float = _setting(0.9, "KV-cache usage (0–1) that raises a warning")
    kv_critical: float = _setting(0.98, "KV-cache usage (0–1) that is critical (preemption imminent)")
    min_efficiency: float = _setting(0.6, "tok/s under this fraction of the ceiling while requests queue")
    queue_growth_s: float = _setting(180.0, "gateway queue growing for this long leaves the sweet spot", kind="duration")


@dataclass(frozen=True)
class SweetSpotOverrides:
    """A target's own sweet-spot thresholds (``[targets.sweetspot]``); None keeps the global value.

    The same fields as :class:`SweetSpotSettings` (a test checks that they stay the same).
    """

    ttft_p95_slo_s: float | None = _setting(None, "this target's TTFT P95 SLO", kind="duration")
    concurrency: int | None = _setting(None, "this target's sweet-spot concurrency")
    kv_warning: float | None = _setting(None, "this target's KV-cache warning level (0–1)")
    kv_critical: float | None = _setting(None, "this target's KV-cache critical level (0–1)")
    min_efficiency: float | None = _setting(None, "this target's minimum efficiency while requests queue")
    queue_growth_s: float | None = _setting(None, "this target's queue-growth span", kind="duration")


def effective_sweetspot(settings: Settings, target_name: str) -> SweetSpotSettings:
    """A target's sweet-spot thresholds: the global ``[sweetspot]`` with the target's own keys on top.

    An unknown target (a stored one no longer configured) gets the global thresholds.
    """
    for target in settings.targets:
        if target.name == target_name:
            given = {k: v for k, v in dataclasses.asdict(target.sweetspot).items() if v is not None}
            return dataclasses.replace(settings.sweetspot, **given) if given else settings.sweetspot
    return settings.sweetspot


@dataclass(frozen=True)
class RuleSettings:
    """One ``[[alerts.rules]]`` entry: changes a default rule (same name) or adds one (docs/alerts.md).

    Empty strings and unset durations keep the default rule's value.
    """

    name: str = _setting("", "rule name: a default rule's to change it, a new one to add a rule")
    enabled: bool = _setting(True, "false disables the rule")
    targets: tuple[str, ...] = _setting(None, "apply this entry to these targets only (empty: every target)", factory=tuple)
    expr: str = _setting("", "the value: a figure or arithmetic over figures, e.g. ttft_p95_s", kind="expression")
    op: str = _setting("", "comparison: >, >=, <, <=, ==, !=")
    threshold: str = _setting("", "a number or an expression over figures and sweet-spot thresholds", kind="expression")
    when: str = _setting("", "the rule holds only while this expression is true, e.g. queued > 0", kind="expression")
    window_s: float | None = _setting(None, "window of the figures (default 5m)", kind="duration")
    for_s: float | None = _setting(None, "how long the condition must hold before firing (pending)", kind="duration")
    keep_firing_for_s: float | None = _setting(None, "how long a firing alert stays firing once the condition clears", kind="duration")
    severity: str = _setting("", "warning or critical")
    label: str = _setting("", "what the value is, e.g. 'TTFT P95 over {window}'")
    unit: str = _setting("", "unit of the value as displayed: s, %, tok/s, requests")
    scale: float | None = _setting(None, "display factor (100 shows a 0–1 fraction as %)")
    detail: str = _setting("", "extra text after the comparison (format fields: figures, thresholds)")
    recommendation: str = _setting("", "what to do: the vLLM or gateway knob to turn")
    labels: dict[str, str] = _setting(None, "labels attached to the alert (e.g. team = 'serving')", factory=dict)
    per_model: bool = _setting(False, "true: also one alert per model the target serves")


@dataclass(frozen=True)
class MuteWindowSettings:
    """A recurring time range in which matching alerts notify nobody (they still change state)."""

    name: str = _setting("", "name shown where the window holds an alert back")
    weekdays: tuple[str, ...] = _setting(None, "mon … sun; empty: every day", factory=tuple)
    start: str = _setting("00:00", "start time HH:MM (local to timezone)")
    end: str = _setting("00:00", "end time HH:MM; before start wraps past midnight; equal to start: all day")
    timezone: str = _setting("UTC", "IANA time zone name, e.g. Europe/Paris")
    matchers: dict[str, str] = _setting(None, "only alerts whose rule/target/model/severity equal these", factory=dict)


@dataclass(frozen=True)
class UiSettings:
    """The Streamlit dashboard."""

    port: int = _setting(8501, "port the UI listens on")
    address: str = _setting("localhost", "address the UI binds to")
    refresh_s: float = _setting(10.0, "live refresh period of the charts", kind="duration")
    allow_public: bool = _setting(
        False, f"serve the UI on a public address (0.0.0.0, ::) without {ENV_UI_PASSWORD}; off, it refuses to start"
    )


@dataclass(frozen=True)
class EmailRoute:
    """Recipients for the alerts it matches; the first route that matches an alert wins."""

    severity: str = _setting("", "match alerts of this severity (warning or critical); empty = any")
    target: str = _setting("", "match alerts of this target; empty = any")
    to: tuple[str, ...] = _setting(None, "recipients of the matched alerts", factory=tuple)


GROUP_BY_KEYS = ("rule", "target", "model", "severity")
TLS_MODES = ("none", "starttls", "ssl")


@dataclass(frozen=True)
class EmailSettings:
    """Alert e-mail ([alerts.email]); delivery modelled on Alertmanager (docs/alerts.md, E-mail)."""

    host: str = _setting("", "SMTP server; empty = e-mail off (alerts are still evaluated and stored)")
    port: int = _setting(0, "SMTP port; 0 = by tls: 25 (none), 587 (starttls), 465 (ssl)")
    user: str = _setting("", "user to log in as; empty = no login (password: SWEETSPOT_SMTP_PASSWORD)")
    tls: str = _setting("starttls", "none, starttls (upgrade after connecting) or ssl (TLS from the start)")
    from_address: str = _setting("", "From address of alert e-mails")
    to: tuple[str, ...] = _setting(None, "recipients when no route matches", factory=tuple)
    dashboard_url: str = _setting("", "the dashboard's address (http://host:8501), for the link in each e-mail")
    routes: tuple[EmailRoute, ...] = _setting(None, "recipients per severity and per target ([[alerts.email.routes]])", factory=tuple)
    group_by: tuple[str, ...] = _setting(("target",), "alerts with equal values of these go in one e-mail (rule, target, model, severity)", factory=lambda: ("target",))
    group_wait_s: float = _setting(30.0, "wait this long after a group's first alert fires, to gather the others", kind="duration")
    group_interval_s: float = _setting(300.0, "at most one e-mail per group this often for changes (new or resolved alerts)", kind="duration")
    repeat_interval_s: float = _setting(4 * 3600.0, "remind of alerts still firing this often", kind="duration")
    send_resolved: bool = _setting(True, "send a notice when a group's alerts resolve")
    retry_initial_s: float = _setting(10.0, "first retry of a failed e-mail after this long; doubles each time", kind="duration")
    retry_max_s: float = _setting(300.0, "longest wait between two retries", kind="duration")
    give_up_after_s: float = _setting(86400.0, "an e-mail still not accepted this long after it was queued is marked failed", kind="duration")
    timeout_s: float = _setting(10.0, "timeout of one SMTP conversation step", kind="duration")

    @property
    def enabled(self) -> bool:
        return bool(self.host)

    @property
    def effective_port(self) -> int:
        return self.port or {"none": 25, "starttls": 587, "ssl": 465}.get(self.tls, 25)


@dataclass(frozen=True)
class DigestSettings:
    """The scheduled digest ([alerts.digest]); off while it has no recipient."""

    schedule: str = _setting("daily 08:00", "daily HH:MM, or a weekday and a time (monday 08:00): when the digest is sent")
    timezone: str = _setting("UTC", "time zone of the schedule and of the digest's times, e.g. Europe/Paris")
    to: tuple[str, ...] = _setting(None, "recipients of the digest; empty = no digest", factory=tuple)


@dataclass(frozen=True)
class AlertsSettings:
    """The alert evaluator (docs/alerts.md), e-mail delivery and the digest."""

    evaluate_every_s: float = _setting(15.0, "how often the collector evaluates the alert rules", kind="duration")
    lease_s: float = _setting(60.0, "the evaluator's lease: another process takes over this long after a holder dies", kind="duration")
    rules: tuple[RuleSettings, ...] = _setting(None, "rule changes and additions ([[alerts.rules]])", factory=tuple)
    mute_windows: tuple[MuteWindowSettings, ...] = _setting(None, "recurring mute windows ([[alerts.mute_windows]])", factory=tuple)
    email: EmailSettings = _setting(None, "alert e-mail ([alerts.email])", factory=EmailSettings)
    digest: DigestSettings = _setting(None, "the scheduled digest ([alerts.digest])", factory=DigestSettings)


@dataclass(frozen=True)
class QuerySettings:
    """Limits of ad-hoc SQL (``python -m app query`` and the Query page, docs/query.md)."""

    timeout_s: float = _setting(2.0, "time limit of one query (--timeout may ask for up to max_timeout_s)", kind="duration")
    max_timeout_s: float = _setting(30.0, "the most time any query may be given", kind="duration")
    row_limit: int = _setting(10000, "rows returned at most; more are cut off and reported as truncated")


@dataclass(frozen=True)
class Settings:
    """Everything the product reads; built once by :func:`load_settings`."""

    db_url: str = _setting(DEFAULT_DB_URL, "database URL: sqlite:///path or postgresql://user@host/db")
    interval_s: float = _setting(5.0, "scrape interval", kind="duration")
    scrape_timeout_s: float = _setting(3.0, "timeout of one HTTP scrape", kind="duration")
    max_series: int = _setting(
        DEFAULT_MAX_SERIES, "series (model × engine label sets) kept from one vLLM page; the page's first ones are kept"
    )
    raw_retention_s: float = _setting(48 * 3600.0, "how long per-scrape rows are kept", kind="duration")
    rollup_retention_s: float = _setting(90 * 86400.0, "how long 1-minute rollups are kept", kind="duration")
    hourly_retention_s: float = _setting(400 * 86400.0, "how long hourly rollups are kept", kind="duration")
    simulator: bool = _setting(True, "start the built-in simulator when no target has a vllm_url")
    targets: tuple[TargetSettings, ...] = _setting(None, "the deployments to watch ([[targets]])", factory=tuple)
    prometheus: tuple[PrometheusSettings, ...] = _setting(
        None, "Prometheus servers to read targets from ([[prometheus]])", factory=tuple
    )
    sweetspot: SweetSpotSettings = _setting(None, "sweet-spot thresholds", factory=SweetSpotSettings)
    ui: UiSettings = _setting(None, "dashboard settings", factory=UiSettings)
    alerts: AlertsSettings = _setting(None, "alert rules, their evaluator, e-mail and the digest", factory=AlertsSettings)
    query: QuerySettings = _setting(None, "ad-hoc query limits", factory=QuerySettings)
    ui_password: str = _setting("", f"UI password; only from the environment ({ENV_UI_PASSWORD})", kind="secret")
    smtp_password: str = _setting("", f"SMTP password; only from the environment ({ENV_SMTP_PASSWORD})", kind="secret")

    def series_limit(self, target: TargetSettings) -> int:
        """The most series kept from ``target``'s vLLM page: its own ``max_series``, else the global one."""
        return self.max_series if target.max_series is None else target.max_series

    def target(self, name: str | None) -> TargetSettings:
        """The named target, or the only/first one when ``name`` is None."""
        if name is None and self.targets:
            return self.targets[0]
        for target in self.targets:
            if target.name == name:
                return target
        known = ", ".join(t.name for t in self.targets) or "none configured"
        raise ConfigError(f"unknown target {name!r} (known: {known})")


GATEWAY_PRESETS: dict[str, dict[str, Any]] = {
    "litellm": {"kind": "prometheus", "metric": "litellm_in_flight_requests"},
    "litellm-json": {"kind": "json", "json_path": "in_flight_requests"},
    "production-stack": {"kind": "prometheus", "metric": "vllm:num_prefill_requests+vllm:num_decoding_requests"},
    "gateway-api": {"kind": "prometheus", "metric": "inference_pool_average_queue_size"},
    "llm-d": {"kind": "prometheus", "metric": "inference_extension_flow_control_queue_size"},
    "aibrix": {"kind": "prometheus", "metric": "gateway_in_flight_requests"},
    "envoy": {"kind": "prometheus", "metric": "envoy_cluster_upstream_rq_pending_active"},
    "sweetspot-sim": {"kind": "prometheus", "metric": "sweetspot_gateway_queue_depth"},
}


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def iter_settings(cls: type = Settings, prefix: str = "") -> Iterator[tuple[str, str, Any, str]]:
    """Yield ``(key, type name, default, help)`` for every leaf setting, e.g. ``targets[].gpu.url``."""
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if f.metadata.get("kind") == INTERNAL:
            continue
        tp = hints[f.name]
        key = f"{prefix}{f.name}"
        inner = _sequence_item(tp)
        if _is_dataclass_type(tp):
            yield from iter_settings(tp, key + ".")
        elif inner is not None and _is_dataclass_type(inner):
            yield from iter_settings(inner, key + "[].")
        else:
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[operator]
            yield key, f.metadata.get("kind") or _type_name(tp), default, f.metadata.get("help", "")


def _type_name(tp: Any) -> str:
    return str(tp).replace("typing.", "") if not isinstance(tp, type) else tp.__name__


def _sequence_item(tp: Any) -> Any:
    if typing.get_origin(tp) is tuple:
        args = typing.get_args(tp)
        return args[0] if args else None
    return None


def _convert(value: Any, tp: Any, kind: str, key: str) -> Any:
    if kind == "expression":  # a number or the text of an expression; checked against the figures later
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ConfigError(f"{key}: expected a number or an expression, got {value!r}")
        return str(value)
    if kind == "duration":
        try:
            return parse_duration(value)
        except DurationError as exc:
            raise ConfigError(f"{key}: {exc}") from None
    if _is_dataclass_type(tp):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key}: expected a table, got {value!r}")
        return _build(tp, value, key + ".")
    item = _sequence_item(tp)
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
        return float(value)
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tp in (str, bool) and isinstance(value, tp):
        return value
    raise ConfigError(f"{key}: expected {tp.__name__}, got {value!r}")


def _build(cls: type, data: Mapping[str, Any], prefix: str = "") -> Any:
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.metadata.get("kind") != INTERNAL}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"unknown setting {prefix}{unknown[0]} (see docs/configuration.md)")
    kwargs = {
        name: _convert(data[name], hints[name], fields[name].metadata.get("kind", ""), prefix + name)
        for name in data
    }
    if cls is HttpSettings:
        kwargs["given"] = frozenset(data)
    return cls(**kwargs)


def apply_gateway_preset(gateway: GatewaySettings, key: str = "gateway") -> GatewaySettings:
    """Fill kind / metric / json_path from the preset where not given; explicit values win, kind aside."""
    if not gateway.preset:
        return gateway
    preset = GATEWAY_PRESETS.get(gateway.preset)
    if preset is None:
        raise ConfigError(f"{key}.preset: unknown preset {gateway.preset!r} (one of {', '.join(GATEWAY_PRESETS)})")
    # The preset's fields are plain strings: read them directly (asdict deep-copies every field),
    # and hand back the same settings when the preset is already applied (the collector calls this
    # every round with the loader's already resolved settings).
    explicit = {k: getattr(gateway, k) for k in preset if k != "kind" and getattr(gateway, k)}
    resolved = {**preset, **explicit}
    if all(getattr(gateway, k) == v for k, v in resolved.items()):
        return gateway
    return dataclasses.replace(gateway, **resolved)


def url_problem(value: str) -> str:
    """Why ``value`` cannot be scraped as an http(s) URL with a host, or "" when it can."""
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return f"{value!r} is not an http:// or https:// URL with a host (e.g. http://10.0.0.5:8000/metrics)"
    return ""


def _validate_urls(target: TargetSettings, key: str) -> None:
    if not target.vllm_url:
        # without it the target has nothing to scrape; `run` used to start the demo simulator then
        raise ConfigError(f"{key}.vllm_url: required, vLLM's /metrics URL (e.g. http://10.0.0.5:8000/metrics); "
                          "leave out [[targets]] altogether for the demo")  # fmt: skip
    for name, url in (("vllm_url", target.vllm_url), ("gateway.url", target.gateway.url), ("gpu.url", target.gpu.url)):
        problem = url and url_problem(url)
        if problem:
            raise ConfigError(f"{key}.{name}: {problem}")


def _validate(settings: Settings) -> Settings:
    names = [t.name for t in settings.targets]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"targets: the name {duplicates[0]!r} is used twice; names must be unique")
    targets = []
    for i, target in enumerate(settings.targets):
        key = f"targets[{i}]"
        gateway = apply_gateway_preset(target.gateway, key + ".gateway")
        if gateway.kind not in ("none", "prometheus", "json"):
            raise ConfigError(f"{key}.gateway.kind: {gateway.kind!r} is not one of prometheus, json, none")
        if gateway.kind != "none" and not gateway.url:
            raise ConfigError(f"{key}.gateway.url: required when gateway.kind = {gateway.kind}")
        if target.engine not in ("auto", "vllm", "sglang"):
            raise ConfigError(f"{key}.engine: {target.engine!r} is not one of auto, vllm, sglang")
        if target.gpu.source not in ("none", "nvml", "dcgm"):
            raise ConfigError(f"{key}.gpu.source: {target.gpu.source!r} is not one of nvml, dcgm, none")
        if target.gpu.source == "dcgm" and not target.gpu.url:
            raise ConfigError(f"{key}.gpu.url: required when gpu.source = dcgm (e.g. http://host:9400/metrics)")
        if target.ceiling.tensor_parallel < 1 or target.ceiling.weight_gb <= 0:
            raise ConfigError(f"{key}.ceiling: weight_gb must be > 0 and tensor_parallel ≥ 1")
        _validate_urls(target, key)
        targets.append(dataclasses.replace(target, gateway=gateway))
    if settings.interval_s <= 0:
        raise ConfigError("interval_s: must be greater than 0")
    q = settings.query
    if not 0 < q.timeout_s <= q.max_timeout_s or q.row_limit < 1:
        raise ConfigError("query: timeout_s must be > 0 and ≤ max_timeout_s, and row_limit ≥ 1")
    for i, source in enumerate(settings.prometheus):
        if not source.url.startswith(("http://", "https://")):
            raise ConfigError(f"prometheus[{i}].url: {source.url!r} is not an http(s) URL (e.g. http://prometheus:9090)")
        if not source.target_label:
            raise ConfigError(f"prometheus[{i}].target_label: must name a label (e.g. instance)")
    settings = dataclasses.replace(settings, targets=tuple(targets))
    _validate_email(settings.alerts)
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


def _validate_email(alerts: AlertsSettings) -> None:
    email, digest = alerts.email, alerts.digest
    if email.tls not in TLS_MODES:
        raise ConfigError(f"alerts.email.tls: {email.tls!r} is not one of none, starttls, ssl (or SWEETSPOT_SMTP_TLS)")
    unknown = [key for key in email.group_by if key not in GROUP_BY_KEYS]
    if unknown:
        raise ConfigError(f"alerts.email.group_by: {unknown[0]!r} is not one of {', '.join(GROUP_BY_KEYS)}")
    for i, route in enumerate(email.routes):
        if route.severity not in ("", "warning", "critical"):
            raise ConfigError(f"alerts.email.routes[{i}].severity: {route.severity!r} is not warning or critical")
        if not route.to:
            raise ConfigError(f"alerts.email.routes[{i}].to: a route needs at least one recipient")
    if email.enabled and not email.from_address:
        raise ConfigError("alerts.email.from_address: required once alerts.email.host is set (or SWEETSPOT_ALERT_FROM)")
    if email.enabled and not email.to and not email.routes:
        raise ConfigError("alerts.email.to: no recipient; name one (or SWEETSPOT_ALERT_TO, comma-separated)")

    try:
        parse_schedule(digest.schedule)
        zone(digest.timezone)
    except ScheduleError as exc:
        raise ConfigError(f"alerts.digest.{exc.key}: {exc}") from None


def _with_bearer_tokens(sources: tuple[PrometheusSettings, ...], environ: Mapping[str, str]) -> tuple[PrometheusSettings, ...]:
    """Each source's token read from the variable it names (the loader is the one reader of the environment)."""
    out = []
    for i, source in enumerate(sources):
        name = source.http.bearer_token_env
        if source.http.bearer_token:
            raise ConfigError(f"prometheus[{i}].http.bearer_token: secrets are read from the environment only; "
                              "name the variable in bearer_token_env")
        if name and not environ.get(name):
            raise ConfigError(f"prometheus[{i}].http.bearer_token_env: the variable {name} is not set")
        http = dataclasses.replace(source.http, bearer_token=environ.get(name, "") if name else "")
        out.append(dataclasses.replace(source, http=http))
    return tuple(out)


def read_config_file(path: Path) -> dict[str, Any]:
    """Parse a TOML settings file; errors name the file and the line."""
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path} (check --config or {ENV_CONFIG})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def load_settings(
    config_path: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the settings: file (``config_path`` or ``$SWEETSPOT_CONFIG``), then environment, then overrides."""
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
    _email_from_environment(data, environ)
    data.update({k: v for k, v in (overrides or {}).items() if v is not None})
    settings = _build(Settings, data)
    settings = dataclasses.replace(
        settings,
        ui_password=environ.get(ENV_UI_PASSWORD, ""),
        smtp_password=environ.get(ENV_SMTP_PASSWORD, ""),
        targets=tuple(_with_tokens(t, f"targets[{i}]", environ) for i, t in enumerate(settings.targets)),
        prometheus=_with_bearer_tokens(settings.prometheus, environ),
    )
    return _validate(settings)


def http_from_flags(headers: Sequence[str], bearer_token_env: str, ca_file: str,
                    environ: Mapping[str, str], flag: str = "--header") -> HttpSettings:
    """HttpSettings from command-line flags: ``headers`` as ``Name: value``, the token read from the
    environment variable ``bearer_token_env`` names."""
    table = {}
    for header in headers:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"{flag} {header!r}: write it as 'Name: value'")
        table[name.strip()] = value.strip()
    http = HttpSettings(headers=table, bearer_token_env=bearer_token_env, ca_file=ca_file)
    return _token(http, "--bearer-token-env", "", environ)


def _token(http: HttpSettings, env_key: str, at: str, environ: Mapping[str, str]) -> HttpSettings:
    """``http`` with its bearer token read from the variable ``bearer_token_env`` names (``env_key``
    names that setting in errors; ``at`` the table, where a token written in the file is refused)."""
    if http.bearer_token:
        raise ConfigError(f"{at}.bearer_token: secrets are read from the environment only; "
                          "set bearer_token_env to the variable's name instead")
    if not http.bearer_token_env:
        return http
    value = environ.get(http.bearer_token_env, "")
    if not value:
        raise ConfigError(f"{env_key}: the environment variable {http.bearer_token_env} is not set "
                          "(export it, or remove bearer_token_env)")
    return dataclasses.replace(http, bearer_token=value)


def _with_tokens(target: TargetSettings, key: str, environ: Mapping[str, str]) -> TargetSettings:
    """``target`` with each bearer token read from the environment variable its settings name."""

    def token(http: HttpSettings, at: str) -> HttpSettings:
        return _token(http, f"{at}.bearer_token_env", at, environ)

    return dataclasses.replace(
        target, http=token(target.http, f"{key}.http"),
        gateway=dataclasses.replace(target.gateway, http=token(target.gateway.http, f"{key}.gateway.http")),
        gpu=dataclasses.replace(target.gpu, http=token(target.gpu.http, f"{key}.gpu.http")),
    )
