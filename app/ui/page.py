"""What every page starts from: the settings (loaded once), and the context main.py hands each page.

main.py loads the settings, opens the reader, draws the sidebar (app/ui/url_params.py) and
publishes a :class:`Context`; a page takes it with :func:`context` and reads through its methods,
which go through the cached reads (app/ui/reads.py) and the guard (app/ui/guard.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st

from app.alerts.rules import Rule, rule_set
from app.fleet import FleetRow
from app.loader import load_settings
from app.sweet_spot import SweetSpot
from app.ui import charts, reads
from app.ui.guard import guard
from app.ui.time_range import Span, View, data_step, level_of
from core.settings import (
    ENV_CONFIG,
    ENV_DB_URL,
    ENV_EMAIL,
    ENV_UI_PASSWORD,
    Settings,
    SweetSpotSettings,
    effective_sweetspot,
)
from db.queries import Reader
from db.results import SeriesPoint, TargetInfo, WindowFigures
from db.verdicts import StoredVerdict


@st.cache_resource(show_spinner=False)
def _settings(config_path: str | None, db_url: str | None, password: str | None,
              email: tuple[tuple[str, str], ...] = ()) -> Settings:  # fmt: skip
    environ = {k: v for k, v in ((ENV_CONFIG, config_path), (ENV_DB_URL, db_url), (ENV_UI_PASSWORD, password)) if v}
    return load_settings(None, {**environ, **dict(email)})


def load(environ: Mapping[str, str]) -> Settings:
    """The settings, loaded once per distinct environment (``python -m app ui`` passes them this way).
    The alert e-mail variables count too: the Alerts page says whether e-mail is on."""
    email = tuple((k, environ[k]) for k in sorted(ENV_EMAIL) if environ.get(k))
    return _settings(environ.get(ENV_CONFIG), environ.get(ENV_DB_URL), environ.get(ENV_UI_PASSWORD), email)


def with_stored(own: SweetSpotSettings, stored: Mapping[str, float | None]) -> SweetSpotSettings:
    """``own`` with the stored thresholds on top (each converted to its field's type)."""
    given = {f.name: _typed(f.name, stored[f.name]) for f in dataclasses.fields(own) if f.name in stored}
    return dataclasses.replace(own, **given) if given else own


def _typed(name: str, value: float | None) -> Any:
    """A stored threshold as its field's type: the sweet spot a whole number of requests, or None (unknown)."""
    if value is None:
        return None
    return int(value) if name == "concurrency" else float(value)


@dataclass(frozen=True)
class Context:
    """What main.py hands every page: settings, the reader and the view."""

    settings: Settings
    reader: Reader  # the query facade: a misspelled read fails the type check
    targets: list[TargetInfo]
    view: View

    def target_info(self) -> TargetInfo | None:
        return next((t for t in self.targets if t.name == self.view.target), None)

    @property
    def sweetspot(self) -> SweetSpotSettings:
        """The viewed target's thresholds as the alert evaluator judged its newest stored minute by
        (the collector's settings, which may be newer than this process's): a banner must not
        disagree with the Alerts page. Before any verdict stored them: ``[sweetspot]`` with the
        target's own keys on top, from this process's settings."""
        own = effective_sweetspot(self.settings, self.view.target or "")
        stored = guard("the verdicts' thresholds", reads.judged_by, self.settings.db_url, self.view.target or "")
        return with_stored(own, stored)

    def sweet_spot(self, now: float) -> SweetSpot:
        """The viewed target's sweet spot and own curve, with their sources (guarded, cached 10 minutes)."""
        return guard("the sweet spot", reads.sweet_spot, self.settings, self.view.target or "", reads.floor(now, 600.0))

    def thresholds(self, now: float) -> SweetSpotSettings:
        """:attr:`sweetspot` with the target's own sweet spot as its concurrency (None: unknown)."""
        return self.sweet_spot(now).thresholds(self.sweetspot)

    @property
    def alert_rules(self) -> tuple[Rule, ...]:
        """The viewed target's rule set: the defaults changed by ``[[alerts.rules]]``."""
        return rule_set(self.settings, self.view.target or "")

    def window(self, end: float) -> WindowFigures:
        """The chosen target/model's figures over the verdict window ending at ``end`` (guarded, cached)."""
        v, url, slo = self.view, self.settings.db_url, self.sweetspot.ttft_p95_slo_s
        return guard("the window figures", reads.window, url, v.target, reads.floor(end, 5.0), v.window_s, v.model, None, slo)

    def target_window(self, target: str, end: float) -> WindowFigures:
        """Any stored target's figures (all models) over the verdict window ending at ``end``."""
        url, window_s = self.settings.db_url, self.view.window_s
        return guard("the window figures", reads.window, url, target, reads.floor(end, 5.0), window_s, None, None)

    def verdict_window(self, span: Span) -> WindowFigures:
        """The figures the verdict and tiles judge: the verdict window up to now on a live range; a
        past range's whole span, from the level (raw rows or rollups) its charts read, since raw rows
        older than their retention are gone."""
        return self.window(span.at) if span.live else self.range_window(span)

    def range_window(self, span: Span) -> WindowFigures:
        """The figures over the whole span, from the level (raw rows or rollups) its charts read."""
        v, url = self.view, self.settings.db_url
        args = (url, v.target, span.end, span.end - span.start, v.model, level_of(span.step_s), self.sweetspot.ttft_p95_slo_s)
        return guard("the window figures", reads.window, *args)

    def fleet(self, now: float) -> list[FleetRow]:
        """Every target's row of the Fleet page over the verdict window up to ``now`` (guarded, cached)."""
        return guard("the fleet", reads.fleet_rows, self.settings, reads.floor(now, 5.0), self.view.window_s)

    def verdicts(self, span: Span) -> list[StoredVerdict]:
        """The viewed target's stored minute verdicts over the span (guarded, cached): the Overview's
        history, as the alert evaluator judged it (db/verdicts.py)."""
        v, url = self.view, self.settings.db_url
        return guard("the verdicts", reads.verdicts, url, v.target, span.start, reads.floor(span.at, 60.0) + 60.0)

    def series_drawn(self, span: Span, fields: Sequence[str], minimum: float = 0.0) -> tuple[list[SeriesPoint], charts.Frame]:
        """The series at the span's step (at least ``minimum``), or coarser where the rounds are further
        apart than that step (:func:`data_step`), with the frame it is drawn on."""
        step = max(span.step_s, minimum)
        points = self.series(span.start, reads.floor(span.end, step), step, fields)
        coarser = data_step(points, step, fields)
        if coarser != step:
            step = coarser
            points = self.series(span.start, reads.floor(span.end, step), step, fields)
        return points, charts.Frame(span.start, span.end, step)

    def series(self, start: float, end: float, step_s: float, fields: Sequence[str] | None = None) -> list[SeriesPoint]:
        """The chosen target/model's series (guarded, cached); ``fields`` limits what the facade computes."""
        v, url = self.view, self.settings.db_url
        return guard("the series", reads.series, url, v.target, start, end, step_s, v.model, tuple(fields or ()))


def publish(context: Context) -> None:
    st.session_state["_context"] = context
    st.session_state["_settings"] = context.settings


def context() -> Context:
    """The context main.py published for this run."""
    context: Context = st.session_state["_context"]
    return context
