"""AppTest for every page over a fake facade (scenarios pinned); the real-database tests are in test_ui_app.py."""

from __future__ import annotations

import re
import time
from html import unescape
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from app.ui import reads
from db.results import WindowFigures
from tests.fake_reader import BrokenReader, FakeReader

MAIN = Path(__file__).resolve().parents[1] / "app" / "ui" / "main.py"
PAGES = ["views/overview.py", "views/gpus.py", "views/operating_point.py", "views/targets.py"]


@pytest.fixture
def app(tmp_path, monkeypatch):
    db = tmp_path / "sweetspot.db"
    db.touch()
    monkeypatch.setenv("SWEETSPOT_DB_URL", f"sqlite:///{db}")
    monkeypatch.delenv("SWEETSPOT_CONFIG", raising=False)
    monkeypatch.delenv("SWEETSPOT_UI_PASSWORD", raising=False)
    st.cache_resource.clear()
    st.cache_data.clear()

    def make(reader: object) -> AppTest:
        monkeypatch.setattr(reads, "reader", lambda url: reader)
        return AppTest.from_file(str(MAIN), default_timeout=30)

    return make


def texts(at: AppTest) -> str:
    parts = [e.value for e in (*at.markdown, *at.caption, *at.header, *at.subheader)]
    parts += [e.body for e in (*at.error, *at.warning, *at.success, *at.info)]
    parts += [tile_text(h.proto.body) for h in at.get("html")]
    return "\n".join(str(p) for p in parts).replace("**", "")


def tile_text(html: str) -> str:
    """A KPI tile block as text, tile by tile: "label value context" (what the st.metric tiles read as)."""
    tiles = re.findall(r'title="[^"]*"><div[^>]*>(.*?)</div><div[^>]*>(.*?)</div><div[^>]*>(.*?)</div>', html)
    return "\n".join(" ".join(unescape(part) for part in tile) for tile in tiles)


def run_page(at: AppTest, page: str) -> AppTest:
    at.run()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def test_overview_in_the_sweet_spot(app):
    at = run_page(app(FakeReader(time.time(), wave=False)), PAGES[0])
    body = texts(at)
    assert "In the sweet spot" in body
    assert "TTFT P95 · 5m 2.1 s" in body
    assert "70 %: the report's % of ceiling (tok/s ÷ steps/s bound) · at most 180 steps/s: the report's ceiling" in body
    assert "efficiency" not in body.lower()
    assert len(at.get("vega_lite_chart")) == 1


def test_overview_banner_says_why_an_under_loaded_window_is_in_the_sweet_spot(app):
    quiet = {"running_avg": 10.0, "queue_depth_max": 0.0, "waiting_max": 0.0, "mbu": 0.49}
    at = run_page(app(FakeReader(time.time(), wave=False, **quiet)), PAGES[0])
    (banner,) = at.success
    assert banner.body == ("**In the sweet spot** over the last 5m: every rule holds — under-loaded: 10 running of 16, "
                           "no queue: room for more traffic (MBU 49 % (modelled, steps/s × bytes per step)).")  # fmt: skip
    st.cache_data.clear()  # the window figures are cached by database URL: the next scenario's are new
    queued = run_page(app(FakeReader(time.time(), wave=False, **{**quiet, "queue_depth_max": 6.0})), PAGES[0])
    assert "while requests queue (gateway queue 6, vLLM waiting 0): is the gateway's limit below" in queued.success[0].body
    st.cache_data.clear()
    at_the_sweet_spot = run_page(app(FakeReader(time.time(), wave=False)), PAGES[0])
    assert at_the_sweet_spot.success[0].body.endswith("every rule holds.")  # nothing to explain


def test_overview_outside_names_each_clause(app):
    at = run_page(app(FakeReader(time.time(), ttft_p95_s=4.8, preemptions=3.0)), PAGES[0])
    (banner,) = at.error
    assert "Outside the sweet spot" in banner.body
    assert "TTFT P95 over 5m 4.8 s > 3 s" in banner.body
    assert "preemptions over 5m 3 > 0" in banner.body


def test_overview_target_down_is_no_data(app):
    at = run_page(app(FakeReader(time.time(), up=False)), PAGES[0])
    assert "No data" in at.error[0].body
    assert "connection refused" in at.error[0].body
    assert not at.success


def test_every_page_renders(app):
    reader = FakeReader(time.time())
    for page in PAGES:
        at = run_page(app(reader), page)
        assert at.header, page


def test_gpus_page_labels_time_based_busy(app):
    at = run_page(app(FakeReader(time.time())), PAGES[1])
    frame = at.table[0].value
    assert "71 % busy (time-based, not bandwidth)" in set(frame["bandwidth"])
    assert "898 GB/s (nvml-formula)" in set(frame["peak bandwidth"])


def test_operating_point_names_the_knee(app):
    at = run_page(app(FakeReader(time.time())), PAGES[2])
    assert "Knee at concurrency 16" in texts(at)


def test_targets_page_shows_health_and_provenance(app):
    at = run_page(app(FakeReader(time.time(), up=False)), PAGES[3])
    body = texts(at)
    assert "down" in body and "connection refused" in body
    assert "900 GB/s per GPU" in body


def test_url_reproduces_the_view(app):
    at = app(FakeReader(time.time()))
    at.query_params.update({"range": "7d", "window": "15m"})
    at.run()
    assert not at.exception
    assert "TTFT P95 · 15m" in texts(at)
    assert at.sidebar.radio(key="range").value == "7d"


def test_a_failing_query_is_one_line_with_the_next_step(app):
    at = run_page(app(BrokenReader(time.time())), PAGES[0])
    (error,) = at.error
    assert "database is locked" in error.body and "python -m app run" in error.body


def test_empty_database_explains_how_to_start(app):
    empty = FakeReader(time.time())
    empty.targets = lambda: []  # type: ignore[method-assign]
    at = app(empty).run()
    assert not at.exception
    assert "python -m app run" in "\n".join(c.value for c in at.code)


def test_custom_range_from_the_url_is_a_fixed_picture(app):
    at = app(FakeReader(time.time()))
    at.query_params.update({"range": "custom", "start": "2026-11-29T10:00", "end": "2026-11-29T16:00"})
    at.run()
    assert not at.exception
    assert "Charts: 2026-11-29 10:00:00 → 2026-11-29 16:00:00, one point per 5m" in texts(at)  # 72 on the Overview


def test_tiles_are_escaped_and_keep_their_help():
    from app.ui.widgets import Tile, tiles_html

    html = tiles_html([Tile('KV <usage> "max"', "98 %", "warn 90 % & crit 98 %", 'help with "quotes"')])
    assert tile_text(html) == 'KV <usage> "max" 98 % warn 90 % & crit 98 %'
    assert "<usage>" not in html and 'title="help with &quot;quotes&quot;"' in html


def test_few_choices_are_radio_buttons_many_a_drop_down(app):
    from app.ui.url_params import RADIO_MAX

    at = app(FakeReader(time.time()))
    at.run()
    assert at.sidebar.radio(key="target").options == ["demo"]
    many = [f"t{i}" for i in range(RADIO_MAX + 1)]
    at = AppTest.from_string(
        "from app.ui import url_params\n"
        f"url_params._choice('Target', {many!r}, key='target')\n"
    ).run()
    assert at.sidebar.selectbox(key="target").options == many


def test_overview_judges_by_the_targets_own_thresholds_and_rules(app, tmp_path, monkeypatch):
    """The banner uses the rule set status, the evaluator and the e-mail use: a target's own SLO and
    the file's rule changes (it used the global defaults and disagreed with the Alerts page)."""
    config = tmp_path / "sweetspot.toml"
    config.write_text(
        'db_url = "sqlite:///' + str(tmp_path / "sweetspot.db") + '"\n'
        '[[targets]]\nname = "demo"\nvllm_url = "http://127.0.0.1:8000/metrics"\n'
        '[targets.sweetspot]\nttft_p95_slo_s = "5s"\n'
        '[[alerts.rules]]\nname = "preemptions"\nenabled = false\n'
    )
    monkeypatch.setenv("SWEETSPOT_CONFIG", str(config))
    at = run_page(app(FakeReader(time.time(), wave=False, ttft_p95_s=4.8, preemptions=3.0)), PAGES[0])
    body = texts(at)
    assert "In the sweet spot" in body and not at.error, body
    assert "TTFT P95 over 5m" not in body and "preemptions over 5m" not in body


def test_an_error_quoting_a_name_is_plain_text(app):
    class Quoting(BrokenReader):
        def window(self, *args: object, **kwargs: object) -> WindowFigures:
            raise RuntimeError("no such model: ![x](http://127.0.0.1:9/x.png)")

    at = run_page(app(Quoting(time.time())), PAGES[0])
    (error,) = at.error
    # a link's shape: a code span (GFM links URLs whatever the escapes), where nothing is markup
    assert "`no such model: ![x](http://127.0.0.1:9/x.png)`" in error.body


def test_the_bare_url_opens_the_healthiest_target_with_data_and_says_which(app):
    import dataclasses

    from tests.fake_reader import target_info

    class TwoTargets(FakeReader):
        def targets(self):  # "a-stopped" sorts first but was last scraped an hour ago and is down
            stopped = dataclasses.replace(target_info("a-stopped", up=False, error="connection refused", now=self.now),
                                          last_scrape_at=self.now - 3600)
            return [stopped, target_info("demo", now=self.now)]

    at = run_page(app(TwoTargets(time.time())), PAGES[0])
    assert at.sidebar.radio(key="target").value == "demo"
    assert re.search(r"Showing demo: up, the most recent data of the 2 targets \(last scrape \d+s ago\)", texts(at))
    at = app(TwoTargets(time.time()))
    at.query_params["target"] = "a-stopped"  # a link names its target: no choice made, nothing to say
    at.run()
    assert at.sidebar.radio(key="target").value == "a-stopped" and "Showing" not in texts(at)
