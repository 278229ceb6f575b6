"""A query result as a table, CSV or JSON (the CLI prints them, the Query page offers them as downloads).

Values are made plain first (:func:`plain`): a PostgreSQL ``numeric`` becomes a float, a timestamp
ISO 8601 text with its zone (the query session runs in UTC), a blob its hex digits, a value that
is not finite ``None``. JSON is a list of row objects (``null`` = no data); CSV has a header row,
and a text cell that a spreadsheet would read as a formula (``=``, ``+``, ``-``, ``@``, tab, CR
first) starts with ``'`` (OWASP's advice against CSV injection). The table is for a terminal: its
cells show control characters as escapes (a stored name cannot clear the screen or move the cursor).
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json
import math
from typing import Any

from core.text import csv_cell, visible
from db.query_runner import Result

FORMATS = ("table", "csv", "json")
MAX_CELL = 60  # characters of a table cell; CSV and JSON keep everything


def plain(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        value = float(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dt.datetime):
        return value.isoformat() if value.tzinfo else value.isoformat() + " (no zone)"
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return value


def records(result: Result) -> list[dict[str, Any]]:
    return [dict(zip(result.columns, map(plain, row), strict=True)) for row in result.rows]


def to_json(result: Result) -> str:
    return json.dumps(records(result), indent=1, allow_nan=False, ensure_ascii=False)


def to_csv(result: Result) -> str:
    out = io.StringIO()
    # RFC 4180's CRLF: Python's writer quotes a cell holding a character of the line terminator only,
    # so with "\n" a bare CR in a cell went out unquoted and a spreadsheet started a new row there
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([csv_cell(c) for c in result.columns])
    writer.writerows([["" if v is None else csv_cell(v) for v in map(plain, row)] for row in result.rows])
    return out.getvalue()


def _cell(value: Any) -> str:
    value = plain(value)
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.6g}"
    return visible(value, MAX_CELL)


def to_table(result: Result) -> str:
    cells = [[_cell(v) for v in row] for row in result.rows]
    columns = [visible(c, MAX_CELL) for c in result.columns]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    line = lambda values: "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()  # noqa: E731
    body = [line(columns), line(["-" * w for w in widths]), *(line(r) for r in cells)]
    return "\n".join([*body, summary(result)])


def summary(result: Result) -> str:
    """``3 rows in 0.012 s`` or the truncation notice naming the limit."""
    n = len(result.rows)
    text = f"{n:,} row{'s' if n != 1 else ''} in {result.elapsed_s:.3f} s"
    if result.by_bytes:
        text += (f"; truncated at {n:,} rows / {result.size / 2**20:.1f} MiB: the rows kept fit the "
                 f"{result.byte_limit / 2**20:g} MiB a result may hold (select fewer or narrower columns)")
    elif result.truncated:
        text += f"; truncated at {n:,} rows: more rows exist than the limit of {result.row_limit:,} (--limit, query.row_limit)"
    return text


def render(result: Result, fmt: str) -> str:
    return {"table": to_table, "csv": to_csv, "json": to_json}[fmt](result)


def time_columns(result: Result) -> list[str]:
    """Columns holding timestamps: ISO 8601 text or datetimes (the chart draws them on a time axis)."""
    out = []
    for i, name in enumerate(result.columns):
        values = [row[i] for row in result.rows[:50] if row[i] is not None]
        if values and all(_is_time(v) for v in values):
            out.append(name)
    return out


def _is_time(value: Any) -> bool:
    if isinstance(value, dt.datetime | dt.date):
        return True
    return isinstance(value, str) and len(value) >= 10 and value[4] == "-" and value[7] == "-" and _parses(value)


def _parses(text: str) -> bool:
    try:
        dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True

