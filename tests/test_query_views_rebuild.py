"""A view whose SQL changed in the code is rebuilt at the writer's start (the standing step of
db/migrations.py compares each view's stored SQL with the code's), with no numbered migration; an
unchanged one is left alone."""

from __future__ import annotations

from db import query_views
from db.engine import open_engine
from db.migrations import upgrade
from db.query_runner import Limits, run_query


def test_a_changed_view_is_rebuilt_and_an_unchanged_one_is_not(db_url, monkeypatch):
    engine = open_engine(db_url)  # migrates: the views made from the code
    try:
        with engine.connect() as conn:
            assert query_views.stale_views(conn) == []
            assert set(query_views.views_present(conn)) >= {"minutes", "hours", "target_info"}
        assert upgrade(engine).standing == []  # nothing changed: nothing rebuilt
        changed = query_views.SQL["target_info"].replace("AS models,", "AS models, 42 AS answer,", 1)
        assert changed != query_views.SQL["target_info"]
        monkeypatch.setitem(query_views.SQL, "target_info", changed)
        with engine.connect() as conn:
            assert query_views.stale_views(conn) == ["target_info"]
        made = upgrade(engine).standing
        assert "view target_info" in made and "view minutes" in made  # dropped together, made again
        with engine.connect() as conn:
            assert query_views.stale_views(conn) == []
        # the new column is there, read as a user's query reads it (the test's PostgreSQL role is a
        # superuser, which the query-role rule refuses: any_role lifts that rule, for tests only)
        limits = Limits(timeout_s=20, max_timeout_s=30)
        assert run_query(db_url, "SELECT answer FROM target_info", limits, any_role=True).columns == ("answer",)
        assert upgrade(engine).standing == []
    finally:
        engine.dispose()
