"""Pure parts of the query feature: output formats, the page's helpers, canned parameters, the
Overview's CSV of its charts' data."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json

import pytest

from app import query_output
from app.ui import query_page, widgets
from core.errors import QueryError
from db import canned
from db.query_runner import Result
from db.results import SeriesPoint

RESULT = Result(
    ("time", "target", "tokens_per_s", "n", "blob"),
    [("2026-12-01T20:15:00Z", "demo", 101.5, decimal.Decimal("3"), b"\x01\x02"),
     ("2026-12-01T20:16:00Z", "edge", float("nan"), None, None)],
    truncated=True, elapsed_s=0.01, row_limit=2,
)  # fmt: skip


def test_csv_has_a_header_and_empty_cells_for_no_data():
    rows = list(csv.reader(io.StringIO(query_output.to_csv(RESULT))))
    assert rows == [["time", "target", "tokens_per_s", "n", "blob"],
                    ["2026-12-01T20:15:00Z", "demo", "101.5", "3.0", "0102"],
                    ["2026-12-01T20:16:00Z", "edge", "", "", ""]]  # fmt: skip


def test_json_is_a_list_of_row_objects_with_null_for_no_data():
    data = json.loads(query_output.to_json(RESULT))
    assert data[1] == {"time": "2026-12-01T20:16:00Z", "target": "edge", "tokens_per_s": None, "n": None, "blob": None}


def test_table_ends_with_the_truncation_notice():
    text = query_output.to_table(RESULT)
    assert text.splitlines()[0].split() == list(RESULT.columns)
    assert "truncated" in text.splitlines()[-1] and "--limit" in text


def test_datetimes_state_their_zone():
    aware = dt.datetime(2026, 12, 1, 20, 15, tzinfo=dt.UTC)
    assert query_output.plain(aware) == "2026-12-01T20:15:00+00:00"


def test_time_and_numeric_columns_drive_the_chart():
    assert query_output.time_columns(RESULT) == ["time"]
    assert query_page.numeric_columns(RESULT) == ["tokens_per_s", "n"]
    spec = query_page.chart(RESULT, "time", "tokens_per_s", "target").to_dict()  # validates the spec
    # the 24-hour clock of every other chart, not Vega's default "03 PM" on this page only
    from app.ui import charts

    assert spec["encoding"]["x"]["axis"]["format"] == charts.TIME_FORMAT and "%H" in charts.TIME_FORMAT
    assert spec["encoding"]["x"]["type"] == "temporal" and spec["encoding"]["color"]["field"] == "target"
    # ticks in significant digits, trailing zeros trimmed: "0", never "0.000000"
    assert spec["encoding"]["y"]["axis"]["format"] == ",.6~r"


def test_page_finds_the_parameters_of_a_query():
    assert query_page.params_in("SELECT * FROM minutes WHERE ts >= :start AND x::text = :target AND ts < :start") == ["start", "target"]


def test_canned_parameters():
    now = 1_800_000_000.0
    c = canned.get("hours_outside_sweet_spot")
    bound = canned.bind(c, {"start": "2026-11-01", "end": "12h"}, now)
    assert bound == {"target": "", "start": 1_793_491_200, "end": int(now) - 43200}
    with pytest.raises(QueryError, match="no parameter 'bogus'"):
        canned.bind(c, {"bogus": "1"}, now)
    with pytest.raises(QueryError, match="not a time"):
        canned.bind(c, {"start": "yesterday"}, now)
    with pytest.raises(QueryError, match="no canned query"):
        canned.get("nope")


def test_overview_chart_data_as_csv():
    point = SeriesPoint(ts=1_800_000_000.0, ttft_p50_s=None, ttft_p95_s=2.5, ttft_p99_s=None, itl_p95_s=None,
                        e2e_p95_s=None, tokens_per_s=100.0, prompt_tokens_per_s=None, preemptions=0.0,
                        requests_per_s=None, running_avg=None, running_max=None, waiting_max=None,
                        queue_depth_max=None, kv_cache_usage_max=None, up_ratio=1.0)  # fmt: skip
    rows = list(csv.reader(io.StringIO(widgets.series_csv([point], ["tokens_per_s", "ttft_p95_s", "queue_depth_max"]))))
    assert rows == [["time", "ts", "tokens_per_s", "ttft_p95_s", "queue_depth_max"],
                    ["2027-01-15T08:00:00Z", "1800000000", "100.0", "2.5", ""]]  # fmt: skip


HOSTILE = Result(
    ("=HYPERLINK(\"http://x\")", "n"),
    [("=cmd|' /C calc'!A0", -3), ("@SUM(A1:A9)", 2.5), ("+1+1", None), ("-2+3", 0), ("\tx", 1), ("\rx", 1),
     ("plain", 1), ("llama\r\n\x1b[2J", 1)],
    truncated=False, elapsed_s=0.01, row_limit=100,
)  # fmt: skip


def test_csv_cells_that_would_be_formulas_start_with_a_quote():
    rows = list(csv.reader(io.StringIO(query_output.to_csv(HOSTILE), newline="")))
    assert rows[0] == ["'=HYPERLINK(\"http://x\")", "n"]
    assert [r[0] for r in rows[1:7]] == ["'=cmd|' /C calc'!A0", "'@SUM(A1:A9)", "'+1+1", "'-2+3", "'\tx", "'\rx"]
    assert rows[7][0] == "plain" and [r[1] for r in rows[1:3]] == ["-3", "2.5"]  # numbers stay numbers


def test_the_table_shows_control_characters_as_escapes():
    text = query_output.to_table(HOSTILE)
    assert "\x1b" not in text and "\r" not in text and "llama\\r\\n\\x1b[2J" in text


DAYS = Result(
    ("target", "day", "requests"),
    [(t, f"2026-12-0{d}T00:00:00Z", n) for t in ("demo", "edge") for d, n in ((4, 9000), (5, 9100), (6, 1200))],
    truncated=False, elapsed_s=0.01, row_limit=100,
)  # fmt: skip


def test_a_day_still_in_progress_is_marked_and_not_joined_to_the_line():
    noon = dt.datetime(2026, 12, 6, 12, tzinfo=dt.UTC).timestamp()
    assert query_page.in_progress(DAYS, "day", noon) == "2026-12-06T00:00:00Z"
    spec = query_page.chart(DAYS, "day", "requests", "target", now=noon).to_dict()
    assert spec["encoding"]["detail"]["field"] == query_page.PERIOD
    (rows,) = spec["datasets"].values()  # InlineData: the rows sit in the top-level datasets
    assert [r[query_page.PERIOD] for r in rows if r["day"].startswith("2026-12-06")] == [query_page.IN_PROGRESS] * 2
    assert {r[query_page.PERIOD] for r in rows if not r["day"].startswith("2026-12-06")} == {query_page.COMPLETE}
    # the next day: every period is over, nothing is marked
    tomorrow = dt.datetime(2026, 12, 7, 0, 0, 1, tzinfo=dt.UTC).timestamp()
    assert query_page.in_progress(DAYS, "day", tomorrow) is None
    assert "detail" not in query_page.chart(DAYS, "day", "requests", "target", now=tomorrow).to_dict()["encoding"]


def test_rows_of_several_targets_are_coloured_by_target_by_default():
    assert query_page.default_colour(DAYS, "day", "requests") == "target"
    assert query_page.default_colour(RESULT, "time", "tokens_per_s") == "target"
    one = Result(("day", "target", "n"), [("2026-12-05T00:00:00Z", "demo", 1)], truncated=False, elapsed_s=0.0, row_limit=9)
    assert query_page.default_colour(one, "day", "n") is None
