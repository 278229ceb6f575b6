"""Dashboard benchmark: time until the Overview over 30 days is completely rendered in headless Chromium.

1. Fill a SQLite database with 30 days of the simulator's history, as the collector would store it:
   parse_vllm/parse_dcgm → Writer → rollup → retention (raw rows older than 48 h deleted, so the
   30-day view reads hourly rollups as in production). Old history is written at 60 s steps, the
   last 2 hours at 5 s steps (the production scrape interval); GPUs every 15 min, then every round.
   The file is kept under artifacts/ and reused (``--rebuild`` to make it again).
2. Start the dashboard with ``streamlit run`` on 127.0.0.1 and open ``/?range=30d`` in Chromium.
3. Measure from navigation start until the script has finished and the chart (five panels in one
   Vega view) is drawn: one cold load (first session of the server process), then ``--runs`` warm
   loads (queries and chart specs come from the app's caches) for two kinds of visitor, alternately:
   - a first visit: a new browser profile each time, nothing cached;
   - a returning visitor: one browser profile on disk, visited 3 times before the runs, so
     Streamlit's hashed JS bundles come from the HTTP cache and their compiled code from V8's code
     cache, as in the browser an ops person uses every day. (An in-memory Playwright context keeps
     no code cache: it would measure every load as a half-first visit.)
   The same for the 1-hour view, and for a one-line Streamlit page (``st.write('hello')``, the same
   server flags): the floor any Streamlit app pays on this machine.
4. Split each load: when the script finished (Streamlit's script state, seen in the page), and the
   CPU time of the page's main thread (CDP Performance.TaskDuration), which on a busy machine says
   more than the wall time.

Usage: .venv/bin/python bench/bench_ui.py [--runs 5] [--rebuild]

``--first-paint`` (issue 30 item 11) measures instead the Overview's first paint against a bare page:
the product's UI as ``python -m app ui`` starts it, over the tests' database (tests/ui_db.py), and a
one-line Streamlit page served by the same interpreter, each on a free 127.0.0.1 port; every load in a
new browser context (nothing cached), the two pages alternately; time from navigation start to the
page drawn (:data:`PAINTED_JS`); prints the medians and their ratios. A third page, one text line and
one 10-point Altair chart with a tooltip and zoom (:data:`ONE_CHART_PAGE`), is the floor of any page
that draws a Vega chart, and the goal's measure (issue 39: the Overview ≤ 1.3× it); each load is split
by :data:`MARKS_JS` (script started, Vega's code fetched, the chart's element mounted, the Overview's
verdict line mounted, drawn).
``--tree PATH`` adds the Overview of another checkout (e.g. the commit before, ``git archive`` into a
folder) to the same alternation, so before and after are measured in one run on a loaded machine.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.commands.ui import streamlit_command  # noqa: E402
from core.settings import Settings  # noqa: E402
from db.engine import open_engine  # noqa: E402
from db.queries import Reader  # noqa: E402
from db.rollup import apply_retention, rollup  # noqa: E402
from db.writer import Writer  # noqa: E402
from tests import ui_db  # noqa: E402
from tests.browser import (  # noqa: E402
    CHROMIUM,
    free_port,
    launch,
    launch_profile,
    new_page,
    new_tab,
    streamlit_server,
    wait_healthy,
    wait_rendered,
)

DB = ROOT / "artifacts" / "bench-ui" / "sweetspot-30d.db"
DAYS = 30
GOAL_S = 2.0
PRIMING_VISITS = 3
SETTLE_S = 1.0


def build(path: Path, now: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        stale.unlink(missing_ok=True)  # a WAL left beside a new file reads as a disk I/O error
    engine = open_engine(f"sqlite:///{path}")
    writer = Writer(engine)
    writer.register_target(ui_db.target_settings("demo"))
    recent = now - 2 * 3600
    t0 = time.perf_counter()
    ui_db.GPU_EVERY_S = 900.0
    old = writer.write_rounds(ui_db.simulated_rounds("demo", now - DAYS * 86400, recent - 60, 60.0))
    ui_db.GPU_EVERY_S = 0.0
    new = writer.write_rounds(ui_db.simulated_rounds("demo", recent, now, 5.0))
    t1 = time.perf_counter()
    rollup(engine, now)
    apply_retention(engine, now, Settings())
    t2 = time.perf_counter()
    engine.dispose()
    size = path.stat().st_size / 1e6
    print(f"filled {old + new:,} rounds ({DAYS} d) in {t1 - t0:.0f} s, rollup+retention {t2 - t1:.1f} s, {size:.0f} MB")


def facade_times(url: str, now: float) -> None:
    """What the Overview asks the facade for a 30-day view, timed server-side (no browser)."""
    reader = Reader(url)
    start, end, step = now - DAYS * 86400, now, 3600.0
    calls = {
        "window 5m": lambda: reader.window("demo", now, 300.0),
        "series 30d @1h": lambda: reader.series("demo", start, end, step),
        "series recent @30s": lambda: reader.series("demo", now - 210, now, 30.0, fields=("queue_depth_max",)),
    }
    for name, call in calls.items():
        t0 = time.perf_counter()
        call()
        print(f"  facade {name}: {(time.perf_counter() - t0) * 1000:.0f} ms")


# When the script finished: Streamlit marks it on the app element; the observer keeps the first time.
SCRIPT_DONE_JS = """
new MutationObserver(() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (window.__scriptDone === undefined && app && app.getAttribute('data-test-script-state') === 'notRunning')
    window.__scriptDone = performance.now();
}).observe(document, {subtree: true, attributes: true, childList: true});
"""


@dataclass
class Load:
    total_s: float
    script_done_s: float  # navigation start → the script's last delta arrived
    main_thread_s: float  # the page's main-thread CPU (tasks) during the load


# The Fleet page: its two tables drawn (Streamlit's data grid paints on a canvas).
FRAMES_JS = """(n) => [...document.querySelectorAll('[data-testid="stDataFrame"]')]
  .filter(f => f.querySelector('canvas') && f.getBoundingClientRect().height > 50).length >= n"""


def load_once(browser: object, url: str, charts: int = 1, tab_of: Any = None, frames: int = 0) -> Load:
    page = new_tab(tab_of) if tab_of is not None else new_page(browser)
    page.add_init_script(SCRIPT_DONE_JS)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")
    t0 = time.perf_counter()
    page.goto(url)
    wait_rendered(page, charts=charts, timeout_ms=60000)
    if frames:
        page.wait_for_function(FRAMES_JS, arg=frames, timeout=60000, polling=50)
    elapsed = time.perf_counter() - t0
    if page.locator('[data-testid="stException"]').count():
        raise SystemExit("the Overview shows an exception")
    done = page.evaluate("window.__scriptDone || 0") / 1000
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    page.close()
    return Load(elapsed, done, metrics["TaskDuration"])


@dataclass
class Visits:
    first: list[Load]
    returning: list[Load]


def visits(browser: object, profile: object, url: str, runs: int, charts: int = 1, frames: int = 0) -> Visits:
    """``runs`` first visits and ``runs`` returning visits of ``url``, alternately (drift hits both)."""
    for _ in range(PRIMING_VISITS):
        load_once(browser, url, charts, tab_of=profile, frames=frames)
    out = Visits([], [])
    for _ in range(runs):
        out.first.append(load_once(browser, url, charts, frames=frames))
        settle()
        out.returning.append(load_once(browser, url, charts, tab_of=profile, frames=frames))
        settle()
    return out


def settle() -> None:
    # A closed tab's renderer keeps a core busy for a moment (teardown, GC): let it finish, as it
    # would between two visits of a real user, so it is not counted against the next load.
    time.sleep(SETTLE_S)


BARE_PAGE = "import streamlit as st\nst.write('hello')\n"
# The smallest page that draws what the Overview draws: one text line and one Altair line chart of 10
# points with a tooltip and a scale-bound zoom, the floor of any page that keeps Vega's tooltips and zoom.
ONE_CHART_PAGE = """import altair as alt
import pandas as pd
import streamlit as st

st.write('hello')
rows = pd.DataFrame({'t': pd.date_range('2026-01-01', periods=10, freq='min'), 'v': range(10)})
zoom = alt.selection_interval(bind='scales', encodings=['x'])
st.altair_chart(alt.Chart(rows).mark_line().encode(x='t:T', y='v:Q', tooltip=['t:T', 'v:Q']).add_params(zoom))
"""


@contextlib.contextmanager
def bare_server(script: str = BARE_PAGE) -> Iterator[str]:
    """A one-line Streamlit page (or ``script``) served with the dashboard's own flags: the floor of
    any Streamlit app."""
    with tempfile.TemporaryDirectory() as folder:
        bare = Path(folder) / "bare.py"
        bare.write_text(script)
        port = free_port()
        command = streamlit_command(Settings(), port, "127.0.0.1")
        command[4] = str(bare)  # the script, in place of app/ui/main.py
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_healthy(f"http://127.0.0.1:{port}", proc)
            yield f"http://127.0.0.1:{port}/"
        finally:
            proc.terminate()
            proc.wait(10)


def report(name: str, loads: list[Load]) -> None:
    total = [load.total_s for load in loads]
    print(
        f"{name}: median {statistics.median(total):.2f} s (min {min(total):.2f}, max {max(total):.2f}; "
        f"{len(loads)} runs) · script done {statistics.median(load.script_done_s for load in loads):.2f} s · "
        f"main-thread CPU {statistics.median(load.main_thread_s for load in loads):.2f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="warm loads after the cold one")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the 30-day database")
    parser.add_argument("--fleet", type=int, metavar="N", help="time the Fleet page for N targets instead")
    parser.add_argument("--first-paint", action="store_true", help="the Overview's first paint against a bare page")
    parser.add_argument("--tree", type=Path, action="append", default=[], help="--first-paint: also another checkout's UI")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        print(f"SKIP: no Chromium at {CHROMIUM}")
        return 0
    if args.first_paint:
        return first_paint(args.runs, [ROOT, *args.tree])
    if args.fleet:
        return fleet_page(args.fleet, args.runs)
    now = time.time()
    if args.rebuild or not DB.exists() or now - DB.stat().st_mtime > 3600:
        build(DB, now)  # an hour-old file would show a gap up to now; rebuild it
    url = f"sqlite:///{DB}"
    facade_times(url, time.time())
    from playwright.sync_api import sync_playwright

    with streamlit_server(url) as base, sync_playwright() as playwright, tempfile.TemporaryDirectory() as folder:
        browser = launch(playwright)
        overview = f"{base}/?range=30d"
        cold = load_once(browser, overview)
        profile = launch_profile(playwright, folder)
        month = visits(browser, profile, overview, args.runs)
        hour = visits(browser, profile, f"{base}/?range=1h", args.runs)
        with bare_server() as bare:
            floor = visits(browser, profile, bare, args.runs, charts=0)
        profile.close()
        browser.close()
    print(f"Overview 30 d, cold (first session, first visit): {cold.total_s:.2f} s")
    report("Overview 30 d, warm, returning visitor", month.returning)
    report("Overview 30 d, warm, first visit      ", month.first)
    report("Overview 1 h,  warm, returning visitor", hour.returning)
    report("Overview 1 h,  warm, first visit      ", hour.first)
    report("bare Streamlit page, returning visitor", floor.returning)
    report("bare Streamlit page, first visit      ", floor.first)
    for who, loads in (("returning visitor", month.returning), ("first visit", month.first)):
        median = statistics.median(load.total_s for load in loads)
        print(f"goal ≤ {GOAL_S:.0f} s, Overview 30 d, {who}: {median:.2f} s, {'met' if median <= GOAL_S else 'NOT met'}")
    print(f"machine load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


FLEET_GOAL_S = 3.0


def fleet_page(targets: int, runs: int) -> int:
    """The Fleet page (the landing page beyond three targets) for ``targets`` targets, one day each
    (the page reads the last hour and the verdict window), built by bench/fleet_db.py."""
    from bench import fleet_db

    path = ROOT / "artifacts" / "bench-ui" / f"fleet-{targets}.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        stale.unlink(missing_ok=True)
    built = fleet_db.build(f"sqlite:///{path}", targets, 1.0, time.time())
    print(f"fleet database: {targets} targets × 1 day ({built['write_one_s']:.0f} s + {built['clone_s']:.0f} s to build)")
    from playwright.sync_api import sync_playwright

    with streamlit_server(f"sqlite:///{path}") as base, sync_playwright() as playwright, tempfile.TemporaryDirectory() as folder:
        browser = launch(playwright)
        cold = load_once(browser, f"{base}/", charts=0, frames=2)
        profile = launch_profile(playwright, folder)
        seen = visits(browser, profile, f"{base}/", runs, charts=0, frames=2)
        profile.close()
        browser.close()
    print(f"Fleet {targets} targets, cold (first session, first visit): {cold.total_s:.2f} s")
    report(f"Fleet {targets} targets, warm, returning visitor", seen.returning)
    report(f"Fleet {targets} targets, warm, first visit      ", seen.first)
    for who, loads in (("returning visitor", seen.returning), ("first visit", seen.first)):
        median = statistics.median(load.total_s for load in loads)
        print(f"goal ≤ {FLEET_GOAL_S:.0f} s, Fleet {targets} targets, {who}: {median:.2f} s, "
              f"{'met' if median <= FLEET_GOAL_S else 'NOT met'}")
    print(f"machine load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


FIRST_PAINT_GOAL = 1.3

# Drawn: the script has finished, and every Vega chart of the page has drawn its marks (its canvas or
# SVG has a size, and the SVG holds drawn shapes), or, on a page without charts, its text is there.
# Returns performance.now() (ms since navigation start) at the first animation frame where that holds.
# When the page's parts arrived, in the page's clock: the script started, the first element of the
# main block, the chart's element (Streamlit mounts it once Vega's code has loaded), the script done.
MARKS_JS = """
window.__marks = {};
new MutationObserver(() => {
  const mark = (k) => { if (window.__marks[k] === undefined) window.__marks[k] = performance.now(); };
  const app = document.querySelector('[data-testid="stApp"]');
  if (app && app.getAttribute('data-test-script-state') === 'running') mark('running');
  if (document.querySelector('[data-testid="stMain"] [data-testid="stElementContainer"]')) mark('first_element');
  if (document.querySelector('[data-testid="stVegaLiteChart"]')) mark('chart_element');
  if (document.querySelector('[data-testid="stMain"] [data-testid="stAlert"], [data-testid="stMain"] [data-testid="stAlertContainer"]')) mark('verdict');
}).observe(document, {subtree: true, attributes: true, childList: true});
"""

PAINTED_JS = """([charts, text]) => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  const all = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')];
  const drawn = all.filter(c => {
    const canvas = c.querySelector('canvas, svg.marks');
    if (!canvas || canvas.getBoundingClientRect().height <= 50) return false;
    return canvas.tagName === 'CANVAS' ? canvas.width > 0 : !!canvas.querySelector('path, rect, line');
  });
  if (all.length < charts || drawn.length < all.length) return false;
  if (text && !document.body.innerText.includes(text)) return false;
  return performance.now();
}"""


@dataclass
class Paint:
    drawn_s: float  # navigation start → drawn, in the page's clock
    script_done_s: float
    main_thread_s: float
    requests: int  # resources fetched (scripts, styles, fonts)
    kilobytes: float  # their bytes as sent (compressed)
    running_s: float = math.nan  # the script started (its first delta seen)
    chart_element_s: float = math.nan  # the first chart's element mounted (Vega's code loaded)
    vega_s: float = math.nan  # Vega's embed chunk fetched (responseEnd)
    verdict_s: float = math.nan  # the Overview's verdict line (its coloured box) mounted


def paint_once(browser: Any, url: str, charts: int, text: str) -> Paint:
    """One load in a new browser context (an empty HTTP cache, no code cache): a first visit."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    page = context.new_page()
    page.add_init_script(SCRIPT_DONE_JS)
    page.add_init_script(MARKS_JS)
    cdp = context.new_cdp_session(page)
    cdp.send("Performance.enable")
    page.goto(url)
    drawn = page.wait_for_function(PAINTED_JS, arg=[charts, text], timeout=60000, polling="raf").json_value()
    if page.locator('[data-testid="stException"]').count():
        raise SystemExit(f"{url} shows an exception")
    done = page.evaluate("window.__scriptDone || 0")
    marks = page.evaluate("window.__marks")
    fetched = page.evaluate("performance.getEntriesByType('resource').map(e => e.transferSize)")
    vega = page.evaluate("performance.getEntriesByType('resource').filter(e => /\\/embed\\.[^/]*\\.js$/.test(e.name))"
                         ".map(e => e.responseEnd)")  # fmt: skip
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    context.close()
    seconds = {k: v / 1000 for k, v in marks.items()}
    return Paint(drawn / 1000, done / 1000, metrics["TaskDuration"], len(fetched), sum(fetched) / 1000,
                 seconds.get("running", math.nan), seconds.get("chart_element", math.nan),
                 vega[0] / 1000 if vega else math.nan, seconds.get("verdict", math.nan))  # fmt: skip


@contextlib.contextmanager
def app_ui(tree: Path, db_url: str) -> Iterator[str]:
    """``python -m app ui`` of the checkout at ``tree``, with this interpreter, on a free port."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("SWEETSPOT_CONFIG", None)
    command = [sys.executable, "-m", "app", "ui", "--db", db_url, "--port", str(port), "--address", "127.0.0.1"]
    proc = subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        yield f"http://127.0.0.1:{port}/"
    finally:
        os.killpg(proc.pid, 15)  # the launcher and its streamlit child
        proc.wait(10)


def first_paint(runs: int, trees: list[Path]) -> int:
    from playwright.sync_api import sync_playwright

    folder = tempfile.mkdtemp(prefix="sweetspot-first-paint-")
    db_url = ui_db.fill(Path(folder) / "sweetspot.db", float(int(time.time())))
    with contextlib.ExitStack() as stack:
        pages = {"bare page": (stack.enter_context(bare_server()), 0, "hello"),
                 "one-chart page": (stack.enter_context(bare_server(ONE_CHART_PAGE)), 1, "hello")}  # fmt: skip
        for tree in trees:
            name = "Overview" if tree == ROOT else f"Overview of {tree}"
            pages[name] = (stack.enter_context(app_ui(tree, db_url)), 1, "")
        browser = launch(stack.enter_context(sync_playwright()))
        for url, charts, text in pages.values():  # each server's first session: imports, connections, caches
            paint_once(browser, url, charts, text)
        loads: dict[str, list[Paint]] = {name: [] for name in pages}
        for _ in range(runs):
            for name, (url, charts, text) in pages.items():
                settle()
                loads[name].append(paint_once(browser, url, charts, text))
        browser.close()
    floor = statistics.median(p.drawn_s for p in loads["bare page"])
    one_chart = statistics.median(p.drawn_s for p in loads["one-chart page"])

    def at(values: list[float]) -> str:
        seen = [v for v in values if not math.isnan(v)]
        return f"{statistics.median(seen):.2f} s" if seen else "—"

    for name, paints in loads.items():
        drawn = [p.drawn_s for p in paints]
        median = statistics.median(drawn)
        print(f"{name}: drawn {median:.2f} s median of {len(drawn)} (min {min(drawn):.2f}, max {max(drawn):.2f}) · "
              f"script running {at([p.running_s for p in paints])}, done {at([p.script_done_s for p in paints])} · "
              f"Vega's code fetched {at([p.vega_s for p in paints])}, chart element {at([p.chart_element_s for p in paints])}, "
              f"verdict line {at([p.verdict_s for p in paints])} · "
              f"main-thread CPU {statistics.median(p.main_thread_s for p in paints):.2f} s · "
              f"{statistics.median(p.requests for p in paints):.0f} requests, "
              f"{statistics.median(p.kilobytes for p in paints):,.0f} kB · ratio {median / floor:.2f}")
    print(f"one-chart page: {one_chart / floor:.2f}× the bare page (the floor of any page that draws a Vega chart)")
    for name in list(loads)[2:]:
        median = statistics.median(p.drawn_s for p in loads[name])
        ratio = median / one_chart
        verdict = statistics.median(v for p in loads[name] if not math.isnan(v := p.verdict_s)) if any(
            not math.isnan(p.verdict_s) for p in loads[name]) else math.nan
        print(f"goal ≤ {FIRST_PAINT_GOAL}× the one-chart page, {name}: {ratio:.2f}×, "
              f"{'met' if ratio <= FIRST_PAINT_GOAL else 'NOT met'} ({median / floor:.2f}× the bare page); "
              f"its verdict line at {verdict:.2f} s, {verdict / floor:.2f}× the bare page drawn, before the chart: "
              f"{all(p.verdict_s < p.chart_element_s for p in loads[name])}")
    print(f"machine load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
