"""The fleet at a glance: states worst first, per-model aggregates, `status --all`, the Fleet page."""

from __future__ import annotations

import dataclasses
import json
import time
import types

import pytest

from app.cli import main
from app.fleet import DOWN, by_model, fleet, table, target_state
from app.sweet_spot import SweetSpot
from app.ui.widgets import SPARK_W
from app.verdict import CANNOT_TELL, IN_SWEET_SPOT, NO_DATA, OUTSIDE
from core.settings import SweetSpotSettings
from db.engine import open_engine
from db.queries import Reader
from db.rollup import rollup
from db.writer import Writer
from tests import ui_db
from tests.builders import window
from tests.test_ui_app import open_app

RULES = SweetSpotSettings()
SPOT = SweetSpot(16, "sweep", "the knee of a sweep", ((8.0, 85.0), (16.0, 126.0), (32.0, 145.0)), "sweep")


def test_target_state_down_outside_no_data_and_good():
    assert target_state(window(up=False, last_error="connection refused"), RULES).state == DOWN
    assert target_state(window(up=False, last_error="connection refused"), RULES).reasons == ("connection refused",)
    outside = target_state(window(ttft_p95_s=4.8), RULES)
    assert outside.state == OUTSIDE and any("TTFT P95" in r for r in outside.reasons)
    assert target_state(window(scrapes=0), RULES).state == NO_DATA
    assert target_state(window(), RULES) == target_state(window(), RULES)
    assert target_state(window(), RULES, spot=SPOT).state == IN_SWEET_SPOT
    # without a sweet spot and a curve of its own it cannot tell, and says why (never "in the sweet spot")
    unsure = target_state(window(), RULES)
    assert unsure.state == CANNOT_TELL and any(r.startswith("concurrency: no sweet spot yet") for r in unsure.reasons)


# The history ends at a fixed instant, not the wall's: the simulator's daily pattern has storms and
# bursts at times of its own, so a history ending "now" made a healthy target overloaded in some
# afternoons (ranked ahead of the never-scraped one). Tuesday 2026-12-01 07:00 UTC: the demand rising,
# no incident for any seed in the hour before.
QUIET_MORNING = 1_796_083_200.0 + 7 * 3600


@dataclasses.dataclass(frozen=True)
class Fleet:
    url: str
    now: float  # where the history ends: the tests judge their windows there, whenever they run


@pytest.fixture(scope="module")
def fleet_history(tmp_path_factory) -> Fleet:
    """Five targets: two healthy, one overloaded (a different seed and model name), one down, one never scraped."""
    now = QUIET_MORNING
    url = f"sqlite:///{tmp_path_factory.mktemp('fleet')}/f.db"
    engine = open_engine(url)
    writer = Writer(engine)
    for name in ("a-good", "b-good", "c-down", "d-never", "e-good"):
        writer.register_target(ui_db.target_settings(name))
    for i, name in enumerate(("a-good", "b-good", "e-good")):
        writer.write_rounds(ui_db.simulated_rounds(name, now - 1800, now, 5.0, seed=i))
    writer.write_rounds(ui_db.simulated_rounds("c-down", now - 1800, now, 5.0, seed=5, down_after=now - 300))
    rollup(engine, now)
    writer.close()
    engine.dispose()
    return Fleet(url, now)


@pytest.fixture
def fleet_db(fleet_history, monkeypatch) -> str:
    """The fleet's database, with the clock of ``status`` and of the pages at the end of its history."""
    from app.commands import status
    from app.ui import time_range

    monkeypatch.setattr(status, "time", types.SimpleNamespace(
        time=lambda: fleet_history.now, strftime=time.strftime, localtime=time.localtime))  # fmt: skip
    monkeypatch.setattr(time_range, "now", lambda: fleet_history.now)
    return fleet_history.url


def test_fleet_rows_worst_first_with_an_hour_of_sparkline(fleet_history):
    rows = fleet(Reader(fleet_history.url), RULES, fleet_history.now, 300.0)
    assert [r.name for r in rows][:2] == ["c-down", "d-never"]
    assert rows[0].state.state == DOWN and "connection refused" in rows[0].state.reasons[0]
    assert rows[1].state.state == NO_DATA
    good = rows[-1]
    assert len(good.sparkline) == 60 and any(v for v in good.sparkline)
    (model,) = [m for m in by_model(rows) if m.model != "(no model name)"]
    assert model.targets == 4 and model.outside >= 1  # c-down serves it too
    assert model.tokens_per_s == pytest.approx(sum(r.figures.tokens_per_s or 0 for r in rows))
    text = table(rows)
    assert text.splitlines()[1].startswith("c-down") and "down" in text.splitlines()[1]


def test_status_all_json_is_a_list_of_status_objects_with_state_and_reasons(fleet_db, capsys):
    assert main(["status", "--all", "--json", "--db", fleet_db]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["target"] for d in data][:2] == ["c-down", "d-never"]
    assert main(["status", "--json", "--db", fleet_db, "--target", "a-good"]) == 0
    single = json.loads(capsys.readouterr().out)
    entry = next(d for d in data if d["target"] == "a-good")
    assert set(single) <= set(entry) and {"state", "reasons"} <= set(entry)
    assert data[0]["state"] == "down" and data[0]["reasons"]
    assert main(["status", "--all", "--db", fleet_db]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("target") and "model" in out


_open = open_app  # the real-database AppTest helper of test_ui_app


def test_the_fleet_is_the_landing_page_beyond_three_targets(monkeypatch, fleet_db):
    at = _open(monkeypatch, fleet_db)
    assert not at.exception, at.exception
    assert at.header[0].value == "Fleet · 5 targets"
    frame = at.dataframe[0].value
    assert list(frame["target"])[:2] == ["c-down", "d-never"]
    assert list(frame["overview"])[0] == "./overview?target=c-down"
    assert "down" == frame["state"].iloc[0]
    # c-down: 25 minutes of data inside the hour, then down: drawn where it has data, a gap elsewhere
    down = spark_points(frame["last hour tok/s"].iloc[0])
    # nothing in the hour's empty first half: minute 30 on (the page's clock is the history's end)
    assert 24 <= len(down) <= 26 and min(x for _, x, _ in down) > 2 + 28 * (SPARK_W - 4) / 59
    assert len(spark_points(frame["last hour tok/s"].iloc[-1])) >= 25
    figures = at.dataframe[1].value  # bandwidth, cache and queues: the same targets in the same order
    assert list(figures["target"]) == list(frame["target"])
    per_model = at.dataframe[2].value
    assert "llama" in " ".join(per_model["model"]) or len(per_model) >= 1


def test_a_fleet_link_opens_that_targets_overview(monkeypatch, fleet_db):
    from urllib.parse import parse_qs, urlsplit

    link = next(u for u in _open(monkeypatch, fleet_db).dataframe[0].value["overview"] if u.endswith("b-good"))
    parts = urlsplit(link)
    assert parts.path == "./overview"
    at = _open(monkeypatch, fleet_db, **{k: v[0] for k, v in parse_qs(parts.query).items()})
    at.switch_page("views/overview.py").run()
    assert not at.exception, at.exception
    assert at.header[0].value.startswith("Overview · b-good")


def test_three_targets_or_fewer_land_on_the_overview(monkeypatch, tmp_path):
    # a database of its own: ui_db.shared() is filled at its first use, and the UI tests expect it fresh
    at = _open(monkeypatch, ui_db.fill(tmp_path / "two.db", time.time(), hours=0.5))
    assert at.header[0].value.startswith("Overview")


def test_the_fleet_read_gives_what_window_and_series_give_per_target(db_url):
    # one read for every target, the same figures as the facade's per-target calls (SQLite and PostgreSQL)

    from app.fleet import SERIES_FIELDS

    now = time.time()
    engine = open_engine(db_url)
    writer = Writer(engine)
    for i, name in enumerate(("x", "y")):
        writer.register_target(ui_db.target_settings(name))
        writer.write_rounds(ui_db.simulated_rounds(name, now - 1500, now, 5.0, seed=i, down_after=now - 200 if i else None))
    writer.write_rounds(ui_db.simulated_rounds("x", now - 1500, now, 5.0))  # already stored: skipped
    writer.close()
    rollup(engine, now)
    engine.dispose()
    reader = Reader(db_url)
    end = now // 60 * 60
    together = reader.fleet(now, 300.0, (end - 1200, end, 60.0), SERIES_FIELDS)
    assert set(together) == {"x", "y"}
    for name, got in together.items():
        assert got.window == reader.window(name, now, 300.0)  # its GPUs too: the measured MBU
        assert got.series == reader.series_columns(name, end - 1200, end, 60.0, fields=SERIES_FIELDS)
        assert got.models == tuple(reader.models(name))


def spark_points(url: str) -> list[tuple[str, float, float]]:
    """The (pen, x, y) points of a sparkline SVG data URL: pen "M" starts a line (after a gap), "L" continues."""
    import base64
    import re

    svg = base64.b64decode(url.removeprefix("data:image/svg+xml;base64,")).decode()
    return [(m[0], float(m[1]), float(m[2])) for m in re.findall(r"([ML])([\d.]+) ([\d.]+)", svg)]


def test_a_sparkline_draws_a_missing_minute_as_a_gap_never_a_zero():
    from app.ui.widgets import SPARK_H, sparkline_svg

    points = spark_points(sparkline_svg([4.0, None, 2.0, 4.0, None, 0.0, None]))
    assert [pen for pen, _, _ in points] == ["M", "M", "L", "M"]  # three pieces: the gaps break the line
    step = points[1][1] - points[0][1]  # one x unit per minute: index 2 lies two minutes after index 0
    assert [round((x - points[0][1]) / step * 2) for _, x, _ in points] == [0, 2, 3, 5]
    assert [y for _, _, y in points].count(SPARK_H - 2) == 1  # only the real 0 sits on the floor
    assert sparkline_svg([None, None]) is None  # no data at all: an empty cell, not a flat line


def test_a_missing_figure_reads_as_a_dash_never_none(monkeypatch, fleet_db, capsys):
    at = _open(monkeypatch, fleet_db)
    frame, figures = at.dataframe[0].value, at.dataframe[1].value
    never = list(frame["target"]).index("d-never")  # never scraped: no figure at all
    cells = [str(frame[column].iloc[never]) for column in ("tok/s", "TTFT P95 (clients)", "running")]
    cells += [str(figures[column].iloc[never]) for column in ("MBU", "preemptions", "queue", "KV")]
    assert cells == ["—"] * 7
    for shown in (frame, figures):
        assert "None" not in shown.astype(str).to_string() and "nan" not in shown.astype(str).to_string()
    assert main(["status", "--all", "--db", fleet_db]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("d-never"))
    assert "None" not in line and " — " in line
