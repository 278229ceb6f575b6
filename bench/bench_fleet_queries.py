"""Fleet benchmark on PostgreSQL: 100 targets × 7 days, the Fleet page's query and one Overview.

1. A throwaway PostgreSQL on 127.0.0.1 (initdb + pg_ctl, as tests/conftest.py starts it), or the
   server of ``--db``; the fleet's database built by bench/fleet_db.py (one target through the
   writer, rollup and retention, copied to 100 in SQL).
2. Time, through the query facade (decoding included), fastest and median of ``--repeat`` runs:
   - the Fleet page's query: ``app.fleet.fleet`` (every target's 5-minute window and its last hour
     per minute, judged) — goal ≤ 300 ms;
   - one target's Overview over 7 days: what app/ui/views/overview.py asks (the window, the recent
     queue steps, every chart's series at the 7-day step) — goal ≤ 500 ms.

``--before TREE``: also time the same two reads with the code of another checkout of the project
(a ``git worktree`` of the commit before a change) on the same database, alternating with this
tree's code for ``--rounds`` rounds, each in its own process: a change's cost measured in one run.

Usage: .venv/bin/python bench/bench_fleet_queries.py [--targets 100] [--days 7] [--repeat 15] [--db postgresql://...]
       [--before /tmp/before-tree --rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.fleet import fleet  # noqa: E402
from bench import fleet_db  # noqa: E402
from core.settings import SweetSpotSettings  # noqa: E402
from db.engine import open_engine  # noqa: E402
from db.queries import Reader  # noqa: E402

FLEET_GOAL_MS = 300.0
OVERVIEW_GOAL_MS = 500.0
# The Overview's queries (app/ui/views/overview.py): tiles and charts
QUEUE = ("queue_depth_max",)
TTFT = ("ttft_p50_s", "ttft_p95_s", "ttft_p99_s")
OTHERS = ("tokens_per_s", "preemptions", "preemptions_per_s", "running_avg", "running_max", "waiting_max",
          "queue_depth_max", "kv_cache_usage_max", "up_ratio")  # fmt: skip


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    """A throwaway server's base URL (tests/conftest.py's recipe, outside pytest)."""
    from tests.conftest import PG_USER, _as_server_user, _free_port, _pg_bin

    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        print("SKIP: PostgreSQL binaries not found (apt-get install postgresql), or pass --db")
        raise SystemExit(0)
    root = Path(tempfile.mkdtemp(prefix="sweetspot-benchpg-"))
    root.chmod(0o755)
    if _as_server_user(["x"]) != ["x"]:
        shutil.chown(root, "postgres", "postgres")
    data, port = root / "data", _free_port()

    def run(cmd: list[str]) -> None:
        subprocess.run(_as_server_user(cmd), check=True, capture_output=True, timeout=120)

    run([initdb, "-D", str(data), "-U", PG_USER, "--auth=trust", "-E", "UTF8", "--no-sync"])
    opts = f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={root} -c fsync=off"
    run([pg_ctl, "-D", str(data), "-o", opts, "-l", str(root / "log"), "-w", "start"])
    try:
        yield f"postgresql://{PG_USER}@127.0.0.1:{port}"
    finally:
        subprocess.run(_as_server_user([pg_ctl, "-D", str(data), "-m", "fast", "stop"]), capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    fn()  # first call: statement caches, connection
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return min(times), statistics.median(times)


def overview(reader: Reader, target: str, now: float, sweetspot: SweetSpotSettings) -> None:
    """What the Overview asks for a 7-day range (app/ui/time_range.resolve: 1800 s steps for 7 d)."""
    step = 1800.0
    end = now // step * step
    reader.window(target, now, 300.0)
    reader.series(target, now - sweetspot.queue_growth_s - 30, now, 30.0, fields=QUEUE)
    reader.series(target, end - 7 * 86400, end, step, fields=OTHERS + TTFT)


# One round of both reads, run with a tree's code first on sys.path (``--before``).
ROUND = """
import sys, time
sys.path.insert(0, sys.argv[1])
from bench.bench_fleet_queries import overview, timed
from app.fleet import fleet
from bench import fleet_db
from core.settings import SweetSpotSettings
from db.queries import Reader
url, targets, repeat = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
reader, sweetspot = Reader(url), SweetSpotSettings()
a = timed(lambda: fleet(reader, sweetspot, time.time(), 300.0), repeat)
b = timed(lambda: overview(reader, fleet_db.name(targets // 2), time.time(), sweetspot), repeat)
print(f"fleet fastest {a[0]:.0f} ms median {a[1]:.0f} ms; overview fastest {b[0]:.0f} ms median {b[1]:.0f} ms")
"""


def compare(url: str, before: str, args: argparse.Namespace) -> None:
    """Alternate the two trees' code on one database (``--before``)."""
    for i in range(args.rounds):
        for label, tree in (("before", before), ("after", str(ROOT))):
            out = subprocess.run([sys.executable, "-c", ROUND, tree, url, str(args.targets), str(args.repeat)],
                                 cwd=tree, capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
            print(f"round {i + 1} {label:6} ({tree}): {out}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=100)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--db", help="an empty PostgreSQL database URL (default: a throwaway server)")
    parser.add_argument("--before", metavar="TREE", help="another checkout whose code is timed on the same database")
    parser.add_argument("--rounds", type=int, default=3, help="alternations with --before")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        url = args.db
        if url is None:
            import psycopg

            base = stack.enter_context(postgres())
            with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
                conn.execute('CREATE DATABASE "fleet"')
            url = f"{base}/fleet"
        now = time.time()
        built = fleet_db.build(url, args.targets, args.days, now)
        engine = open_engine(url)
        counts = fleet_db.rows(engine)
        engine.dispose()
        print(f"database: {args.targets} targets × {args.days:g} days on {url.split('@')[-1]}: {counts}; "
              f"one target written in {built['write_one_s']:.1f} s, copied in {built['clone_s']:.1f} s")
        reader, sweetspot = Reader(url), SweetSpotSettings()
        rows = fleet(reader, sweetspot, time.time(), 300.0)
        assert len(rows) == args.targets and all(len(r.sparkline) == 60 for r in rows)
        best, median = timed(lambda: fleet(reader, sweetspot, time.time(), 300.0), args.repeat)
        verdict = "met" if best <= FLEET_GOAL_MS else "NOT met"
        print(f"Fleet query ({args.targets} targets: window 5 min + last hour per minute each): "
              f"fastest {best:.0f} ms, median {median:.0f} ms (goal ≤ {FLEET_GOAL_MS:.0f} ms: {verdict})")
        best, median = timed(lambda: overview(reader, fleet_db.name(args.targets // 2), time.time(), sweetspot), args.repeat)
        verdict = "met" if best <= OVERVIEW_GOAL_MS else "NOT met"
        print(f"one target's Overview over {args.days:g} days (window, queue steps, series at 30 min): "
              f"fastest {best:.0f} ms, median {median:.0f} ms (goal ≤ {OVERVIEW_GOAL_MS:.0f} ms: {verdict})")
        reader.engine.dispose()
        if args.before:
            compare(url, args.before, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
