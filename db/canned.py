"""Canned queries: the questions nobody drew a chart for, as SQL over the views (docs/query.md).

Each runs as a user's query does (:func:`db.query_runner.run_query`, same guard and limits) with
its ``:name`` parameters bound. The same SQL runs on SQLite and PostgreSQL. Time parameters take
unix seconds, an ISO 8601 date or time (UTC unless it names a zone) or a duration back from now
(``30d``, ``12h``).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from core.errors import QueryError

DAY = 86400
WEEK_OFFSET = 4 * DAY  # unix time began on a Thursday; weeks here start on Mondays (1970-01-05)


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # time, text or int
    default: Callable[[float], Any]
    meaning: str


@dataclass(frozen=True)
class Canned:
    name: str
    question: str
    sql: str
    params: tuple[Param, ...]


TARGET = Param("target", "text", lambda now: "", "target name; empty = every target")
START_30D = Param("start", "time", lambda now: int(now) - 30 * DAY, "from (default: 30 days ago)")
START_1H = Param("start", "time", lambda now: int(now) - 3600, "from (default: an hour ago)")
END = Param("end", "time", lambda now: int(now), "until, exclusive (default: now)")
LIMIT = Param("limit", "int", lambda now: 20, "rows (default 20)")
WINDOW = "ts >= :start AND ts < :end AND (:target = '' OR target = :target)"
# The end of the hours both complete inside the window and rolled up: hourly rows are folded for
# every target at once, in order, so every hour before the newest hourly row's end is there.
HOURS_DONE = "(SELECT COALESCE(MAX(ts) + 3600, 0) AS hours_end FROM hours)"

CANNED: tuple[Canned, ...] = (
    Canned(
        "hours_outside_sweet_spot",
        "How many hours a day were we outside the sweet spot?",
        f"""SELECT target, iso_time(day) AS day,
  CAST(SUM(CASE WHEN ok = 0 THEN 1 ELSE 0 END) AS DOUBLE PRECISION) / 60 AS hours_outside,
  CAST(SUM(CASE WHEN ok = 1 THEN 1 ELSE 0 END) AS DOUBLE PRECISION) / 60 AS hours_inside,
  CAST(SUM(CASE WHEN ok IS NULL THEN 1 ELSE 0 END) AS DOUBLE PRECISION) / 60 AS hours_unjudged,
  CAST((CASE WHEN day + {DAY} < :end THEN day + {DAY} ELSE :end END)
        - (CASE WHEN day > :start THEN day ELSE :start END) AS DOUBLE PRECISION) / 3600
    - CAST(COUNT(*) AS DOUBLE PRECISION) / 60 AS hours_without_data
FROM (SELECT target, ts / {DAY} * {DAY} AS day, MIN(in_sweet_spot) AS ok
      FROM minutes WHERE {WINDOW} GROUP BY target, ts) m
GROUP BY target, day ORDER BY target, day""",
        (TARGET, START_30D, END),
    ),
    Canned(
        "worst_ttft_hours",
        "Which hours had the worst TTFT P95? (complete hours, from the hourly rollups)",
        f"""SELECT target, model, time AS hour, ttft_p95_s, requests_finished AS requests
FROM hours WHERE {WINDOW} AND ttft_p95_s IS NOT NULL
ORDER BY ttft_p95_s DESC, ts LIMIT :limit""",
        (TARGET, START_30D, END, LIMIT),
    ),
    Canned(
        "tokens_by_concurrency",
        "What tok/s did we get at each concurrency?",
        f"""SELECT target, concurrency, COUNT(*) AS minutes, AVG(tokens_per_s) AS tokens_per_s_avg,
  MIN(tokens_per_s) AS tokens_per_s_min, MAX(tokens_per_s) AS tokens_per_s_max, AVG(ceiling) AS ceiling_steps_per_s
FROM (SELECT target, ts, CAST(FLOOR(SUM(running_avg) + 0.5) AS INTEGER) AS concurrency,
        SUM(tokens_per_s) AS tokens_per_s, MAX(ceiling_steps_per_s) AS ceiling
      FROM minutes WHERE {WINDOW} AND running_avg IS NOT NULL GROUP BY target, ts) m
GROUP BY target, concurrency ORDER BY target, concurrency""",
        (TARGET, START_30D, END),
    ),
    Canned(
        "incidents_per_week",
        "How long did incidents (alerts firing) last, per week?",
        f"""WITH fired AS (
  SELECT a.id, a.rule, a.target, a.changed_at AS fired_at,
    (SELECT MIN(n.changed_at) FROM alert_history n WHERE n.rule = a.rule AND n.target = a.target
       AND n.model = a.model AND n.id > a.id AND n.to_state <> 'firing') AS ended_at
  FROM alert_history a
  WHERE a.to_state = 'firing' AND a.from_state <> 'firing' AND a.changed_at >= :start AND a.changed_at < :end
    AND (:target = '' OR a.target = :target))
SELECT iso_time((fired_at - {WEEK_OFFSET}) / {7 * DAY} * {7 * DAY} + {WEEK_OFFSET}) AS week, COUNT(*) AS incidents,
  SUM(CASE WHEN ended_at IS NULL THEN 1 ELSE 0 END) AS still_firing,
  CAST(SUM(ended_at - fired_at) AS DOUBLE PRECISION) / 3600 AS hours_total,
  CAST(AVG(ended_at - fired_at) AS DOUBLE PRECISION) / 60 AS minutes_mean,
  CAST(MAX(ended_at - fired_at) AS DOUBLE PRECISION) / 60 AS minutes_longest
FROM fired GROUP BY (fired_at - {WEEK_OFFSET}) / {7 * DAY} ORDER BY week""",
        (TARGET, START_30D, END),
    ),
    Canned(
        "outside_spells_per_week",
        "How long did spells outside the sweet spot last, per week (from the minutes' verdict)?",
        f"""WITH outside AS (
  SELECT target, ts, ts - 60 * ROW_NUMBER() OVER (PARTITION BY target ORDER BY ts) AS island
  -- a minute is outside when any model's row broke a rule: DISTINCT sorts only those rows
  FROM (SELECT DISTINCT target, ts FROM minutes WHERE {WINDOW} AND in_sweet_spot = 0) o),
spells AS (SELECT target, MIN(ts) AS began, MAX(ts) + 60 AS ended FROM outside GROUP BY target, island)
SELECT target, iso_time((began - {WEEK_OFFSET}) / {7 * DAY} * {7 * DAY} + {WEEK_OFFSET}) AS week,
  COUNT(*) AS spells, CAST(SUM(ended - began) AS DOUBLE PRECISION) / 3600 AS hours_total,
  CAST(AVG(ended - began) AS DOUBLE PRECISION) / 60 AS minutes_mean,
  CAST(MAX(ended - began) AS DOUBLE PRECISION) / 60 AS minutes_longest
FROM spells GROUP BY target, (began - {WEEK_OFFSET}) / {7 * DAY} ORDER BY target, week""",
        (TARGET, START_30D, END),
    ),
    Canned(
        "ttft_per_day",
        "TTFT P50/P95/P99 per day (quantiles of the day's requests, not averages of minutes)",
        # The complete hours inside the window come from the hourly rollups (their buckets are the
        # sums of the minutes'), the rest from the minutes: the same quantiles from 60× fewer rows.
        f"""WITH done AS {HOURS_DONE},
span AS (SELECT (:start + 3599) / 3600 * 3600 AS lo,
  CASE WHEN done.hours_end < :end / 3600 * 3600 THEN done.hours_end ELSE :end / 3600 * 3600 END AS hi FROM done)
SELECT target, iso_time(day) AS day, SUM(requests_finished) AS requests,
  histogram_quantile(0.5, ttft_bounds, ttft_buckets) AS ttft_p50_s,
  histogram_quantile(0.95, ttft_bounds, ttft_buckets) AS ttft_p95_s,
  histogram_quantile(0.99, ttft_bounds, ttft_buckets) AS ttft_p99_s
FROM (SELECT target, ts / {DAY} * {DAY} AS day, requests_finished, ttft_bounds, ttft_buckets
      FROM hours, span WHERE ts >= span.lo AND ts < span.hi AND (:target = '' OR target = :target)
      UNION ALL
      SELECT target, ts / {DAY} * {DAY} AS day, requests_finished, ttft_bounds, ttft_buckets
      FROM minutes, span WHERE {WINDOW} AND (ts < span.lo OR ts >= span.hi)) m
GROUP BY target, day ORDER BY target, day""",
        (TARGET, START_30D, END),
    ),
    Canned(
        "recent_minutes",
        "The last hour, minute by minute",
        f"""SELECT target, model, time, tokens_per_s, ttft_p95_s, running_avg, waiting_max, queue_depth_max,
  kv_cache_usage_max, preemptions, steps_per_s, mbu_pct, mbu_source, in_sweet_spot
FROM minutes WHERE {WINDOW} ORDER BY target, model, ts""",
        (TARGET, START_1H, END),
    ),
    Canned(
        "gpu_bandwidth_per_hour",
        "DRAM bandwidth and memory per GPU and hour",
        f"""SELECT target, gpu_index, iso_time(ts / 3600 * 3600) AS hour, AVG(dram_bw_gbps) AS dram_bw_gbps,
  AVG(dram_bw_pct) AS dram_bw_pct, MAX(memory_used_gib) AS memory_used_gib_max, MAX(temperature_c_max) AS temperature_c_max
FROM gpu_minutes WHERE {WINDOW}
GROUP BY target, gpu_index, ts / 3600 ORDER BY target, hour, gpu_index""",
        (TARGET, START_30D, END),
    ),
    Canned(
        "sweep_levels",
        "Load sweeps: tok/s and TTFT P95 at each concurrency",
        """SELECT run_id, started_time, model, concurrency, tokens_per_s, ttft_p95_s, itl_p95_s, error_rate
FROM sweep_results ORDER BY run_id DESC, position""",
        (),
    ),
)
BY_NAME = {c.name: c for c in CANNED}

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": DAY, "w": 7 * DAY}


def parse_time(text: str, now: float) -> int:
    """Unix seconds, an ISO 8601 date/time (UTC unless zoned) or a duration back from now."""
    text = text.strip()
    if re.fullmatch(r"-?\d+(\.\d+)?", text):
        return int(float(text))
    if m := _DURATION.match(text):
        return int(now - float(m.group(1)) * _UNITS[m.group(2)])
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise QueryError(
            f"not a time: {text!r}", "Use unix seconds, an ISO date like 2026-11-01 or a duration like 30d", "param"
        ) from None
    return int((when if when.tzinfo else when.replace(tzinfo=dt.UTC)).timestamp())


def get(name: str) -> Canned:
    if name not in BY_NAME:
        raise QueryError(f"no canned query {name!r}", f"Known: {', '.join(BY_NAME)} (python -m app query --list)", "canned")
    return BY_NAME[name]


def bind(canned: Canned, given: Mapping[str, str], now: float) -> dict[str, Any]:
    """Parameter values: given ones parsed by kind, defaults for the rest; unknown names refused."""
    known = {p.name: p for p in canned.params}
    unknown = sorted(set(given) - set(known))
    if unknown:
        names = ", ".join(known) or "none"
        raise QueryError(f"{canned.name} has no parameter {unknown[0]!r}", f"Its parameters: {names}", "param")
    out: dict[str, Any] = {}
    for p in canned.params:
        if p.name not in given:
            out[p.name] = p.default(now)
        elif p.kind == "time":
            out[p.name] = parse_time(given[p.name], now)
        elif p.kind == "int":
            if not given[p.name].strip().isdigit():
                raise QueryError(f"{p.name}: expected a whole number, got {given[p.name]!r}", "", "param")
            out[p.name] = int(given[p.name])
        else:
            out[p.name] = given[p.name]
    return out
