"""``python -m app query``: read-only SQL over the stable views (docs/query.md)."""

from __future__ import annotations

import argparse
import sys
import time

from app import query_output
from core.errors import UsageError
from core.settings import Settings, query_db_url
from db import canned, query_runner, query_views, saved_queries

HELP = "run read-only SQL over the history's views (or a canned query); print a table, CSV or JSON"
# printed as it is, not through the terminal's escaping (app/cli.py): CSV and JSON are data: cells keep their characters (a table's cells are made visible by app/query_output.py)
DATA_OUTPUT = True


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sql", nargs="?", help="one SELECT over the views (docs/query.md); - reads it from stdin")
    parser.add_argument("--format", choices=query_output.FORMATS, default="table", help="output format (default table)")
    parser.add_argument("--limit", type=int, metavar="N", help="rows at most (default query.row_limit)")
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help="time limit (default query.timeout_s)")
    parser.add_argument("--db", metavar="URL", help="database URL (overrides db_url / SWEETSPOT_DB_URL)")
    parser.add_argument("--list", action="store_true", help="list the canned and saved queries")
    parser.add_argument("--schema", action="store_true", help="list the views and their columns with units")
    parser.add_argument("--canned", metavar="NAME", help="run a canned query (see --list)")
    parser.add_argument("--param", action="append", default=[], metavar="K=V", help="a canned query's parameter")
    parser.add_argument("--save", metavar="NAME", help="store the SQL under NAME (it is not run)")


def _params(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--param {pair!r}: expected NAME=VALUE", "e.g. --param target=demo")
        out[key.strip()] = value
    return out


def _listing(db_url: str) -> str:
    lines = ["canned queries (--canned NAME):"]
    for c in canned.CANNED:
        params = " ".join(f"{p.name}=" for p in c.params)
        lines.append(f"  {c.name:26} {c.question}" + (f"  [{params}]" if params else ""))
    saved = saved_queries.list_saved(db_url)
    lines.append("saved queries (Query page, or --save NAME):" if saved else "no saved queries")
    lines += [f"  {s.name:26} {s.sql.splitlines()[0][:70]}" for s in saved]
    return "\n".join(lines)


def _schema() -> str:
    lines = []
    for view in query_views.VIEWS:
        lines.append(f"{view.name}: {view.meaning}")
        lines += [f"  {c.name:24} {c.unit:14} {c.meaning}" for c in view.columns]
    return "\n".join(lines)


def execute(args: argparse.Namespace, settings: Settings) -> int:
    if args.list:
        print(_listing(settings.db_url))
        return 0
    if args.schema:
        print(_schema())
        return 0
    q = settings.query
    limits = query_runner.Limits(
        args.timeout if args.timeout is not None else q.timeout_s,
        args.limit if args.limit is not None else q.row_limit,
        q.max_timeout_s,
    )
    params: dict[str, object] = {}
    if args.canned:
        if args.sql:
            raise UsageError("give either SQL or --canned, not both")
        chosen = canned.get(args.canned)
        sql, params = chosen.sql, canned.bind(chosen, _params(args.param), time.time())
    elif args.sql:
        sql = sys.stdin.read() if args.sql == "-" else args.sql
        if args.param:
            raise UsageError("--param goes with --canned")
    else:
        raise UsageError("no query given", 'Pass SQL (python -m app query "SELECT * FROM minutes LIMIT 5"), --canned NAME or --list')
    if args.save:
        saved_queries.save(settings.db_url, args.save, sql)
        print(f"saved {args.save!r}")
        return 0
    result = query_runner.run_query(query_db_url(settings), sql, limits, params)
    text = query_output.render(result, args.format)
    print(text, end="" if text.endswith("\n") else "\n")
    if args.format != "table":
        print(query_output.summary(result), file=sys.stderr)
    return 0
