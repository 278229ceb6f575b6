"""The settings' schema: typed, frozen dataclasses, one a table of the file.

Their fields (with the ``help`` metadata) are the single table of settings: they drive the loader
(core/settings/loader.py), the validation messages, ``python -m app config --describe`` and the test that
fails when a setting is missing from docs/configuration.md. Also here: what the rest of the product
asks of loaded settings (a target's effective thresholds, when it reads stale, the query URL).
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from core.engines import AUTO
from core.engines import NAMES as ENGINE_NAMES
from core.errors import SweetspotError
from core.settings.environment import ENV_SMTP_PASSWORD, ENV_UI_PASSWORD

DEFAULT_DB_URL = "sqlite:///data/sweetspot.db"
# Prometheus' sample_limit idea: a page with more model × engine label sets than this keeps its first
# ones. A vLLM server has one series per engine and served model (a data-parallel 64 counts 64).
DEFAULT_MAX_SERIES = 1000
DEMO_TARGET = "demo"  # the target `run` watches the built-in simulator as


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
    wait_metric: str = _setting(
        "", "the gateway's own wait histogram (seconds) on the Prometheus page at url; a|b takes the first exposed; "
        "empty: the preset's, none: Little's law only"
    )


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


@dataclass(frozen=True)
class TargetSettings:
    """One vLLM deployment to watch."""

    name: str = _setting("default", "short unique name shown in the UI and used by --target")
    vllm_url: str = _setting("", "vLLM Prometheus endpoint, e.g. http://host:8000/metrics")
    engine: str = _setting(AUTO, f"{', '.join(ENGINE_NAMES)}, or auto (the page's names decide); vllm_url is then that "
                                 "engine's /metrics")
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


@dataclass(frozen=True)
class LearnerSettings:
    """How a target's sweet spot is learned from its own stored traffic (core/knee.py, docs/alerts.md).

    The defaults are production's: a week of minute rollups, and no answer under 120 busy minutes at
    4 levels of 3 minutes each. A finer ``step_s`` reads the per-scrape rows (kept ``raw_retention_s``):
    the real-engine test learns from a few minutes of a sweep's traffic that way.
    """

    step_s: float = _setting(60.0, "the grain the stored history is read at: one sample per step (60 s: the minute "
                             "rollups; under 60 s: the per-scrape rows, kept raw_retention_s)", kind="duration")
    span_s: float = _setting(7 * 86400.0, "how far back the learner reads the stored history", kind="duration")
    min_busy_s: float = _setting(7200.0, "busy time (at least half a request running) it needs before it says anything",
                                 kind="duration")
    min_levels: int = _setting(4, "concurrency levels (whole running requests) it needs, each of min_level_s at least")
    min_level_s: float = _setting(180.0, "time at one concurrency level for the level to count", kind="duration")
    restart_settle_s: float = _setting(120.0, "left out after an engine restart or configuration change (its warm-up)",
                                       kind="duration")


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




@dataclass(frozen=True)
class DeliverySettings:
    """How a channel's notifications are grouped, timed and retried: the same keys in [alerts.email],
    [alerts.webhook] and [alerts.alertmanager] (Alertmanager's grouping and timing, docs/alerts.md)."""

    group_by: tuple[str, ...] = _setting(("target",), "alerts with equal values of these go in one notification "
                                         "(rule, target, model, severity)", factory=lambda: ("target",))
    group_wait_s: float = _setting(30.0, "wait this long after a group's first alert fires, to gather the others", kind="duration")
    group_interval_s: float = _setting(300.0, "at most one notification per group this often for changes "
                                       "(new or resolved alerts)", kind="duration")
    repeat_interval_s: float = _setting(4 * 3600.0, "notify of alerts still firing again this often", kind="duration")
    send_resolved: bool = _setting(True, "send a notification when a group's alerts resolve")
    retry_initial_s: float = _setting(10.0, "first retry of a failed delivery (an e-mail refused, a POST's 5xx, timeout "
                                      "or refused connection) after this long; doubles each time", kind="duration")
    retry_max_s: float = _setting(300.0, "longest wait between two retries", kind="duration")
    give_up_after_s: float = _setting(86400.0, "a notification still not accepted this long after it was queued is marked "
                                      "failed", kind="duration")
    timeout_s: float = _setting(10.0, "deadline of one delivery step, whole: an SMTP connection and login or one message; "
                                "a POST from connecting to the last byte of the answer", kind="duration")


@dataclass(frozen=True)
class EmailSettings(DeliverySettings):
    """Alert e-mail ([alerts.email]); delivery modelled on Alertmanager (docs/alerts.md, E-mail)."""

    host: str = _setting("", "SMTP server; empty = e-mail off (alerts are still evaluated and stored)")
    port: int = _setting(0, "SMTP port; 0 = by tls: 25 (none), 587 (starttls), 465 (ssl)")
    user: str = _setting("", "user to log in as; empty = no login (password: SWEETSPOT_SMTP_PASSWORD)")
    tls: str = _setting("starttls", "none, starttls (upgrade after connecting) or ssl (TLS from the start)")
    from_address: str = _setting("", "From address of alert e-mails")
    to: tuple[str, ...] = _setting(None, "recipients when no route matches", factory=tuple)
    dashboard_url: str = _setting("", "the dashboard's address (http://host:8501), for the link in each e-mail")
    routes: tuple[EmailRoute, ...] = _setting(None, "recipients per severity and per target ([[alerts.email.routes]])", factory=tuple)

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
class WebhookSettings(DeliverySettings):
    """A generic JSON webhook for alert notifications ([alerts.webhook]): Alertmanager's webhook body
    with a Slack-compatible ``text``, grouped and timed as e-mail is (docs/alerts.md, Webhooks)."""

    url: str = _setting("", "URL the notifications are POSTed to; empty = off")
    http: HttpSettings = _setting(None, "HTTP settings (headers, bearer token from the environment, CA file, TLS, proxy)",
                                  factory=HttpSettings)

    @property
    def enabled(self) -> bool:
        return bool(self.url)


@dataclass(frozen=True)
class AlertmanagerSettings(WebhookSettings):
    """An Alertmanager ([alerts.alertmanager]): alerts POSTed to its v2 API as Prometheus sends them,
    one alert a group, repeated every minute so that it keeps them (its own routes then group them).
    Its own defaults for the grouping keys; the rest of the delivery settings are a webhook's."""

    url: str = _setting("", "Alertmanager's base URL, e.g. http://alertmanager:9093 (alerts are POSTed to its "
                            "/api/v2/alerts); empty = off")
    group_by: tuple[str, ...] = _setting(("rule", "target", "model"), "alerts with equal values of these go in one POST "
                                         "(Alertmanager groups them again by its own routes)",
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
    chat: WebhookSettings = _setting(None, "a Slack or Mattermost incoming webhook ([alerts.chat])", factory=WebhookSettings)


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
    retired_shown_s: float = _setting(
        86400.0, "how long a target no longer configured stays listed (Fleet, digest, status --all) as "
        "\"not configured any more\" before it leaves the lists (its history is kept)", kind="duration"
    )
    simulator: bool = _setting(True, "start the built-in simulator when no target has a vllm_url")
    targets: tuple[TargetSettings, ...] = _setting(None, "the deployments to watch ([[targets]])", factory=tuple)
    prometheus: tuple[PrometheusSettings, ...] = _setting(
        None, "Prometheus servers to read targets from ([[prometheus]])", factory=tuple
    )
    sweetspot: SweetSpotSettings = _setting(None, "sweet-spot thresholds", factory=SweetSpotSettings)
    learner: LearnerSettings = _setting(None, "how each target's sweet spot is learned from its traffic",
                                        factory=LearnerSettings)
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


def is_reference(settings: Settings, target_name: str) -> bool:
    """Whether ``target_name`` is the demo's simulator of the reference deployment: the target `run`
    configures (``reference``), or, in a process given no target at all (the demo's dashboard, `status`
    on its database), the stored target of that name."""
    for target in settings.targets:
        if target.name == target_name:
            return target.reference
    demo = not any(t.vllm_url for t in settings.targets) and not settings.prometheus and settings.simulator
    return demo and target_name == DEMO_TARGET


def query_db_url(settings: Settings) -> str:
    """The URL ad-hoc queries connect with: ``query.db_url`` (PostgreSQL's reading role), else ``db_url``."""
    return settings.query.db_url or settings.db_url


def is_settings_table(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    # once per class: evaluating the annotations again for each of 20,000 [[targets]] took 5 s
    return typing.get_type_hints(cls)


def iter_settings(cls: type = Settings, prefix: str = "") -> Iterator[tuple[str, str, Any, str]]:
    """Yield ``(key, type name, default, help)`` for every leaf setting, e.g. ``targets[].gpu.url``."""
    hints = field_types(cls)
    # a channel's own settings first, then the delivery settings every channel shares
    shared = {f.name for f in dataclasses.fields(DeliverySettings)} if issubclass(cls, DeliverySettings) else set()
    for f in sorted(dataclasses.fields(cls), key=lambda f: f.name in shared):
        if f.metadata.get("kind") == INTERNAL:
            continue
        tp = hints[f.name]
        key = f"{prefix}{f.name}"
        inner = sequence_item(tp)
        if is_settings_table(tp):
            yield from iter_settings(tp, key + ".")
        elif inner is not None and is_settings_table(inner):
            yield from iter_settings(inner, key + "[].")
        else:
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[operator]
            yield key, f.metadata.get("kind") or type_name(tp), default, f.metadata.get("help", "")


def type_name(tp: Any) -> str:
    return str(tp).replace("typing.", "") if not isinstance(tp, type) else tp.__name__


def sequence_item(tp: Any) -> Any:
    if typing.get_origin(tp) is tuple:
        args = typing.get_args(tp)
        return args[0] if args else None
    return None
