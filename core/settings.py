"""Typed settings, loaded once at the entry point: TOML file → environment → defaults.

The dataclasses below are the single table of settings: their fields (with the ``help`` metadata)
drive the loader, the validation messages, ``python -m app config --describe`` and the test that
fails when a setting is missing from docs/configuration.md. Nothing below the entry point reads
``os.environ``: the loader takes the environment as an argument.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import ipaddress
import re
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
from core.limits import MAX_DURATION_S, finite_problem, limit_problems, url_problem
from core.redact import masked
from core.schedule import ScheduleError, parse_schedule, zone
from core.text import escaped, name_key, name_problem, visible

DEFAULT_DB_URL = "sqlite:///data/sweetspot.db"
# Prometheus' sample_limit idea: a page with more model × engine label sets than this keeps its first
# ones. A vLLM server has one series per engine and served model (a data-parallel 64 counts 64).
DEFAULT_MAX_SERIES = 1000

# Environment variables the loader honours (documented in docs/configuration.md).
DEMO_TARGET = "demo"  # the target `run` watches the built-in simulator as
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
    follow_redirects_across_origins: bool = _setting(
        False, "follow a redirect to another scheme, host or port (never with this source's headers, token or basic auth)"
    )
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
    peak_tflops: float | None = _setting(
        None, "peak dense TFLOP/s per GPU for the compute roof; unset = the datasheet table by the GPU's name, else none"
    )
    precision: str = _setting(
        "bf16_tensor", "which datasheet peak the compute roof uses: bf16_tensor, fp16_tensor, fp8_tensor or fp16_cuda_core"
    )


@dataclass(frozen=True)
class CeilingSettings:
    """Inputs of the decode step model (core/mbu.py, docs/ceiling.md): the report's ceiling bounds decode
    steps/s at bandwidth per GPU ÷ (weight bytes ÷ TP). No defaults: a target without weight_gb and
    tensor_parallel has no ceiling, no step model and no modelled MBU (never the reference's borrowed)."""

    weight_gb: float | None = _setting(None, "model weight size in GB (10⁹ bytes; 70B at 4 bit ≈ 40); unset = no ceiling")
    tensor_parallel: int | None = _setting(None, "tensor-parallel size (GPUs the weights are split over); unset = no ceiling")
    bandwidth_gbps: float | None = _setting(
        None, "peak memory bandwidth per GPU in GB/s; unset = NVML's formula on the target's GPUs, else none"
    )
    kv_bytes_per_token: float | None = _setting(
        None, "KV-cache bytes one token of context holds, all layers and GPUs; unset = from vLLM's cache_config_info"
    )
    active_params_b: float | None = _setting(
        None, "parameters a token passes through, in billions (an MoE's active ones), for the compute roof; unset = none"
    )

    @property
    def has_inputs(self) -> bool:
        """Whether the step model's inputs are there (weights and TP; bandwidth may come from NVML)."""
        return self.weight_gb is not None and self.tensor_parallel is not None


# The reference deployment's inputs (DOMAIN.md §1): 70B at 4 bit over TP 8 on V100s; KV of a 70B Llama:
# 80 layers × 8 KV heads × 128 dims × 2 (K and V) × 2 bytes. Only the demo configures them.
REFERENCE_CEILING = CeilingSettings(weight_gb=40.0, tensor_parallel=8, bandwidth_gbps=900.0,
                                    kv_bytes_per_token=80 * 8 * 128 * 2 * 2)
# What a figure needing the ceiling says when the target's inputs are missing (status, the hints).
NO_CEILING = "unknown: set targets[].ceiling.weight_gb and tensor_parallel"


def ceiling_missing(weight_gb: float | None, tensor_parallel: int | None, bandwidth_gbps: float | None,
                    gpu_source: str) -> str:  # fmt: skip
    """What a target without a ceiling lacks, naming only the missing inputs and showing those set:
    ``unknown: no bandwidth per GPU: set targets[].ceiling.bandwidth_gbps, or targets[].gpu.source = "nvml"
    (set: weight_gb 40 GB, tensor_parallel 8; GPU source: none)``. NO_CEILING when nothing is set."""
    given = [f"weight_gb {weight_gb:g} GB" if weight_gb is not None else "",
             f"tensor_parallel {tensor_parallel}" if tensor_parallel is not None else "",
             f"bandwidth_gbps {bandwidth_gbps:g} GB/s" if bandwidth_gbps is not None else ""]
    given_text = ", ".join(g for g in given if g)
    if not given_text:
        return NO_CEILING
    if weight_gb is None or tensor_parallel is None:
        lacking = "weight_gb" if weight_gb is None else "tensor_parallel"
        return f"unknown: set targets[].ceiling.{lacking} (set: {given_text})"
    source = gpu_source or "none"
    why = {"nvml": "NVML has not reported the GPUs' peak yet", "dcgm": "dcgm-exporter does not report peak bandwidth"}
    lack = why.get(source, "no GPU source reads it")
    return (f"unknown: no bandwidth per GPU ({lack}): set targets[].ceiling.bandwidth_gbps"
            + ("" if source in ("nvml", "dcgm") else ', or targets[].gpu.source = "nvml" on the GPUs\' host')
            + f" (set: {given_text}; GPU source: {source})")


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
    sweet_spot: int | None = _setting(
        None, "this target's sweet-spot concurrency (the same as sweetspot.concurrency; unset: its latest sweep, "
        "else learned from its traffic, else unknown)",
    )
    max_num_seqs: int | None = _setting(None, "the engine's --max-num-seqs, when known: a sweet spot above it is refused")
    # The demo's target: its sweet spot is the reference report's (source "reference"), set by `run` only.
    reference: bool = field(default=False, compare=False, repr=False, metadata={"kind": INTERNAL})
    model_config: str = _setting(
        "", "path of the served model's config.json: weights, KV bytes per token and active parameters read from it"
    )

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
    kind: str = _setting("auto", "prometheus, victoriametrics, or auto (the server's own /metrics says which)")
    # The same HTTP settings as a target's sources (basic auth also from the URL: https://user:pass@host)
    http: HttpSettings = _setting(None, "HTTP settings (headers, bearer token, CA file, TLS verification, proxy)",
                                  factory=HttpSettings)
    ceiling: CeilingSettings = _setting(None, "bandwidth ceiling inputs of the targets it finds", factory=CeilingSettings)


SERVER_KINDS = ("auto", "prometheus", "victoriametrics")  # prometheus: also Thanos and Mimir (docs/fleet.md)


@dataclass(frozen=True)
class SweetSpotSettings:
    """Thresholds that define "in the sweet spot" (DOMAIN.md §3)."""

    ttft_p95_slo_s: float = _setting(3.0, "TTFT P95 above this many seconds leaves the sweet spot", kind="duration")
    concurrency: int | None = _setting(
        None, "sweet-spot concurrency: running requests above it leave the sweet spot (unset: each target's own, "
        "from its sweep or learned from its traffic; docs/alerts.md)",
    )
    kv_warning: float = _setting(0.9, "KV-cache usage (0–1) that raises a warning")
    kv_critical: float = _setting(0.98, "KV-cache usage (0–1) that is critical (preemption imminent)")
    min_mbu: float = _setting(0.3, "only for rules you write: no default rule reads it since the MBU floor was retired "
                              "(docs/alerts.md); model bandwidth utilisation (0–1)")
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
    min_mbu: float | None = _setting(None, "this target's min_mbu (0–1), only for rules you write")
    queue_growth_s: float | None = _setting(None, "this target's queue-growth span", kind="duration")


def stale_after(settings: Settings) -> float:
    """Seconds after its last scrape a target reads stale on every surface: two intervals and the
    scrape timeout (a round that was due twice and its last GET's deadline), whatever stopped it."""
    return 2 * settings.interval_s + settings.scrape_timeout_s


def effective_sweetspot(settings: Settings, target_name: str) -> SweetSpotSettings:
    """A target's sweet-spot thresholds: the global ``[sweetspot]`` with the target's own keys on top.

    An unknown target (a stored one no longer configured) gets the global thresholds.
    """
    for target in settings.targets:
        if target.name == target_name:
            return sweetspot_of(settings, target)
    return settings.sweetspot


def sweetspot_of(settings: Settings, target: TargetSettings) -> SweetSpotSettings:
    """:func:`effective_sweetspot` of a target at hand (no look-up by name: the loader's check is linear)."""
    given = {k: v for k, v in dataclasses.asdict(target.sweetspot).items() if v is not None}
    if target.sweet_spot is not None:
        given["concurrency"] = target.sweet_spot
    return dataclasses.replace(settings.sweetspot, **given) if given else settings.sweetspot


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
    panel: str = _setting("", "the dashboard panel its alert e-mail shows: ttft, preemptions, kv_cache, concurrency, throughput")
    title: str = _setting("", "its short name in e-mail subjects, e.g. 'TTFT P99'")


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
        False, f"serve the UI beyond loopback (0.0.0.0, ::, a LAN address) without {ENV_UI_PASSWORD}; off, it refuses to start"
    )
    trusted_proxies: tuple[str, ...] = _setting(
        (), "addresses or networks (10.0.0.0/8) of reverse proxies whose X-Forwarded-For names the visitor; empty: none",
        factory=tuple,
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
    timeout_s: float = _setting(10.0, "deadline of one SMTP step, whole: connecting and login, or one message", kind="duration")

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
class WebhookSettings:
    """A generic JSON webhook for alert notifications ([alerts.webhook]): Alertmanager's webhook body
    with a Slack-compatible ``text``, grouped and timed as e-mail is (docs/alerts.md, Webhooks)."""

    url: str = _setting("", "URL the notifications are POSTed to; empty = off")
    http: HttpSettings = _setting(None, "HTTP settings (headers, bearer token from the environment, CA file, TLS, proxy)",
                                  factory=HttpSettings)
    group_by: tuple[str, ...] = _setting(("target",), "alerts with equal values of these go in one notification (rule, target, model, severity)",
                                         factory=lambda: ("target",))
    group_wait_s: float = _setting(30.0, "wait this long after a group's first alert fires, to gather the others", kind="duration")
    group_interval_s: float = _setting(300.0, "at most one notification per group this often for changes", kind="duration")
    repeat_interval_s: float = _setting(4 * 3600.0, "send alerts still firing again this often", kind="duration")
    send_resolved: bool = _setting(True, "send a notification when a group's alerts resolve")
    retry_initial_s: float = _setting(10.0, "first retry of a failed POST (5xx, timeout, refused) after this long; doubles each time", kind="duration")
    retry_max_s: float = _setting(300.0, "longest wait between two retries", kind="duration")
    give_up_after_s: float = _setting(86400.0, "a notification still not accepted this long after it was queued is marked failed", kind="duration")
    timeout_s: float = _setting(10.0, "deadline of one POST, whole: connecting to the last byte of the answer", kind="duration")

    @property
    def enabled(self) -> bool:
        return bool(self.url)


@dataclass(frozen=True)
class AlertmanagerSettings(WebhookSettings):
    """An Alertmanager ([alerts.alertmanager]): alerts POSTed to its v2 API as Prometheus sends them,
    one alert a group, repeated every minute so that it keeps them (its own routes then group them)."""

    url: str = _setting("", "Alertmanager's base URL, e.g. http://alertmanager:9093; empty = off")
    group_by: tuple[str, ...] = _setting(("rule", "target", "model"), "alerts with equal values of these go in one POST",
                                         factory=lambda: ("rule", "target", "model"))
    group_wait_s: float = _setting(0.0, "wait this long after an alert fires before the first POST", kind="duration")
    group_interval_s: float = _setting(0.0, "at most one POST per group this often for changes", kind="duration")
    repeat_interval_s: float = _setting(60.0, "firing alerts are POSTed again this often (Prometheus' resend delay); "
                                              "each says it ends 4 times this later unless repeated", kind="duration")


@dataclass(frozen=True)
class AlertsSettings:
    """The alert evaluator (docs/alerts.md), e-mail delivery and the digest."""

    evaluate_every_s: float = _setting(15.0, "how often the collector evaluates the alert rules", kind="duration")
    lease_s: float = _setting(60.0, "the evaluator's lease: another process takes over this long after a holder dies", kind="duration")
    rules: tuple[RuleSettings, ...] = _setting(None, "rule changes and additions ([[alerts.rules]])", factory=tuple)
    mute_windows: tuple[MuteWindowSettings, ...] = _setting(None, "recurring mute windows ([[alerts.mute_windows]])", factory=tuple)
    email: EmailSettings = _setting(None, "alert e-mail ([alerts.email])", factory=EmailSettings)
    digest: DigestSettings = _setting(None, "the scheduled digest ([alerts.digest])", factory=DigestSettings)
    alertmanager: AlertmanagerSettings = _setting(None, "an Alertmanager's v2 API ([alerts.alertmanager])", factory=AlertmanagerSettings)
    webhook: WebhookSettings = _setting(None, "a generic JSON webhook ([alerts.webhook])", factory=WebhookSettings)


@dataclass(frozen=True)
class QuerySettings:
    """Limits of ad-hoc SQL (``python -m app query`` and the Query page, docs/query.md)."""

    timeout_s: float = _setting(2.0, "time limit of one query (--timeout may ask for up to max_timeout_s)", kind="duration")
    max_timeout_s: float = _setting(30.0, "the most time any query may be given", kind="duration")
    row_limit: int = _setting(10000, "rows returned at most; more are cut off and reported as truncated")
    db_url: str = _setting(
        "", "PostgreSQL: the URL of a role that can read the query views and nothing else (deploy/query-role.sql); "
            "empty: db_url, whose role is refused when it can read more"
    )


@dataclass(frozen=True)
class TelemetrySettings:
    """The collector process's own ``/metrics`` (docs/deploy.md): how it runs, for a Prometheus to scrape."""

    address: str = _setting("127.0.0.1", "address the collector's /metrics binds to (0.0.0.0: every interface)")
    port: int = _setting(9494, "port of the collector's /metrics; 0 = off")


@dataclass(frozen=True)
class Settings:
    """Everything the product reads; built once by ``app.loader.load_settings`` (on :func:`read_settings`)."""

    db_url: str = _setting(DEFAULT_DB_URL, "database URL: sqlite:///path or postgresql://user@host/db")
    hf_cache_dir: str = _setting(
        "~/.cache/huggingface/hub", "Hugging Face hub cache searched for a served model's config.json (by its name)"
    )
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
    telemetry: TelemetrySettings = _setting(None, "the collector's own /metrics", factory=TelemetrySettings)
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


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    # once per class: evaluating the annotations again for each of 20,000 [[targets]] took 5 s
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
            seconds = parse_duration(value)
        except DurationError as exc:
            raise ConfigError(f"{key}: {exc}") from None
        if seconds > MAX_DURATION_S:
            raise ConfigError(f"{key}: {value!r} is out of range; a duration must be ≤ 3650d (write it like 5s, 5m or 2h)")
        return seconds
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
        if finite_problem(value):
            raise ConfigError(f"{key}: {finite_problem(value)}; write a number such as 1.5")
        return float(value)
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tp in (str, bool) and isinstance(value, tp):
        return value
    raise ConfigError(f"{key}: expected {tp.__name__}, got {value!r}")


def is_reference(settings: Settings, target_name: str) -> bool:
    """Whether ``target_name`` is the demo's simulator of the reference deployment: the target `run`
    configures (``reference``), or, in a process given no target at all (the demo's dashboard, `status`
    on its database), the stored target of that name."""
    for target in settings.targets:
        if target.name == target_name:
            return target.reference
    demo = not any(t.vllm_url for t in settings.targets) and not settings.prometheus and settings.simulator
    return demo and target_name == DEMO_TARGET


# Settings no longer read: key → the one line that says what replaced it.
_MIN_EFFICIENCY = ("no longer read: it judged output tok/s against the ceiling, a bound on decode steps/s; no default "
                   "rule has an efficiency floor now (under_delivering judges tok/s against the target's own curve, "
                   "docs/alerts.md); remove it, or write a rule over mbu and {prefix}min_mbu")
REMOVED: dict[type, dict[str, str]] = {
    SweetSpotSettings: {"min_efficiency": _MIN_EFFICIENCY},
    SweetSpotOverrides: {"min_efficiency": _MIN_EFFICIENCY},
}

# Other spellings of a table's keys, as users of other tools type them: alias → field.
ALIASES: dict[type, dict[str, str]] = {
    RuleSettings: {"for": "for_s", "keep_firing_for": "keep_firing_for_s"},  # Prometheus' names
}


def _build(cls: type, data: Mapping[str, Any], prefix: str = "") -> Any:
    hints = _hints(cls)
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
        if target.engine not in ("auto", "vllm", "sglang"):
            raise ConfigError(f"{key}.engine: {target.engine!r} is not one of auto, vllm, sglang")
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
    _check_addresses("alerts.email.from_address", (email.from_address,), "SWEETSPOT_ALERT_FROM")
    _check_addresses("alerts.email.to", email.to, "SWEETSPOT_ALERT_TO")
    for i, route in enumerate(email.routes):
        _check_addresses(f"alerts.email.routes[{i}].to", route.to, "")
    if email.enabled and not email.from_address:
        raise ConfigError("alerts.email.from_address: required once alerts.email.host is set (or SWEETSPOT_ALERT_FROM)")
    if email.enabled and not email.to and not email.routes:
        raise ConfigError("alerts.email.to: no recipient; name one (or SWEETSPOT_ALERT_TO, comma-separated)")

    for key, hook in (("alertmanager", alerts.alertmanager), ("webhook", alerts.webhook)):
        problem = hook.url and url_problem(hook.url)
        if problem:
            raise ConfigError(f"alerts.{key}.url: {problem}")
        unknown = [k for k in hook.group_by if k not in GROUP_BY_KEYS]
        if unknown:
            raise ConfigError(f"alerts.{key}.group_by: {unknown[0]!r} is not one of {', '.join(GROUP_BY_KEYS)}")
    try:
        parse_schedule(digest.schedule)
        zone(digest.timezone)
    except ScheduleError as exc:
        raise ConfigError(f"alerts.digest.{exc.key}: {exc}") from None


def _check_addresses(key: str, addresses: tuple[str, ...], variable: str) -> None:
    """An address goes into a mail header: a line break or other control character in it is refused
    here, with the setting's name, rather than failing every e-mail later."""
    for address in addresses:
        if escaped(address) != address:
            where = f" (or {variable}, comma-separated)" if variable else ""
            raise ConfigError(f"{key}: '{visible(address)}' holds a line break or control character; "
                              f"give one e-mail address per entry{where}")  # fmt: skip


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
    hooks = ((f"alerts.{key}.http", getattr(settings.alerts, key).http) for key in ("alertmanager", "webhook"))
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
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path} (check --config or {ENV_CONFIG})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:  # 50,000 nested arrays or tables: deeper than the parser follows
        raise ConfigError(f"{path}: nested too deeply to be read (tables or arrays inside each other by the thousand); "
                          "a settings file nests a few levels") from None


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


def query_db_url(settings: Settings) -> str:
    """The URL ad-hoc queries connect with: ``query.db_url`` (PostgreSQL's reading role), else ``db_url``."""
    return settings.query.db_url or settings.db_url


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
    """The Alertmanager's and the webhook's bearer tokens, read from the variables they name."""
    hooks = {key: getattr(alerts, key) for key in ("alertmanager", "webhook")}
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
