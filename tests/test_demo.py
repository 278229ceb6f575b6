"""The README's run command: simulator + backfill + collector (+ UI) from an empty machine, stopped by Ctrl-C."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent


def start_run(db: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "app", "run", "--db", db, *extra], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_line(proc: subprocess.Popen[str], needle: str, timeout: float) -> list[str]:
    seen: list[str] = []
    deadline = time.time() + timeout
    assert proc.stdout is not None
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"{needle!r} not printed; got {seen}")


def stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    return proc.returncode, err


@pytest.mark.slow
def test_demo_backfills_once_collects_live_and_stops_on_ctrl_c(tmp_path):
    db = f"sqlite:///{tmp_path}/demo.db"
    proc = start_run(db, "--no-ui", "--backfill", "6h")
    try:
        lines = wait_for_line(proc, "Ctrl-C stops everything", timeout=240)
        # the history fills in behind the live rounds, which begin before it ends
        lines += wait_for_line(proc, "of simulated history written, rolled up and judged", timeout=240)

        def read_status() -> dict[str, Any]:
            return json.loads(subprocess.run([sys.executable, "-m", "app", "status", "--db", db, "--window", "6h", "--json"],
                                             cwd=ROOT, capture_output=True, text=True, timeout=60).stdout)  # fmt: skip

        at_start = read_status().get("last_scrape_at") or 0.0

        def live_status() -> dict[str, Any] | None:
            """``status``, once it reads a round stored after the one it read at the start line: a live
            round (a condition: at load 20 the fixed 6 s this slept held none)."""
            got = read_status()
            return got if got.get("up") and (got.get("last_scrape_at") or 0.0) > at_start else None

        # read while the collector runs: once it stops, the target reads stale after 2 intervals + the timeout
        status = wait_until(live_status, "a live round after the backfill", watch=[proc])
    finally:
        code, err = stop(proc)
    assert code == 0, err
    text = "".join(lines)
    assert "first start: 6h of simulated history" in text and "serving http://127.0.0.1:" in text
    assert text.index("Ctrl-C stops everything") < text.index("history: 1 day of simulated history written")
    assert "stopped cleanly" in err and "simulator stopped" in err
    assert status["target"] == "demo" and status["up"] is True
    # the weights from the model's shape (37.67 GB a step over TP 8 at 900 GB/s), not a typed 40 GB
    assert status["tokens_per_s"] > 10 and status["ceiling_steps_per_s"] == pytest.approx(191.15, abs=0.01)
    assert len(status["gpus"]) == 8

    second = start_run(db, "--no-ui")
    try:
        lines = wait_for_line(second, "Ctrl-C stops everything", timeout=120)
    finally:
        code, err = stop(second)
    assert code == 0, err
    assert "first start" not in "".join(lines)  # history is written once, not on every start


def test_a_config_naming_real_targets_turns_the_simulator_off(tmp_path):
    from tests.support.http_server import closed_port_url

    config = tmp_path / "real.toml"
    config.write_text(f'[[targets]]\nname = "prod"\nvllm_url = "{closed_port_url()}/metrics"\n')
    proc = subprocess.Popen([sys.executable, "-m", "app", "--config", str(config), "run", "--no-ui",
                             "--db", f"sqlite:///{tmp_path}/real.db"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = wait_for_line(proc, "Ctrl-C stops everything", timeout=60)
    finally:
        code, err = stop(proc)
    assert code == 0, err
    assert "collecting prod" in "".join(lines)
    assert "simulator" not in "".join(lines) + err and "backfill" not in err


def test_first_start_says_nothing_false_and_the_seam_reads_the_live_rate(tmp_path):
    # The backfill's rollup ran before the collector took its turn: "rollup: another collector writes to
    # this database" on every first start. The first live round after the history counted the live
    # simulator's tokens since it started over the time since the last backfilled sample: a dip.
    import sqlite3

    db = tmp_path / "first.db"
    proc = start_run(f"sqlite:///{db}", "--no-ui", "--backfill", "10m")
    try:
        lines = wait_for_line(proc, "Ctrl-C stops everything", timeout=120)
        deadline = time.time() + 90
        while True:  # three live rounds after the backfilled ones (every 30 s; live every 5 s)
            with sqlite3.connect(db) as conn:
                rows = conn.execute("SELECT ts, generation_tokens, covered_ms FROM samples ORDER BY ts").fetchall()
            gaps = [b[0] - a[0] for a, b in zip(rows, rows[1:], strict=False)]
            live = [r for r, gap in zip(rows[1:], gaps, strict=True) if gap < 20]
            if len(live) >= 4:
                break
            assert time.time() < deadline, rows[-5:]
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    text = "".join(lines) + out
    assert "another collector" not in text and "history: 1 day of simulated history written, rolled up and judged" in text
    last_backfilled, seam = rows[len(rows) - len(live) - 2], rows[len(rows) - len(live) - 1]
    # the first live round's tokens came since the live simulator started (seconds before), not over the
    # half minute and more since the last backfilled sample (which read ~2.6 tok/s for a steady ~27)
    assert seam[0] - last_backfilled[0] >= 20 and 0 < seam[2] < 15_000, (last_backfilled, seam)
