"""AppTest of every page over a real SQLite database filled through the writer (tests/ui_db.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests import ui_db
from tests.test_ui_pages import PAGES, texts

MAIN = Path(__file__).resolve().parents[1] / "app" / "ui" / "main.py"


@pytest.fixture(scope="module")
def db_url():
    return ui_db.shared()


def open_app(monkeypatch, url: str, **params: str) -> AppTest:
    monkeypatch.setenv("SWEETSPOT_DB_URL", url)
    monkeypatch.delenv("SWEETSPOT_CONFIG", raising=False)
    monkeypatch.delenv("SWEETSPOT_UI_PASSWORD", raising=False)
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(str(MAIN), default_timeout=30)
    at.query_params.update(params)
    return at.run()


def test_every_page_on_stored_history(monkeypatch, db_url):
    at = open_app(monkeypatch, db_url)
    assert not at.exception, at.exception
    assert "Overview · demo" in texts(at)
    # the range's history is the evaluator's stored verdicts (tests/ui_db.py: two evaluations)
    (history,) = [c.value for c in at.caption if c.value.startswith("Minutes of this range")]
    assert history.startswith("Minutes of this range, as the alert evaluator judged them: ") and "% not judged (no collector ran then, or backfilled)" in history
    charts = at.get("vega_lite_chart")
    assert len(charts) == 1  # the eight panels stacked in one chart on one time axis
    assert '"vconcat"' in charts[0].proto.spec
    # chart_cache.spec hands Streamlit Arrow bytes it made once; they reach the element as datasets.
    assert all(c.proto.datasets and all(d.data.data for d in c.proto.datasets) for c in charts)
    assert all('"datasets"' not in c.proto.spec for c in charts)
    for page, expected in zip(PAGES[1:], ("GPUs · demo", "Knee at concurrency 16", "edge"), strict=True):
        at.switch_page(page).run()
        assert not at.exception, (page, at.exception)
        assert expected in texts(at), page


def test_gpu_page_shows_memory_and_true_bandwidth(monkeypatch, db_url):
    at = open_app(monkeypatch, db_url)
    at.switch_page(PAGES[1]).run()
    frame = at.table[0].value
    assert len(frame) == 8
    # GiB as nvidia-smi counts: the simulated "32 GB" V100 holds 32 GiB (34.4 GB in units of 10⁹)
    assert frame["memory used / total"][0].endswith(" GiB / 32 GiB"), frame["memory used / total"][0]
    assert frame["bandwidth"][0].endswith(" GB/s (dcgm)")  # DCGM DRAM active × the configured peak
    assert frame["peak bandwidth"][0] == "900 GB/s (config)"
    assert len(at.get("vega_lite_chart")) == 4


def test_gpu_table_names_its_window_and_the_memory_line_says_total(monkeypatch, db_url):
    at = open_app(monkeypatch, db_url)
    at.switch_page(PAGES[1]).run()
    assert "Table: averages over the 1m up to the target's latest GPU reading (temperature" in texts(at)
    memory = next(c for c in at.get("vega_lite_chart") if "Memory used" in c.proto.spec)
    labels = b"".join(d.data.data for d in memory.proto.datasets)  # the line's label travels in the data
    assert b"total memory 32 GiB" in labels and b"peak 32" not in labels
    assert not at.warning  # a URL the page made itself: no notice


def test_gpu_page_names_an_unknown_gpu_and_a_past_ranges_table(monkeypatch, db_url):
    at = open_app(monkeypatch, db_url, gpu="#99", range="custom", start="2026-11-29T10:00", end="2026-11-29T16:00")
    at.switch_page(PAGES[1]).run()
    assert not at.exception, at.exception
    (notice,) = [w.body for w in at.warning]
    assert notice.startswith("URL parameter `gpu=#99` is not one of mean of all GPUs, #0, #1")
    assert notice.endswith(": showing `mean of all GPUs`.")
    assert "up to the target's latest GPU reading (the latest, whatever the range" in texts(at)


def test_down_target_is_no_data_not_all_good(monkeypatch, db_url):
    at = open_app(monkeypatch, db_url, target="edge")
    assert not at.exception
    banner = at.error[0].body
    assert "No data" in banner and "connection refused" in banner
    assert not at.success


def test_thirty_day_range_stays_under_the_overviews_points(monkeypatch, db_url):
    # the Overview's eight panels: at most OVERVIEW_POINTS (150) a series, 120 at 6 h steps over 30 days
    at = open_app(monkeypatch, db_url, range="30d")
    assert not at.exception
    assert "one point per 6h" in texts(at)


def test_empty_database_is_a_helpful_page(monkeypatch, tmp_path):
    at = open_app(monkeypatch, ui_db.empty(tmp_path / "empty.db"))
    assert not at.exception
    assert "no target has been scraped" in at.info[0].body
    assert any("python -m app run" in c.value for c in at.code)


def test_missing_database_file_is_a_helpful_page(monkeypatch, tmp_path):
    at = open_app(monkeypatch, f"sqlite:///{tmp_path / 'never.db'}")
    assert not at.exception
    assert "does not exist yet" in at.info[0].body


def test_password_gate(monkeypatch, db_url):
    monkeypatch.setenv("SWEETSPOT_DB_URL", db_url)
    monkeypatch.setenv("SWEETSPOT_UI_PASSWORD", "s3cret")
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(str(MAIN), default_timeout=30).run()
    assert not at.get("vega_lite_chart")
    at.text_input[0].input("wrong")
    at.button[0].click().run()
    assert "Wrong password (try 1)" in at.error[0].body
    at.text_input[0].input("s3cret")
    at.button[0].click().run()
    assert not at.exception
    assert len(at.get("vega_lite_chart")) == 1


ALERTS = "views/alerts.py"


def test_alerts_page_shows_the_stored_states_and_silences(monkeypatch, db_url):
    import time

    from app.alerts import store
    from app.ui.alert_views import overview_link
    from db.engine import open_reader

    at = open_app(monkeypatch, db_url)
    before = time.time()
    at.switch_page(ALERTS).run()
    after = time.time()
    assert not at.exception, at.exception
    text = texts(at)
    assert "FIRING · critical · edge · `target_down`" in text  # edge has been down for ten minutes
    assert "silenced by silence 1" in text and "edge is being rebuilt" in text
    assert "(python -m app inspect URL)" in text  # the recommendation
    # the Overview over the smallest range that holds the spell at the page's own clock (15m when the
    # page is drawn at once; a busy machine drew it 6 minutes after the database was made: 1h)
    engine = open_reader(db_url)
    down = store.load_states(engine)[("target_down", "edge", "")]
    engine.dispose()
    links = {overview_link(down, t) for t in (before, after)}
    assert any(link in text for link in links), (links, text[:500])
    assert len(at.get("arrow_vega_lite_chart") or at.get("vega_lite_chart")) == 1  # the state timeline


def test_a_silence_is_created_and_expired_from_the_page(monkeypatch, tmp_path):
    import time

    from app.alerts.silences import list_silences
    from db.engine import open_reader

    url = ui_db.fill(tmp_path / "s.db", time.time(), hours=0.25)
    at = open_app(monkeypatch, url)
    at.switch_page(ALERTS).run()
    at.selectbox[0].select("target_down")
    at.selectbox[2].select(at.selectbox[2].options[1])  # the one model the targets serve
    at.number_input[0].set_value(1.0)  # starts in an hour
    at.text_input[0].input("planned maintenance")
    at.button[-1].click().run()  # the form's submit button
    assert not at.exception, at.exception
    engine = open_reader(url)
    created = [s for s in list_silences(engine, time.time() + 3600) if s.comment == "planned maintenance"]
    model = at.selectbox[2].options[1]
    assert [s.matchers for s in created] == [{"rule": "target_down", "model": model}]
    assert created[0].starts_at == pytest.approx(time.time() + 3600, abs=60)
    assert created[0].ends_at - created[0].starts_at == 2 * 3600
    at.run()
    at.button(key=f"expire-{created[0].id}").click().run()
    assert not [s for s in list_silences(engine, time.time()) if s.comment == "planned maintenance"]
    engine.dispose()


def test_a_silence_comment_is_shown_as_typed_never_as_markup(monkeypatch, tmp_path):
    import time

    from core.text import markdown

    hostile = "[click](http://evil.example/x) **now** ![i](http://evil.example/i.png) <b>x</b>"
    url = ui_db.fill(tmp_path / "s.db", time.time(), hours=0.25)
    at = open_app(monkeypatch, url)
    at.switch_page(ALERTS).run()
    at.selectbox[0].select("target_down")
    at.text_input[0].input(hostile)
    at.button[-1].click().run()
    at.run()
    assert not at.exception, at.exception
    shown = [m.value for m in at.markdown if "evil.example" in m.value]
    assert shown and all(markdown(hostile, 1000) in v for v in shown), shown
    assert not any("](http://evil" in v.replace(markdown(hostile, 1000), "") for v in shown), shown


def test_operating_point_overlays_this_targets_sweeps_and_names_the_others(monkeypatch, tmp_path):
    import time

    from db.engine import open_engine
    from db.sweeps import store_sweep

    now = time.time()
    url = ui_db.fill(tmp_path / "sweeps.db", now, hours=0.25)
    engine = open_engine(url)
    store_sweep(engine, ui_db.demo_sweep(now - 3 * 86400, "http://127.0.0.1:8000/v1", None))  # older: matched by host and port
    store_sweep(engine, ui_db.demo_sweep(now - 2 * 86400, "http://127.0.0.1:8000/v1", "demo"))
    store_sweep(engine, ui_db.demo_sweep(now - 86400, "http://10.0.0.9:8000/v1", None))  # another server
    store_sweep(engine, ui_db.demo_sweep(now - 3600, "http://127.0.0.1:8000/v1", "edge"))  # stored as edge's
    engine.dispose()
    at = open_app(monkeypatch, url)
    at.switch_page(PAGES[2]).run()
    assert not at.exception, at.exception
    text = texts(at)
    # the one knee rule (0cdd445): the knee line names the source behind the sweet spot, for the demo
    # the reference report's (app/sweet_spot.resolve), never a sweep's; the sweeps drawn are its server's
    assert "Knee at concurrency 16 (reference: the knee of the reference report (8× V100, 70B AWQ, TP 8)): " in text, text
    assert "Diamonds: stored load sweeps of demo's server." in text, text
    assert ("2 sweep(s) of other servers not shown: http://10.0.0.9:8000/v1; target edge (http://127.0.0.1:8000/v1)."
            in text), text  # fmt: skip
    spec = at.get("vega_lite_chart")[0].proto
    drawn = b"".join(d.data.data for d in spec.datasets)
    assert b"127.0.0.1:8000" in drawn and b"10.0.0.9" not in drawn and b"\xc2\xb7 edge" not in drawn


def test_each_target_is_judged_against_its_own_sweet_spot_never_the_reports(monkeypatch, db_url):
    # the demo (no target configured): the report's knee and curve, labelled as the report's
    at = open_app(monkeypatch, db_url)
    tiles = texts(at)
    assert "sweet spot 16 (reference)" in tiles
    at.switch_page(PAGES[2]).run()
    assert "Sweet spot: 16 (reference: the knee of the reference report (8× V100, 70B AWQ, TP 8))" in texts(at)
    assert "the reference curve of the reference report (8× V100, 70B AWQ, TP 8), this demo's" in texts(at)
    # edge: an hour of traffic, no sweep, nothing configured: unknown, and neither the report's 16 nor its curve
    at = open_app(monkeypatch, db_url, target="edge")
    assert "sweet spot unknown" in texts(at) and "sweet spot 16" not in texts(at)
    at.switch_page(PAGES[2]).run()
    body = texts(at)
    assert "Sweet spot: unknown: no sweet spot yet (run a load sweep: `python -m app sweep --target NAME`; import " in body
    assert "`python -m app bench import FILE --target NAME`; set targets[].sweet_spot" in body
    assert "Grey dashes: none: no fitted curve of its own yet" in body and "this demo's" not in body
    assert "Knee at concurrency" not in body
