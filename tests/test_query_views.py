"""The query views, their functions and the canned queries give the facade's numbers, on SQLite and
PostgreSQL, over a history the simulator wrote through the real ingestion path."""

from __future__ import annotations

import datetime as dt
import math
import re
import tempfile
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from app import reference_doc
from app.alerts.evaluator import Evaluator
from core import mbu
from core.settings import AlertsSettings, RuleSettings, Settings, SweetSpotSettings
from db import canned, query_views
from db.engine import open_engine
from db.queries import Reader
from db.query_runner import Limits, run_query
from db.verdicts import CANNOT_TELL, IN_SWEET_SPOT, NO_DATA, NOT_STORED, OUTSIDE
from tests import query_db
from tests.conftest import _new_postgres_db
from tests.ui_db import target_settings

NOW = 1_796_382_017.0  # a weekday at 11:00 UTC + 17 s, near the daily peak: the same history at every run
LIMITS = Limits(timeout_s=20, row_limit=100_000, max_timeout_s=30)
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request):
    if request.param == "sqlite":
        target = f"sqlite:///{tempfile.mkdtemp(prefix='sweetspot-query-')}/q.db"
    else:
        target = _new_postgres_db(request.getfixturevalue("postgres_server"))
    return query_db.fill(target, NOW)


def rows(url, sql, **params):
    result = run_query(url, sql, LIMITS, params, any_role=True)
    return [dict(zip(result.columns, r, strict=True)) for r in result.rows]


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)


def minute_mark(url):
    engine = open_engine(url, migrate=False)
    with engine.connect() as conn:
        marks = dict(conn.execute(text("SELECT step, until_ts FROM rollup_marks")).all())
    engine.dispose()
    return int(marks[60]), int(marks[3600])


FIGURES = ("tokens_per_s", "prompt_tokens_per_s", "requests_per_s", "preemptions", "running_avg", "running_max",
           "waiting_max", "queue_depth_max", "kv_cache_usage_max", "ttft_p50_s", "ttft_p95_s", "ttft_p99_s",
           "itl_p95_s", "e2e_p95_s", "steps_per_s",
           *(f.name for f in query_views.table_figures()))  # and every rate and quantile the figures table adds  # fmt: skip


@pytest.mark.parametrize("view,step", [("minutes", 60), ("hours", 3600)])
def test_minutes_and_hours_equal_the_facade(url, view, step):
    reader = Reader(url)
    end = minute_mark(url)[0 if step == 60 else 1]
    got = rows(url, f"SELECT * FROM {view} WHERE target = 'demo' ORDER BY ts")
    assert got, view
    start = got[0]["ts"]
    points = {p.ts: p for p in reader.series("demo", start, end, step, level=step)}
    for row in got:
        point = points[float(row["ts"])]
        for name in FIGURES:
            assert close(row[name], getattr(point, name)), (view, row["time"], name, row[name], getattr(point, name))
        # MBU is the model's bytes (the simulator's byte counters), the facade's per step too; the
        # demo's GPUs read DCGM's DRAM active: DRAM bandwidth beside it, never MBU
        assert point.mbu is not None and row["mbu_source"] in (mbu.ENGINE, mbu.MODELLED)
        assert close(row["mbu_pct"], 100 * point.mbu), (view, row["time"], row["mbu_pct"], point.mbu)
        assert row["dram_bw_source"] == mbu.DRAM_DCGM and close(row["dram_bw_pct"], 100 * point.dram_bw_util)
        assert close(row["overhead_ratio"], point.dram_bw_util / point.mbu)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:00Z", got[0]["time"])
    assert close(got[-1]["ceiling_steps_per_s"], 180.0)
    assert close(got[-1]["ceiling_share"], got[-1]["tokens_per_s"] / 180.0)


def test_gpu_minutes_equal_the_facade(url):
    reader = Reader(url)
    end = minute_mark(url)[0]
    got = rows(url, "SELECT * FROM gpu_minutes WHERE target = 'demo' ORDER BY ts, gpu_uuid")
    start = got[0]["ts"]
    points = {(p.ts, p.uuid): p for p in reader.gpu_series("demo", start, end, 60)}
    assert len(got) == len(points)
    for row in got:
        p = points[(float(row["ts"]), row["gpu_uuid"])]
        assert close(row["memory_used_gib"], p.memory_used_bytes / 2**30)
        assert close(row["dram_bw_gbps"], p.dram_bw_gbps)
        assert close(row["power_w"], p.power_w)


def test_a_day_quantile_from_sql_equals_the_facade(url):
    """A P95 over a day is the quantile of the day's requests, not an average of minute P95s."""
    reader = Reader(url)
    mark = minute_mark(url)[0]
    days = rows(url, canned.get("ttft_per_day").sql, target="demo", start=0, end=mark)
    assert days
    for day in days:
        lo = int(time.mktime(time.strptime(day["day"], "%Y-%m-%dT%H:%M:%SZ"))) - time.timezone
        (point,) = reader.series("demo", lo, min(lo + 86400, mark), 86400, level=60)
        for q in ("ttft_p50_s", "ttft_p95_s", "ttft_p99_s"):
            assert close(day[q], getattr(point, q)), (day, point)
    minute_avg = rows(url, "SELECT AVG(ttft_p95_s) AS a FROM minutes WHERE target = 'demo'")[0]["a"]
    assert not close(minute_avg, days[-1]["ttft_p95_s"])  # the shortcut the function exists to avoid


def test_worst_hours_equal_the_facade(url):
    reader = Reader(url)
    hour_mark = minute_mark(url)[1]
    got = rows(url, canned.get("worst_ttft_hours").sql, target="demo", start=0, end=hour_mark, limit=50)
    assert got
    lo = rows(url, "SELECT MIN(ts) AS t FROM hours WHERE target = 'demo'")[0]["t"]
    facade = [p.ttft_p95_s for p in reader.series("demo", lo, hour_mark, 3600, level=60) if p.ttft_p95_s is not None]
    assert [r["ttft_p95_s"] for r in got] == pytest.approx(sorted(facade, reverse=True))


def test_stored_ttft_p95_is_the_buckets_quantile(url):
    """model_rollups.ttft_p95_s (written by the rollup) equals histogram_quantile over the row's buckets."""
    for r in rows(url, "SELECT ttft_p95_s, bucket_quantile(0.95, ttft_bounds, ttft_buckets) AS q FROM minutes"):
        assert close(r["ttft_p95_s"], r["q"])


def test_tokens_by_concurrency_equal_the_facade(url):
    reader = Reader(url)
    mark = minute_mark(url)[0]
    got = rows(url, canned.get("tokens_by_concurrency").sql, target="demo", start=0, end=mark)
    first = rows(url, "SELECT MIN(ts) AS t FROM minutes WHERE target = 'demo'")[0]["t"]
    groups: dict[int, list[float]] = {}
    for p in reader.series("demo", first, mark, 60, level=60):
        if p.running_avg is not None:
            groups.setdefault(math.floor(p.running_avg + 0.5), []).append(p.tokens_per_s)
    assert {r["concurrency"]: r["minutes"] for r in got} == {c: len(v) for c, v in groups.items()}
    for r in got:
        assert r["tokens_per_s_avg"] == pytest.approx(sum(groups[r["concurrency"]]) / len(groups[r["concurrency"]]))




def _middle(points, name: str) -> float:
    values = sorted(v for p in points if (v := getattr(p, name)) is not None)
    return values[len(values) // 2]


def _integer_split(points, name: str) -> int:
    """The whole number that splits the minutes' values most evenly (values above it against the rest)."""
    values = [v for p in points if (v := getattr(p, name)) is not None]
    candidates = range(math.floor(min(values)), math.ceil(max(values)) + 1)
    return min(candidates, key=lambda k: abs(sum(v > k for v in values) - len(values) / 2))


# vLLM's TTFT bucket bounds around the simulated P95s: an SLO at a bound lets the buckets prove a
# minute within or outside it (one inside a bucket reads "cannot tell", core/histogram_slo.py).
TTFT_BOUNDS = (0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0)


def _bound_split(points, name: str) -> float:
    """The bucket bound that splits the minutes' values most evenly (values above it against the rest)."""
    values = [v for p in points if (v := getattr(p, name)) is not None]
    return min(TTFT_BOUNDS, key=lambda b: abs(sum(v > b for v in values) - len(values) / 2))


# Thresholds taken from the history itself (its median minute), so that each splits the minutes
# whatever the simulated load at the time of day the test runs.
THRESHOLDS = {
    "defaults": lambda pts: SweetSpotSettings(),
    "tight-ttft": lambda pts: SweetSpotSettings(ttft_p95_slo_s=_middle(pts, "ttft_p95_s")),
    "tight-concurrency": lambda pts: SweetSpotSettings(concurrency=_integer_split(pts, "running_avg")),
    "tight-kv": lambda pts: SweetSpotSettings(kv_warning=_middle(pts, "kv_cache_usage_max")),
    "mixed": lambda pts: SweetSpotSettings(ttft_p95_slo_s=_bound_split(pts, "ttft_p95_s"), concurrency=_integer_split(pts, "running_avg"),
                                           kv_warning=_middle(pts, "kv_cache_usage_max"), min_mbu=0.99),
}  # fmt: skip


@pytest.fixture(scope="module")
def judged(url):
    """The history judged minute by minute by the alert evaluator, with thresholds that split it."""
    reader, mark = Reader(url), minute_mark(url)[0]
    first = rows(url, "SELECT MIN(ts) AS t FROM minutes WHERE target = 'demo'")[0]["t"]
    points = [p for p in reader.series("demo", first, mark, 60, level=60) if p.up_ratio]
    # no curve of its own here: under_delivering off, so that every other rule is judged (else "cannot tell")
    settings = Settings(db_url=url, sweetspot=THRESHOLDS["mixed"](points),
                        targets=(target_settings("demo"), target_settings("edge")),
                        alerts=AlertsSettings(rules=(RuleSettings(name="under_delivering", enabled=False),)))  # fmt: skip
    engine = open_engine(url, migrate=False)
    evaluator = Evaluator(engine, settings)
    for ts in range(int(first) + 600, mark, 60):  # the first ten minutes stay unjudged: "no verdict stored"
        evaluator.evaluate_once(ts + 30)
    engine.dispose()
    return first, mark


def test_each_minutes_verdict_is_the_stored_one(url, judged):
    """The views judge nothing: a minute's in_sweet_spot and verdict are the evaluator's stored verdict."""
    first, mark = judged
    stored = {(r["target"], r["ts"]): r for r in rows(url, "SELECT * FROM verdict_history")}
    seen = sorted({r["state"] for r in stored.values()})
    assert set(seen) >= {IN_SWEET_SPOT, OUTSIDE, NO_DATA}, ("thresholds that split the minutes", seen)
    states = {IN_SWEET_SPOT: 1, OUTSIDE: 0, NO_DATA: None, CANNOT_TELL: None}
    got = rows(url, "SELECT target, ts, in_sweet_spot, verdict, rules_broken FROM minutes")
    assert got
    for r in got:
        v = stored.get((r["target"], r["ts"]))
        if v is None:
            assert (r["in_sweet_spot"], r["verdict"], r["rules_broken"]) == (None, NOT_STORED, None), r
        else:
            assert (r["in_sweet_spot"], r["verdict"], r["rules_broken"]) == (states[v["state"]], v["state"], v["rules_broken"]), r
    assert any(r["ts"] < first + 600 and r["verdict"] == NOT_STORED for r in got)
    for r in rows(url, "SELECT target, ts, in_sweet_spot, verdict FROM hours"):
        minutes = [v["state"] for (t, ts), v in stored.items() if t == r["target"] and r["ts"] <= ts < r["ts"] + 3600]
        expected = (OUTSIDE if OUTSIDE in minutes else CANNOT_TELL if CANNOT_TELL in minutes
                    else IN_SWEET_SPOT if IN_SWEET_SPOT in minutes else NO_DATA if minutes else NOT_STORED)  # fmt: skip
        assert (r["verdict"], r["in_sweet_spot"]) == (expected, states.get(expected)), r


def test_views_match_their_catalogue(url):
    for view in query_views.VIEWS:
        if view.needs_table:
            continue
        result = run_query(url, f"SELECT * FROM {view.name} LIMIT 1", LIMITS, any_role=True)
        assert result.columns == tuple(c.name for c in view.columns), view.name


def test_every_canned_query_runs(url):
    for c in canned.CANNED:
        result = run_query(url, c.sql, LIMITS, canned.bind(c, {}, NOW), any_role=True)
        assert result.columns, c.name


def test_docs_reference_is_generated_from_the_views():
    # the views' reference is docs/reference.md's section, generated (tests/test_reference_doc.py)
    section = reference_doc.render().split("## Query views", 1)[1]
    assert query_views.reference_markdown().strip() in section
    doc = (ROOT / "docs" / "query.md").read_text()
    assert "reference.md#query-views" in doc
    for c in canned.CANNED:
        assert f"`{c.name}`" in doc, c.name


def test_migration_fills_the_ttft_p95_of_older_rollups(tmp_path):
    """A database rolled up before 0008 gets model_rollups.ttft_p95_s as the rollup computes it."""
    url = query_db.fill(f"sqlite:///{tmp_path}/old.db", NOW, hours=1.0)
    engine = open_engine(url, migrate=False)
    with engine.begin() as conn:  # back to the schema as 0005 left it
        query_views.drop_views(conn)
        conn.execute(text("DROP TABLE sweetspot_thresholds"))
        conn.execute(text("DROP TABLE saved_queries"))
        conn.execute(text("ALTER TABLE model_rollups DROP COLUMN ttft_p95_s"))
        conn.execute(text("DELETE FROM sweetspot_migrations WHERE name = '0008_query_views'"))
    engine.dispose()
    open_engine(url).dispose()  # migrates
    got = rows(url, "SELECT ttft_p95_s, bucket_quantile(0.95, ttft_bounds, ttft_buckets) AS q FROM minutes")
    assert got and all(close(r["ttft_p95_s"], r["q"]) for r in got)
    assert any(r["q"] is not None for r in got)
    assert rows(url, "SELECT target FROM target_info WHERE ttft_p95_slo_s = 3.0")  # the seeded defaults


def _minute_verdicts(url) -> dict[tuple[str, int], int | None]:
    """Each target's minutes judged from the view's rows: outside when any model broke a rule."""
    merged: dict[tuple[str, int], int | None] = {}
    for r in rows(url, "SELECT target, ts, in_sweet_spot FROM minutes"):
        key, ok = (r["target"], int(r["ts"])), r["in_sweet_spot"]
        old = merged.get(key)
        merged[key] = ok if old is None else (old if ok is None else min(old, ok))
    return merged


def test_outside_hours_and_spells_add_up_from_the_minutes(url, judged):
    verdicts = _minute_verdicts(url)
    assert 0 in verdicts.values() and 1 in verdicts.values(), "thresholds that split the minutes"
    days: dict[tuple[str, int], list[int | None]] = {}
    for (target, ts), ok in verdicts.items():
        days.setdefault((target, ts // 86400 * 86400), []).append(ok)
    got = rows(url, canned.get("hours_outside_sweet_spot").sql, target="", start=0, end=NOW + 60)
    assert len(got) == len(days)
    for r in got:
        oks = days[(r["target"], _unix(r["day"]))]
        assert close(r["hours_outside"], oks.count(0) / 60) and close(r["hours_inside"], oks.count(1) / 60)
        assert close(r["hours_unjudged"], oks.count(None) / 60), r
    outside = sorted(key for key, ok in verdicts.items() if ok == 0)
    spells: dict[str, list[list[int]]] = {}
    for target, ts in outside:
        runs = spells.setdefault(target, [])
        if runs and runs[-1][1] == ts:
            runs[-1][1] = ts + 60
        else:
            runs.append([ts, ts + 60])
    weeks: dict[tuple[str, int], list[int]] = {}
    for target, runs in spells.items():
        for a, b in runs:  # a spell counts in the week (from Monday 00:00 UTC) it began in
            weeks.setdefault((target, (a - canned.WEEK_OFFSET) // (7 * 86400)), []).append(b - a)
    got = rows(url, canned.get("outside_spells_per_week").sql, target="", start=0, end=NOW + 60)
    assert len(got) == len(weeks)
    for r in got:
        lengths = weeks[(r["target"], (_unix(r["week"]) - canned.WEEK_OFFSET) // (7 * 86400))]
        assert r["spells"] == len(lengths), r
        assert close(r["hours_total"], sum(lengths) / 3600) and close(r["minutes_longest"], max(lengths) / 60)


def _unix(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp())


@pytest.mark.parametrize("view,step", [("minutes", 60), ("hours", 3600)])
def test_ttft_slo_attainment_equals_the_facade(url, view, step):
    """The share within the stored SLO (the seeded 3 s: between the 2.5 and 5 s bounds), per period,
    from bucket_share in SQL (PL/pgSQL on PostgreSQL) and attainment_matrix in the facade."""
    reader = Reader(url)
    end = minute_mark(url)[0 if step == 60 else 1]
    got = rows(url, f"SELECT ts, ttft_slo_attainment_pct AS pct FROM {view} WHERE target = 'demo' ORDER BY ts")
    points = {p.ts: p for p in reader.series("demo", got[0]["ts"], end, step, level=step)}
    shares = [(row["pct"], points[float(row["ts"])].ttft_slo_attainment) for row in got if float(row["ts"]) in points]
    assert any(a is not None and 0 < a < 100 for a, _ in shares), shares  # some periods partly within
    for pct, share in shares:
        assert close(pct, None if share is None else 100 * share), (view, pct, share)
    exact = rows(url, "SELECT bucket_share(2.5, ttft_bounds, ttft_buckets) AS s,"
                      " bucket_share(3.0, ttft_bounds, ttft_buckets) AS t FROM minutes WHERE ttft_buckets IS NOT NULL")  # fmt: skip
    assert all(r["s"] <= r["t"] for r in exact)  # a higher SLO never has a smaller share


@pytest.mark.parametrize(("le", "share"), [(2.5, 0.6), (3.0, 0.66), (0.25, 0.05), (10.0, 0.9), (None, None)])
def test_bucket_share_by_hand(url, le, share):
    """bucket_share on one row of hand-made increases (10, 20, 30, 30, 10 over 0.5, 1, 2.5, 5, +Inf),
    the same on SQLite (attainment_matrix) and PostgreSQL (PL/pgSQL): tests/test_quantiles.py's cases."""
    from db.histo import bounds_key, encode

    params = {"le": le, "bounds": bounds_key((0.5, 1.0, 2.5, 5.0, float("inf"))), "buckets": encode((10, 20, 30, 30, 10))}
    got = rows(url, "SELECT bucket_share(:le, :bounds, :buckets) AS s", **params)[0]["s"]
    assert close(got, share), (le, got)
    assert rows(url, "SELECT bucket_share(3.0, :bounds, NULL) AS s", bounds=params["bounds"])[0]["s"] is None  # no request
