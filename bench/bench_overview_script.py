"""The Overview's server side on a first visit: its script's run in a new session, caches warm.

A first visit is a new browser session: Streamlit runs the page's script again for it (the app's
caches already hold the queries and chart specs of earlier sessions). This measures that run alone,
in-process (Streamlit's AppTest), with cProfile on the script's own thread, so what the browser does
afterwards (Streamlit's JS, Vega) is apart: bench/bench_ui.py measures the whole load.

Run: ``.venv/bin/python bench/bench_overview_script.py [--runs 5] [--cold]`` (``--cold``: sessions
more than the reads' cache apart, as the first-paint loads are, so the chart's spec is rebuilt). Prints the script thread's time
per new session (best and median) and the functions of the page that cost most in the best run.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.ui.reads import FINE_TTL_S  # noqa: E402
from tests import ui_db  # noqa: E402

MAIN = str(ROOT / "app" / "ui" / "main.py")


def session() -> float:
    """One new session's script run; returns the script thread's profiled time (s)."""
    from streamlit.testing.v1 import AppTest

    profiles: list[cProfile.Profile] = []

    def start(*_: object) -> None:  # the first event of each new thread: profile that thread
        profile = cProfile.Profile()
        profiles.append(profile)
        profile.enable()

    threading.setprofile(start)
    try:
        at = AppTest.from_file(MAIN, default_timeout=120)
        at.query_params["range"] = "1h"
        at.run()
    finally:
        threading.setprofile(None)
    assert not at.exception, at.exception
    script = next(p for p in profiles if any(key[0] == MAIN for key in pstats.Stats(p).stats))  # type: ignore[attr-defined]
    session.last = script  # type: ignore[attr-defined]
    return pstats.Stats(script).total_tt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cold", action="store_true",
                        help="wait out the reads' cache between sessions, as visits 10 s apart do (bench_ui --first-paint)")
    args = parser.parse_args()
    folder = tempfile.mkdtemp()
    os.environ["SWEETSPOT_DB_URL"] = ui_db.fill(Path(folder) / "sweetspot.db", float(int(time.time())), hours=2)
    os.environ.pop("SWEETSPOT_CONFIG", None)
    session()  # the server's first session: imports, connections, the caches filled
    times, best = [], None
    for _ in range(args.runs):
        if args.cold:  # the reads' 5-s cache expired; the live range has moved, so the chart's spec is rebuilt
            time.sleep(FINE_TTL_S + 1.5)
        times.append(session())
        if best is None or times[-1] <= min(times):
            best = session.last  # type: ignore[attr-defined]
    caches = "reads' cache expired" if args.cold else "caches warm"
    print(f"Overview script, new session, {caches}: best {min(times) * 1000:.0f} ms, "
          f"median {statistics.median(times) * 1000:.0f} ms ({args.runs} runs: "
          f"{', '.join(f'{t * 1000:.0f}' for t in times)} ms)")
    out = io.StringIO()
    pstats.Stats(best, stream=out).sort_stats("cumtime").print_stats(r"/app/", 15)
    print(out.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
