"""`make run` to the Overview's first answer, with the virtual environment present, and the ETA of
the demo's history against when it really ended; beside the same figures of another checkout (the
anchor: ``--anchor PATH``, e.g. ``git archive main`` unpacked into a folder, measured in the same run).

For each tree: ``make -o .venv/.runtime run`` (``-o``: the environment is there, nothing installed)
with an empty SQLite file (SWEETSPOT_DB_URL) and a free PORT; headless Chromium (tests/browser.py)
opens the dashboard as soon as its health check answers, and the time is taken when the Overview is
drawn with its chart (tests/browser.py ``wait_rendered``). Every line the run prints is stamped as
it arrives: the first ETA ("about N s left") is compared with the line that says the history is
whole. Prints the load average with each figure: the machine is shared.

Usage: .venv/bin/python bench/bench_first_answer.py [--anchor PATH]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser import launch, new_page, wait_rendered  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

ETA_NEW = re.compile(r"about (\d+) s left")
ETA_OLD = re.compile(r"ETA ([\d.]+) (s|min)")
DONE = ("of simulated history written, rolled up and judged", "minutes of the history judged")


def healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def stamp(stream: object, lines: list[tuple[float, str]]) -> threading.Thread:
    def read() -> None:
        for line in stream:  # type: ignore[attr-defined]
            lines.append((time.time(), line.rstrip()))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def measure(tree: Path, browser: object) -> dict[str, float | None]:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="sweetspot-first-") as folder:
        env = {**os.environ, "PORT": str(port), "SWEETSPOT_DB_URL": f"sqlite:///{folder}/demo.db"}
        lines: list[tuple[float, str]] = []
        began = time.time()
        proc = subprocess.Popen(["make", "-o", ".venv/.runtime", "run"], cwd=tree, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        stamp(proc.stdout, lines)
        base = f"http://127.0.0.1:{port}"
        try:
            while not healthy(base):
                if proc.poll() is not None or time.time() - began > 1800:
                    raise SystemExit(f"{tree}: the dashboard never answered:\n" + "\n".join(t for _, t in lines[-20:]))
                time.sleep(0.2)
            served = time.time()
            page = new_page(browser)
            page.goto(base)
            wait_rendered(page, 1, timeout_ms=600000)
            answered = time.time()
            page.close()
            while not any(any(d in text for d in DONE) for _, text in lines):
                if proc.poll() is not None or time.time() - began > 1800:
                    raise SystemExit(f"{tree}: the history never finished")
                time.sleep(0.5)
        finally:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=120)
    ended = next(t for t, text in lines if any(d in text for d in DONE))
    eta = _first_eta(lines)
    out: dict[str, float | None] = {"served_s": served - began, "overview_s": answered - began,
                                    "history_s": ended - began, "eta_error": None, "eta_said_s": None}  # fmt: skip
    if eta is not None:
        at, said = eta
        out["eta_said_s"], out["eta_left_s"] = said, ended - at
        out["eta_error"] = (said - (ended - at)) / (ended - at)
    return out


def _first_eta(lines: list[tuple[float, str]]) -> tuple[float, float] | None:
    for at, text in lines:
        if m := ETA_NEW.search(text):
            return at, float(m[1])
        if m := ETA_OLD.search(text):
            return at, float(m[1]) * (60 if m[2] == "min" else 1)
    return None


def show(name: str, r: dict[str, float | None], load: tuple[float, float, float]) -> None:
    eta = ("no ETA printed" if r["eta_error"] is None else
           f"first ETA {r['eta_said_s']:.0f} s left, really {r['eta_left_s']:.0f} s ({100 * r['eta_error']:+.0f} %)")
    print(f"{name}: dashboard answering {r['served_s']:.1f} s, Overview drawn {r['overview_s']:.1f} s, history whole "
          f"{r['history_s']:.1f} s; {eta}; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}", flush=True)


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--anchor", type=Path, help="another checkout to measure in the same run (its .venv present)")
    args = parser.parse_args()
    with sync_playwright() as playwright:
        browser = launch(playwright)
        for name, tree in (("this tree", ROOT), *((("anchor", args.anchor),) if args.anchor else ())):
            load = os.getloadavg()
            show(name, measure(tree, browser), load)
        browser.close()


if __name__ == "__main__":
    main()
