"""SQL functions of the query views, the same on SQLite and PostgreSQL (docs/query.md).

- ``histogram_quantile(q, bounds, buckets)``: an aggregate over rows of a view's ``<h>_bounds`` and
  ``<h>_buckets`` columns: the Prometheus quantile of the rows' merged bucket increases, with
  :mod:`db.quantiles`' interpolation and :mod:`db.histo`'s layout merge (every row mapped onto the
  layout of the last row fed that has increases). A window's P95 is this, not an average of
  minute P95s. NULL when no row had a request, or ``q`` is outside [0, 1].
- ``bucket_quantile(q, bounds, buckets)``: the same for one row (the views' per-minute quantiles).
- ``bucket_share(le, bounds, buckets)``: the share (0–1) of one row's observations at or below
  ``le`` (:func:`db.quantiles.attainment_matrix`: exact at a bound, interpolated between two, the
  share at the largest finite bound above it); NULL when the row had no request (the views' TTFT SLO
  attainment).
- ``iso_time(ts)``: unix seconds → ``2026-12-01T20:15:00Z`` (ISO 8601, UTC, seconds).

SQLite: Python functions registered on each connection (:func:`register`); a SQLite tool that does
not register them can read every view column but these. PostgreSQL: SQL and PL/pgSQL functions in
the ``sweetspot_query`` schema, created with the views by the standing step of :mod:`db.migrations` (:data:`POSTGRES_DDL`).
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import struct
from functools import lru_cache

import numpy as np

from db.histo import bounds_from_key, remap_index
from db.quantiles import attainment_matrix, quantile_value

SCHEMA = "sweetspot_query"


# Keyed by the layout's text (a value, no identity): a query calls this per row, for the few layouts
# a database holds, and parsing the JSON costs ~12 µs against ~0.2 µs cached (as much as the row's other work).
@lru_cache(maxsize=64)
def _bounds(text: str) -> tuple[float, ...]:
    return bounds_from_key(text)


class HistogramQuantile:
    """SQLite aggregate: per-layout dense increases, merged onto the last layout at the end."""

    def __init__(self) -> None:
        self.q: float | None = None
        self.last: str | None = None
        self.counts: dict[str, list[int]] = {}

    def step(self, q: float | None, bounds: str | None, buckets: bytes | None) -> None:
        if bounds is None or not buckets:
            return  # no increase: as the facade, such a row neither counts nor picks the layout
        self.q, self.last = q, bounds
        dense = self.counts.get(bounds)
        if dense is None:
            dense = self.counts[bounds] = [0] * len(_bounds(bounds))
        size = len(dense)
        for value in struct.unpack(f"<{len(buckets) >> 2}I", buckets[: len(buckets) & ~3]):
            if (value & 255) < size:
                dense[value & 255] += value >> 8

    def finalize(self) -> float | None:
        if self.last is None or self.q is None or not 0.0 <= self.q <= 1.0:
            return None
        target = _bounds(self.last)
        merged = list(self.counts[self.last])
        for text, dense in self.counts.items():
            if text != self.last:
                for old, new in enumerate(remap_index(_bounds(text), target).tolist()):
                    merged[new] += dense[old]
        return quantile_value(self.q, target, merged)


def bucket_quantile(q: float | None, bounds: str | None, buckets: bytes | None) -> float | None:
    # one row, one layout: the aggregate's work without its per-layout bookkeeping (called per minute)
    if bounds is None or not buckets or q is None or not 0.0 <= q <= 1.0:
        return None
    target = _bounds(bounds)
    return quantile_value(q, target, _dense(target, buckets))


def _dense(target: tuple[float, ...], buckets: bytes) -> list[int]:
    """One row's packed increases (db/histo.py) as one count per bucket of its layout."""
    dense = [0] * len(target)
    size = len(dense)
    for value in struct.unpack(f"<{len(buckets) >> 2}I", buckets[: len(buckets) & ~3]):
        if (value & 255) < size:
            dense[value & 255] += value >> 8
    return dense


def bucket_share(le: float | None, bounds: str | None, buckets: bytes | None) -> float | None:
    # one row's share within ``le``: the views' TTFT SLO attainment per minute and hour
    if bounds is None or not buckets or le is None:
        return None
    target = _bounds(bounds)
    share = attainment_matrix(np.asarray([float(le)]), target, np.asarray([_dense(target, buckets)])).share[0]
    return None if share != share else float(share)  # NaN: no request


def iso_time(ts: float | None) -> str | None:
    if ts is None:
        return None
    return dt.datetime.fromtimestamp(float(ts), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def register(conn: sqlite3.Connection) -> None:
    """Make the view functions available on one SQLite connection."""
    conn.create_aggregate("histogram_quantile", 3, HistogramQuantile)  # type: ignore[arg-type]
    conn.create_function("bucket_quantile", 3, bucket_quantile, deterministic=True)
    conn.create_function("bucket_share", 3, bucket_share, deterministic=True)
    conn.create_function("iso_time", 1, iso_time, deterministic=True)


# PostgreSQL's bucket_share: db/quantiles.py:attainment_matrix for one row, line for line (1-based
# arrays). Apart from the rest, so that a migration can add it to a database whose schema has the others.
SHARE_DDL = [
    f"""CREATE OR REPLACE FUNCTION {SCHEMA}.share_of(le float8, bounds float8[], increases float8[]) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $body$
DECLARE
    n int := pg_catalog.array_length(bounds, 1);
    running float8 := 0;
    below float8 := 0; lower_le float8 := 0; total float8 := 0; i int;
BEGIN
    IF le IS NULL OR increases IS NULL OR n IS NULL OR n < 2 OR bounds[n] <> 'Infinity'::float8 OR pg_catalog.array_length(increases, 1) <> n THEN
        RETURN NULL;
    END IF;
    FOR i IN 1 .. n LOOP
        total := total + GREATEST(increases[i], 0);
    END LOOP;
    IF total <= 0 THEN RETURN NULL; END IF;
    FOR i IN 1 .. n - 1 LOOP
        running := running + GREATEST(increases[i], 0);
        IF pg_catalog.abs(bounds[i] - le) <= 1e-9 * pg_catalog.abs(le) THEN RETURN running / total; END IF;
        IF bounds[i] > le THEN
            IF bounds[i] <= lower_le THEN RETURN below / total; END IF;
            RETURN (below + (running - below) * LEAST(GREATEST((le - lower_le) / (bounds[i] - lower_le), 0), 1)) / total;
        END IF;
        below := running; lower_le := bounds[i];
    END LOOP;
    RETURN below / total;
END
$body$""",
    f"""CREATE OR REPLACE FUNCTION {SCHEMA}.bucket_share(le float8, bounds text, buckets bytea) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$body$ SELECT {SCHEMA}.share_of(le, {SCHEMA}.bucket_bounds(bounds),
    ({SCHEMA}.histogram_accumulate(NULL, 0, bounds, buckets)).counts) $body$""",
]


# PostgreSQL: the same functions. Bodies name everything with its schema: SQL function bodies are
# parsed with the caller's search path, which a user's query restricts to this schema.
POSTGRES_DDL = [
    f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}",
    f"CREATE TYPE {SCHEMA}.histogram_state AS (q float8, layouts text[], sizes int[], counts float8[])",
    f"""CREATE OR REPLACE FUNCTION {SCHEMA}.iso_time(ts float8) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$body$ SELECT pg_catalog.to_char(pg_catalog.to_timestamp(ts) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') $body$""",
    f"""CREATE OR REPLACE FUNCTION {SCHEMA}.bucket_bounds(bounds text) RETURNS float8[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$body$ SELECT pg_catalog.array_agg(CASE WHEN e::text = '"+Inf"' THEN 'Infinity'::float8 ELSE e::text::float8 END ORDER BY o)
FROM pg_catalog.json_array_elements(bounds::json) WITH ORDINALITY AS x(e, o) $body$""",
    # db/quantiles.py:histogram_quantile, line for line (1-based arrays)
    f"""CREATE OR REPLACE FUNCTION {SCHEMA}.quantile_of(q float8, bounds float8[], increases float8[]) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $body$
DECLARE
    n int := pg_catalog.array_length(bounds, 1);
    cum float8[] := ARRAY[]::float8[];
    running float8 := 0;
    total float8; rnk float8; b int; lower_bound float8; below float8; cnt float8; i int;
BEGIN
    IF n IS NULL OR n < 2 OR bounds[n] <> 'Infinity'::float8 OR pg_catalog.array_length(increases, 1) <> n THEN
        RETURN NULL;
    END IF;
    FOR i IN 1 .. n LOOP
        running := running + GREATEST(increases[i], 0);
        cum := cum || running;
    END LOOP;
    total := cum[n];
    IF total <= 0 THEN RETURN NULL; END IF;
    rnk := q * total;
    b := n;
    FOR i IN 1 .. n - 1 LOOP
        IF cum[i] >= rnk THEN b := i; EXIT; END IF;
    END LOOP;
    IF b = n THEN RETURN bounds[n - 1]; END IF;
    IF b = 1 AND bounds[1] <= 0 THEN RETURN bounds[1]; END IF;
    lower_bound := CASE WHEN b > 1 THEN bounds[b - 1] ELSE 0 END;
    below := CASE WHEN b > 1 THEN cum[b - 1] ELSE 0 END;
    cnt := cum[b] - below;
    IF cnt <= 0 THEN RETURN lower_bound; END IF;
    RETURN lower_bound + (bounds[b] - lower_bound) * ((rnk - below) / cnt);
END
$body$""",
    # One run of dense increases per change of layout; the final function maps every run onto the
    # last one (db/histo.py's rule), as HistogramQuantile above does.
    f"""CREATE OR REPLACE FUNCTION {SCHEMA}.histogram_accumulate(
    state {SCHEMA}.histogram_state, q float8, bounds text, buckets bytea) RETURNS {SCHEMA}.histogram_state
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $body$
DECLARE
    layouts text[]; sizes int[]; counts float8[]; runs int; base int; i int; v bigint; k int;
BEGIN
    IF bounds IS NULL OR buckets IS NULL OR pg_catalog.length(buckets) = 0 THEN RETURN state; END IF;
    IF state IS NULL THEN
        layouts := ARRAY[]::text[]; sizes := ARRAY[]::int[]; counts := ARRAY[]::float8[];
    ELSE
        layouts := state.layouts; sizes := state.sizes; counts := state.counts;
    END IF;
    runs := COALESCE(pg_catalog.array_length(layouts, 1), 0);
    IF runs = 0 OR layouts[runs] <> bounds THEN
        k := pg_catalog.json_array_length(bounds::json);
        layouts := layouts || bounds;
        sizes := sizes || k;
        counts := counts || pg_catalog.array_fill(0::float8, ARRAY[k]);
        runs := runs + 1;
    END IF;
    base := COALESCE(pg_catalog.array_length(counts, 1), 0) - sizes[runs];
    FOR i IN 0 .. pg_catalog.length(buckets) / 4 - 1 LOOP
        v := pg_catalog.get_byte(buckets, 4 * i)::bigint
             | (pg_catalog.get_byte(buckets, 4 * i + 1)::bigint << 8)
             | (pg_catalog.get_byte(buckets, 4 * i + 2)::bigint << 16)
             | (pg_catalog.get_byte(buckets, 4 * i + 3)::bigint << 24);
        k := (v & 255)::int;
        IF k < sizes[runs] THEN
            counts[base + k + 1] := counts[base + k + 1] + (v >> 8);
        END IF;
    END LOOP;
    RETURN ROW(q, layouts, sizes, counts)::{SCHEMA}.histogram_state;
END
$body$""",
    f"""CREATE OR REPLACE FUNCTION {SCHEMA}.histogram_final(state {SCHEMA}.histogram_state) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $body$
DECLARE
    runs int; r int; j int; k int; base int := 0; target float8[]; b float8[]; merged float8[];
BEGIN
    IF state IS NULL OR state.q IS NULL OR state.q < 0 OR state.q > 1 THEN RETURN NULL; END IF;
    runs := pg_catalog.array_length(state.layouts, 1);
    target := {SCHEMA}.bucket_bounds(state.layouts[runs]);
    merged := pg_catalog.array_fill(0::float8, ARRAY[pg_catalog.array_length(target, 1)]);
    FOR r IN 1 .. runs LOOP
        IF state.layouts[r] = state.layouts[runs] THEN
            FOR j IN 1 .. state.sizes[r] LOOP
                merged[j] := merged[j] + state.counts[base + j];
            END LOOP;
        ELSE
            b := {SCHEMA}.bucket_bounds(state.layouts[r]);
            FOR j IN 1 .. state.sizes[r] LOOP
                k := 1;
                WHILE k < pg_catalog.array_length(target, 1) AND target[k] < b[j] LOOP k := k + 1; END LOOP;
                merged[k] := merged[k] + state.counts[base + j];
            END LOOP;
        END IF;
        base := base + state.sizes[r];
    END LOOP;
    RETURN {SCHEMA}.quantile_of(state.q, target, merged);
END
$body$""",
    f"""CREATE AGGREGATE {SCHEMA}.histogram_quantile(float8, text, bytea) (
    SFUNC = {SCHEMA}.histogram_accumulate, STYPE = {SCHEMA}.histogram_state,
    FINALFUNC = {SCHEMA}.histogram_final, PARALLEL = SAFE)""",
    f"""CREATE OR REPLACE FUNCTION {SCHEMA}.bucket_quantile(q float8, bounds text, buckets bytea) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$body$ SELECT {SCHEMA}.histogram_final({SCHEMA}.histogram_accumulate(NULL, q, bounds, buckets)) $body$""",
    *SHARE_DDL,
]
