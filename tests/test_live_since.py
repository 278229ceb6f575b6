"""The Overview's live banner reads since when each alert holds through the query facade
(``Reader.live_since``), not through a side door to the storage engine."""

from __future__ import annotations

from app.alerts.model import FIRING, PENDING
from app.ui import alert_views
from db import queries
from db.engine import open_engine
from db.queries import Reader
from tests.notify_helpers import T0, state, write_states


def test_live_since_by_rule_firing_first_pending_else_and_nothing_for_other_states(tmp_path):
    engine = open_engine(f"sqlite:///{tmp_path}/a.db")
    try:
        write_states(
            engine,
            state("kv_cache_critical", since=T0 - 600),
            state("ttft_p95", status=PENDING, since=T0 - 120, firing_since=None),
            state("preemptions", status="resolved", since=T0 - 60, firing_since=None),
            state("concurrency", target="other", since=T0 - 30),
        )
        reader = Reader(engine=engine)
        assert reader.live_since("prod-70b") == {"kv_cache_critical": float(T0 - 600), "ttft_p95": float(T0 - 120)}
        assert alert_views.banner_since(reader, "prod-70b") == reader.live_since("prod-70b")
        assert alert_views.banner_since(reader, None) == {}
        assert reader.live_since("nobody") == {}
    finally:
        engine.dispose()


def test_the_facade_names_the_evaluators_live_states():
    assert queries.LIVE_STATES == (FIRING, PENDING)
