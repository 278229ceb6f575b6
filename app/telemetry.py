"""The collector process's own ``/metrics`` (docs/deploy.md#the-collectors-own-metrics): how it runs,
and the figures it derives, for a Prometheus to scrape and a Grafana to chart.

One registry of our own (never prometheus_client's global one, which would mix in whatever else the
process imports). Events are observed as they happen (a job's run, a scrape, an evaluation); what the
components already count or hold (rows written, notifications, the last evaluation's figures, the
outbox) is read at scrape time by :class:`_Snapshot`, so nothing is copied on the hot path. The
derived figures come from the alert evaluator's last run: a standby collector (without the lease)
exposes none of them. A figure without data is left out (a gap in Prometheus), never 0.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from collectors.records import ScrapeRound
from core.settings import TelemetrySettings
from db.figures import FIGURES, Figure

if TYPE_CHECKING:
    from app.alerts.evaluator import Derived

log = logging.getLogger(__name__)

# The derived figures per target: (metric name, the rules' name it shows, help). A Grafana panel or
# a recording rule names these; tests/test_telemetry.py checks the dashboard against this table.
# "The rules' window" is the alert rules' own window (5 minutes unless a rule sets window_s); the
# help texts say it in words. The figures come from db/figures.py FIGURES (its help, its row's
# ``metric`` or ``sweetspot_<name>`` for a gauge rules may use), so a new gauge figure is exported
# from its row alone; the rest are the target's thresholds and the rules' own ``queued``.
_W = "over the alert rules' window (5 min by default)"
_NOT_FIGURES: tuple[tuple[str, str, str], ...] = (
    ("sweetspot_ttft_p95_slo_seconds", "ttft_p95_slo_s", "the target's time-to-first-token objective: a 95th percentile above it leaves the sweet spot"),
    ("sweetspot_concurrency_sweet_spot", "concurrency", "the target's sweet-spot concurrency: running requests above this leave the sweet spot"),
    ("sweetspot_queued_requests", "queued", f"requests waiting, in the engine or the gateway in front of it, maximum {_W}"),
)


def metric_name(figure: Figure) -> str:
    """The figure's gauge on /metrics ("": not exported): its row's ``metric``, else
    ``sweetspot_<name>`` for a gauge that rules may use (a row with ``help``)."""
    if figure.metric:
        return figure.metric
    return f"sweetspot_{figure.name}" if figure.compute in ("gauge_avg", "gauge_max") and figure.help else ""


GAUGES: tuple[tuple[str, str, str], ...] = (
    *((metric_name(f), f.name, f"{f.help} ({_W})") for f in FIGURES if metric_name(f)),
    *_NOT_FIGURES,
)
# The ones a dashboard names (deploy/grafana/sweetspot.json charts each; tests/test_grafana_dashboard.py)
NAMED = frozenset({f.metric for f in FIGURES if f.metric} | {name for name, _, _ in _NOT_FIGURES})
VERDICTS = ("in_sweet_spot", "outside", "cannot_tell", "no_data")
SEVERITIES = ("warning", "critical")
SOURCES = ("vllm", "gateway", "gpu")
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Telemetry:
    """The registry and its metrics; the collector service calls the ``observe_*`` methods."""

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.runs = Counter("sweetspot_job_runs", "scheduled job runs (job_name=collect: collection rounds; not job, which Prometheus sets)", ["job_name"], registry=r)
        self.missed_runs = Counter("sweetspot_job_missed", "scheduled runs that did not happen (the previous one still running, or too late)",
                              ["job_name"], registry=r)  # fmt: skip
        self.lateness = Histogram("sweetspot_job_lateness_seconds", "how late a job run started after its scheduled time",
                                  ["job_name"], buckets=_SECONDS, registry=r)  # fmt: skip
        self.duration = Histogram("sweetspot_job_duration_seconds", "how long a job run took", ["job_name"], buckets=_SECONDS, registry=r)
        self.scrapes = Counter("sweetspot_scrapes", "source scrapes", ["target", "source"], registry=r)
        self.scrape_failures = Counter("sweetspot_scrape_failures", "source scrapes that failed", ["target", "source"], registry=r)
        self.scrape_duration = Histogram("sweetspot_scrape_duration_seconds", "a source's scrape, from its GET sent to its answer parsed",
                                         ["target", "source"], buckets=_SECONDS, registry=r)  # fmt: skip
        self.evaluation = Histogram("sweetspot_evaluation_duration_seconds", "one evaluation of every alert rule of every target",
                                    buckets=_SECONDS, registry=r)  # fmt: skip
        self.now = now

    # -- events ---------------------------------------------------------------------------------------
    def ran(self, job: str, lateness_s: float, duration_s: float) -> None:
        self.runs.labels(job).inc()
        self.lateness.labels(job).observe(lateness_s)
        self.duration.labels(job).observe(duration_s)

    def missed(self, job: str) -> None:
        self.missed_runs.labels(job).inc()

    def observe_round(self, round_: ScrapeRound) -> None:
        for source, status in zip(SOURCES, (round_.vllm_status, round_.gateway_status, round_.gpu_status), strict=True):
            if status is None:
                continue
            self.scrapes.labels(round_.target, source).inc()
            self.scrape_duration.labels(round_.target, source).observe(status.duration_s)
            if not status.ok:
                self.scrape_failures.labels(round_.target, source).inc()

    def observe_evaluation(self, duration_s: float) -> None:
        self.evaluation.observe(duration_s)

    def read_at_scrape(self, rows: Mapping[str, int], delivered: Mapping[tuple[str, str], int],
                       derived: Callable[[], Mapping[str, Derived]], outbox: Callable[[], list[tuple[str, int, float | None]]]) -> None:  # fmt: skip
        """What the components hold, read at each scrape: rows written per table, notifications
        (channel, sent|failed) → count, the evaluator's last figures, and the outbox
        ``(channel, queued, oldest created_at)``."""
        self.registry.register(_Snapshot(rows, delivered, derived, outbox, self.now))

    # -- the server -----------------------------------------------------------------------------------
    def serve(self, settings: TelemetrySettings) -> Callable[[], None]:
        """Serve ``/metrics`` where the settings say; returns the function that stops it. A port that
        cannot be bound (another collector on this host) costs the metrics, never the collector."""
        if not settings.port:
            return lambda: None
        try:
            server, thread = start_http_server(settings.port, settings.address, registry=self.registry)
        except OSError as exc:
            log.warning("cannot serve /metrics on %s:%d (%s); set telemetry.port (0 = off)", settings.address, settings.port,
                        exc.strerror or exc)  # fmt: skip
            return lambda: None
        log.info("serving the collector's /metrics on http://%s:%d/metrics", settings.address, server.server_port)

        def stop() -> None:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)

        return stop


class _Snapshot(Collector):
    """Reads, at each scrape, what the components count and hold."""

    def __init__(self, rows: Mapping[str, int], delivered: Mapping[tuple[str, str], int],
                 derived: Callable[[], Mapping[str, Derived]], outbox: Callable[[], list[tuple[str, int, float | None]]],
                 now: Callable[[], float]) -> None:  # fmt: skip
        self.rows, self.delivered, self.derived, self.outbox, self.now = rows, delivered, derived, outbox, now

    def collect(self) -> Iterator[Metric]:
        rows = CounterMetricFamily("sweetspot_rows_written", "rows committed to the database, by table", labels=["table"])
        for table, count in self.rows.items():
            rows.add_metric([table], count)
        yield rows
        for outcome, text in (("sent", "notifications accepted by their receiver"), ("failed", "failed delivery attempts")):
            family = CounterMetricFamily(f"sweetspot_notifications_{outcome}", text, labels=["channel"])
            for (channel, kind), count in sorted(self.delivered.items()):
                if kind == outcome:
                    family.add_metric([channel], count)
            yield family
        yield from self._outbox()
        yield from self._derived()

    def _outbox(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily("sweetspot_outbox_queued", "notifications queued and not yet sent", labels=["channel"])
        age = GaugeMetricFamily("sweetspot_outbox_oldest_age_seconds", "age of the oldest queued notification", labels=["channel"])
        try:
            queued = self.outbox()
        except Exception as exc:  # an unreadable database costs these two, not the scrape
            log.warning("/metrics: cannot read the outbox: %s", exc)
            queued = []
        for channel, count, oldest in queued:
            depth.add_metric([channel], count)
            if oldest is not None:
                age.add_metric([channel], max(0.0, self.now() - oldest))
        yield depth
        yield age

    def _derived(self) -> Iterator[Metric]:
        derived = self.derived()
        verdict = GaugeMetricFamily("sweetspot_verdict", "1 for the target's verdict over the alert rules' window (in_sweet_spot, outside, cannot_tell, no_data), 0 for the others",
                                    labels=["target", "verdict"])  # fmt: skip
        firing = GaugeMetricFamily("sweetspot_alerts_firing", "alerts firing, by severity", labels=["target", "severity"])
        figures = {name: GaugeMetricFamily(name, text, labels=["target"]) for name, _, text in GAUGES}
        for target, d in sorted(derived.items()):
            for v in VERDICTS:
                verdict.add_metric([target, v], float(d.verdict == v))
            for severity in SEVERITIES:
                firing.add_metric([target, severity], d.firing.get(severity, 0))
            for name, key, _ in GAUGES:
                value = _number(d.names.get(key))
                if value is not None:
                    figures[name].add_metric([target], value)
        yield verdict
        yield firing
        yield from figures.values()


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
