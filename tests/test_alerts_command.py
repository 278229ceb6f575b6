"""``python -m app alerts ...`` and ``status`` over a database the evaluator wrote (real SQLite file)."""

from __future__ import annotations

import json
import time

import pytest

from app.alerts.evaluator import Evaluator
from app.cli import main
from core.settings import Settings, TargetSettings
from db.engine import open_engine
from db.writer import Writer
from tests.store_helpers import failed_round, vllm_round


@pytest.fixture(scope="module")
def now() -> int:
    # taken when the module's tests start, not at import: collection can come minutes earlier
    return int(time.time()) // 5 * 5


@pytest.fixture(scope="module")
def db(tmp_path_factory, now):
    """Target ``t`` preempting for the last minute; ``edge`` down for three minutes (firing)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('alerts')}/a.db"
    engine = open_engine(url)
    writer = Writer(engine)
    targets = tuple(TargetSettings(name=n, vllm_url="http://127.0.0.1:1/metrics") for n in ("t", "edge"))
    for target in targets:
        writer.register_target(target)
    for ts in range(now - 600, now, 5):
        preempted = float(max(0, (ts - (now - 60)) // 5 + 1))
        writer.write_round(vllm_round(ts, gen=float(ts - now + 600) * 100, preemptions=preempted))
        down = ts >= now - 180
        writer.write_round(failed_round(ts, target="edge") if down else vllm_round(ts, gen=float(ts), target="edge"))
    evaluator = Evaluator(engine, Settings(db_url=url, targets=targets))
    evaluator.evaluate_once(now - 120)
    evaluator.evaluate_once(now)
    writer.close()
    engine.dispose()
    return url


def run(capsys, *args: str) -> tuple[int, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out + out.err


def test_list_json_has_the_documented_keys(db, capsys, now):
    code, out = run(capsys, "alerts", "list", "--json", "--db", db)
    assert code == 0
    alerts = {(a["target"], a["rule"]): a for a in json.loads(out)}
    assert set(alerts) == {("t", "preemptions"), ("edge", "target_down")}
    p = alerts[("t", "preemptions")]
    assert {"rule", "target", "model", "state", "severity", "since", "value", "threshold", "silenced"} <= set(p)
    assert (p["state"], p["severity"], p["since"], p["value"], p["threshold"], p["silenced"]) == (
        "firing", "critical", now, 12.0, 0.0, False,
    )  # fmt: skip


def test_silence_add_list_expire_and_list_shows_it_silenced(db, capsys):
    code, out = run(capsys, "alerts", "--db", db, "silence", "add", "--target", "edge", "--comment", "rebuild",
                    "--duration", "1h", "--author", "ops")  # fmt: skip
    assert code == 0 and out.startswith("silence ")
    sid = out.split()[1].rstrip(":")
    assert "active  {'target': 'edge'}" in run(capsys, "alerts", "silence", "list", "--db", db)[1]
    alerts = {a["target"]: a for a in json.loads(run(capsys, "alerts", "list", "--json", "--db", db)[1])}
    assert alerts["edge"]["silenced"] is True and alerts["edge"]["silenced_by"] == f"silence {sid}"
    assert alerts["t"]["silenced"] is False
    assert run(capsys, "alerts", "silence", "expire", sid, "--db", db) == (0, f"silence {sid} expired\n")
    code, out = run(capsys, "alerts", "silence", "expire", sid, "--db", db)
    assert code == 2 and out.startswith(f"ERROR: no silence {sid} in force")


def test_a_silence_without_matchers_is_refused(db, capsys):
    code, out = run(capsys, "alerts", "silence", "add", "--comment", "x", "--db", db)
    assert code == 2 and "needs at least one of --rule" in out


def test_history_lists_transitions_with_from_to_at_value(db, capsys, now):
    rows = json.loads(run(capsys, "alerts", "history", "--since", "1h", "--json", "--db", db)[1])
    fired = [r for r in rows if r["rule"] == "preemptions" and r["to"] == "firing"]
    assert [(r["target"], r["from"], r["at"], r["value"]) for r in fired] == [("t", "inactive", now, 12.0)]
    down = [(r["from"], r["to"], r["at"]) for r in rows if r["target"] == "edge" and r["rule"] == "target_down"]
    # down since now - 180: at the first evaluation its spell (from the last good scrape) is past `for` already
    assert down == [("inactive", "firing", now - 120)]
    assert "t preemptions: inactive → firing" in run(capsys, "alerts", "history", "--db", db)[1]


def test_rules_prints_each_rule_with_its_source(db, capsys):
    code, out = run(capsys, "alerts", "rules", "--db", db)
    assert code == 0
    assert "ttft_p95           critical client_ttft_p95_s > ttft_p95_slo_s  (window 5m, for 2m, keep firing 1m; default)" in out


def test_backtest_replays_the_stored_history(db, capsys):
    code, out = run(capsys, "alerts", "backtest", "preemptions", "--since", "15m", "--step", "30s", "--target", "t", "--db", db)
    assert code == 0, out
    assert "would have fired 1 time(s)" in out
    code, out = run(capsys, "alerts", "backtest", "nope", "--target", "t", "--db", db)
    assert code == 2 and "no rule named 'nope'" in out


def test_status_reports_the_verdict_first_and_state_and_reasons_in_json(db, capsys):
    code, out = run(capsys, "status", "--target", "t", "--db", db)
    assert code == 0
    assert out.startswith("t: outside the sweet spot over 5m: preemptions over 5m ")
    code, out = run(capsys, "status", "--target", "t", "--json", "--db", db)
    data = json.loads(out)
    assert code == 0 and data["state"] == "outside"
    assert any(r.startswith("preemptions over 5m ") and r.endswith(" > 0") for r in data["reasons"])
    code, out = run(capsys, "status", "--target", "edge", "--json", "--db", db)
    assert code == 0 and json.loads(out)["state"] == "no_data"  # exit 0 whatever the state
    assert "the target is down" in json.loads(out)["reasons"][0]


def test_status_reasons_name_the_window_they_were_computed_over(db, capsys):
    # the rules' own window is 5m; --window 3m computes every figure over 3m, and says so
    code, out = run(capsys, "status", "--target", "t", "--window", "3m", "--db", db)
    assert code == 0 and out.startswith("t: outside the sweet spot over 3m: preemptions over 3m "), out
    assert "over 5m" not in out
    code, out = run(capsys, "status", "--target", "t", "--window", "3m", "--json", "--db", db)
    assert code == 0, out
    reasons = json.loads(out)["reasons"]
    assert any(r.startswith("preemptions over 3m ") for r in reasons) and not any("5m" in r for r in reasons)
    code, out = run(capsys, "status", "--all", "--window", "3m", "--db", db)
    assert "preemptions over 3m" in out and "over 5m" not in out


def test_rules_show_each_targets_thresholds_and_where_they_come_from(db, capsys, tmp_path):
    config = tmp_path / "sweetspot.toml"
    config.write_text(
        '[sweetspot]\nconcurrency = 24\n'
        '[[targets]]\nname = "big"\nvllm_url = "http://127.0.0.1:1/metrics"\n[targets.sweetspot]\nttft_p95_slo_s = "5s"\n'
        '[[targets]]\nname = "small"\nvllm_url = "http://127.0.0.1:2/metrics"\n'
    )
    code, out = run(capsys, "--config", str(config), "alerts", "rules", "--db", db)
    assert code == 0, out
    big, small = out.split("small:")
    assert "where ttft_p95_slo_s = 5 s (target override)" in big
    assert "where ttft_p95_slo_s = 3 s (default)" in small
    assert "where concurrency = 24 requests (file)" in big and "where concurrency = 24 requests (file)" in small
    code, out = run(capsys, "--config", str(config), "alerts", "rules", "--target", "big", "--json", "--db", db)
    ttft = next(r for r in json.loads(out)["big"] if r["name"] == "ttft_p95")
    assert ttft["thresholds"] == {"ttft_p95_slo_s": {"value": 5.0, "source": "target override"}}


def _damaged(tmp_path, how: str) -> str:
    """A database file damaged in one of the ways disks and copies damage them."""
    import os
    import shutil

    good = tmp_path / "good.db"
    writer = Writer(open_engine(f"sqlite:///{good}"))
    writer.register_target(TargetSettings(name="t", vllm_url="http://127.0.0.1:1/metrics"))
    writer.write_round(vllm_round(1_800_000_000, 1.0))
    writer.close()
    path = tmp_path / f"{how}.db"
    shutil.copy(good, path)
    data = bytearray(path.read_bytes())
    if how == "garbage":
        data = bytearray(b"SQLite format 3\0" + os.urandom(8192))
    elif how == "truncated":
        data = data[: len(data) // 3]
    elif how == "schema-page":
        data[100:4096] = os.urandom(3996)
    elif how == "not-sqlite":
        data = bytearray(b"%PDF-1.4\n" * 500)
    path.write_bytes(bytes(data))
    return f"sqlite:///{path}"


@pytest.mark.parametrize("how", ["garbage", "truncated", "schema-page", "not-sqlite"])
@pytest.mark.parametrize("command", [["alerts", "list"], ["alerts", "history"], ["alerts", "silence", "list"], ["alerts", "rules"]])
def test_a_damaged_database_is_one_line_for_every_alerts_command(tmp_path, how, command):
    import subprocess
    import sys

    db_url = _damaged(tmp_path, how)
    done = subprocess.run([sys.executable, "-m", "app", *command, "--db", db_url], capture_output=True, text=True, timeout=60)
    if done.returncode == 0:  # a damage this command's reads never reach (the rules are the settings')
        assert "Traceback" not in done.stderr
        return
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("ERROR: ") and done.stderr.count("\n") == 1, done.stderr
    assert "damaged" in done.stderr or "database error while" in done.stderr or "no Sweetspot tables" in done.stderr
