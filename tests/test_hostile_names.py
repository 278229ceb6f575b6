"""Names from outside are data: a model name served by a hostile ``/metrics`` page, a target name and
a rule name from the configuration file, each holding CR/LF, an escape sequence and header text,
go through the real collector, evaluator and notifier into aiosmtpd; the e-mail arrives, its
headers hold only what the product put there, and every name is shown as the text it is."""

from __future__ import annotations

import csv
import dataclasses
import io
import logging
import time
from pathlib import Path

import pytest

from app.cli import main
from app.collection import CollectionService
from app.loader import load_settings
from core.settings import ConfigError, Settings, TargetSettings
from core.text import LogFormatter, csv_cell, header, markdown, markdown_code, reads_the_same_in_markdown, visible
from tests.support.http_server import serve as serve_http
from tests.support.smtp_server import Mailbox
from tests.support.smtp_server import serve as serve_smtp

T0 = 1_764_000_000.0
# as a /metrics page spells it: \n is the exposition format's escape of LF; CR and ESC are raw
MODEL_EXPOSED = 'evil\r\\nBcc: victim@example.test\\n\x1b[2J'
MODEL = "evil\r\nBcc: victim@example.test\n\x1b[2J"
TARGET = "prod\r\nX-Injected: target"
RULE = "storm\r\nX-Injected: rule"
V1 = (Path(__file__).parent / "data" / "vllm_v1.txt").read_text()


def page(preemptions: float) -> str:
    text = V1.replace("meta-llama/Llama-3.3-70B-Instruct-AWQ", MODEL_EXPOSED)
    return text.replace('vllm:num_preemptions_total{engine="0",model_name="' + MODEL_EXPOSED + '"} 3.0',
                        'vllm:num_preemptions_total{engine="0",model_name="' + MODEL_EXPOSED + f'"}} {preemptions}')  # fmt: skip


def config(tmp_path: Path, url: str, smtp_port: int, rule: str = RULE, target: str = TARGET) -> Path:
    path = tmp_path / "hostile.toml"
    path.write_text(f"""
db_url = "sqlite:///{tmp_path}/h.db"
interval_s = "5s"

[alerts]
evaluate_every_s = "5s"

[alerts.email]
host = "127.0.0.1"
port = {smtp_port}
tls = "none"
from_address = "sweetspot@example.test"
to = ["ops@example.test"]
group_wait_s = "0s"

[[alerts.rules]]
name = "kv_cache"
enabled = false

[[alerts.rules]]
name = "kv_cache_critical"
enabled = false

[[alerts.rules]]
name = "concurrency"
enabled = false

[[alerts.rules]]
name = "{rule.encode('unicode_escape').decode()}"
expr = "preemptions"
op = ">"
threshold = 0
per_model = true

[[targets]]
name = "{target.encode('unicode_escape').decode()}"
vllm_url = "{url}"
""")
    return path


def test_hostile_names_cost_no_alert_email(tmp_path, capsys):
    routes = {"/metrics": (200, "text/plain; version=0.0.4", page(3.0))}
    mailbox = Mailbox()
    with serve_http(routes) as base, serve_smtp(mailbox) as smtp_port:
        # The file refuses such names now (tests/test_target_names.py, test_rules_export_hostile.py):
        # put them in past the load, for the sinks to show they hold whatever a name brings.
        with pytest.raises(ConfigError, match=r"targets\[0\]\.name|alerts\.rules\[3\]\.name"):
            load_settings(config(tmp_path, f"{base}/metrics", smtp_port), {})
        settings = load_settings(config(tmp_path, f"{base}/metrics", smtp_port, "storm", "prod"), {})
        rules = tuple(dataclasses.replace(r, name=RULE) if r.name == "storm" else r for r in settings.alerts.rules)
        settings = dataclasses.replace(settings, targets=(dataclasses.replace(settings.targets[0], name=TARGET),),
                                       alerts=dataclasses.replace(settings.alerts, rules=rules))
        now = [T0]
        service = CollectionService(settings, clock=lambda: now[0])
        try:
            for step in range(8):
                now[0] = T0 + 5 * step
                routes["/metrics"] = (200, "text/plain; version=0.0.4", page(3.0 + 4 * max(0, step - 2)))
                service.collect_once(describe=False)
                service.evaluator.run()
                service.notifier.run_once()
        finally:
            service.close()
    assert mailbox.messages, "no alert e-mail arrived"
    for msg, envelope in zip(mailbox.messages, mailbox.envelopes, strict=True):
        headers = (envelope.original_content or b"").split(b"\r\n\r\n")[0].decode()
        names = [line.split(":")[0] for line in headers.split("\r\n") if line and not line[0].isspace()]
        assert not {"Bcc", "X-Injected"} & set(names), headers
        assert "\x1b" not in headers and envelope.rcpt_tos == ["ops@example.test"]
        assert "prod\\r\\nX-Injected: target" in str(msg["Subject"])
    text = "\n".join(m.get_body(("plain",)).get_content() for m in mailbox.messages)
    # the per-model alert and the hostile rule's: each name shown once as the text it is, on one line
    assert "storm\\r\\nX-Injected: rule" in text
    assert "evil\\r\\nBcc: victim@example.test\\n\\x1b[2J" in text
    assert "\x1b" not in text and "\nBcc:" not in text and "\nX-Injected" not in text
    # the same alerts in the terminal: each on its own lines, the per-model one naming its model
    path = str(config(tmp_path, "http://127.0.0.1:1/metrics", 25, "storm", "prod"))
    listed = run_cli(capsys, "--config", path, "alerts", "list") + run_cli(capsys, "--config", path, "alerts", "history")
    assert "prod\\r\\nX-Injected: target / model evil\\r\\nBcc: victim@example.test\\n\\x1b[2J storm\\r\\nX-Injected: rule" in listed
    assert "\nX-Injected" not in listed and "\nBcc" not in listed


def test_a_line_break_in_the_recipients_is_one_line_naming_the_setting(monkeypatch, capsys):
    mailbox = Mailbox()
    with serve_smtp(mailbox) as port:
        for name, value in {"SWEETSPOT_SMTP_HOST": "127.0.0.1", "SWEETSPOT_SMTP_PORT": str(port), "SWEETSPOT_SMTP_TLS": "none",
                            "SWEETSPOT_ALERT_FROM": "s@example.test",
                            "SWEETSPOT_ALERT_TO": "ops@example.test\r\nBcc: victim@example.test"}.items():  # fmt: skip
            monkeypatch.setenv(name, value)
        assert main(["alerts", "test-email"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR: alerts.email.to: ") and "SWEETSPOT_ALERT_TO" in err and len(err.splitlines()) == 1
    assert "Traceback" not in err and mailbox.messages == []


def test_each_sink_gets_the_name_as_the_text_it_is():
    name = "llama\r\n\x1b[2J\x07\u202e"
    assert visible(name) == "llama\\r\\n\\x1b[2J\\x07\\u202e"
    assert visible("x" * 500) == "x" * 199 + "…" and len(header("y" * 900)) == 250
    assert [csv_cell(v) for v in ("=cmd|' /C calc'!A0", "@SUM(A1)", "+1", "-2", "\tx", "\rx", "ok", -3, None)] == [
        "'=cmd|' /C calc'!A0", "'@SUM(A1)", "'+1", "'-2", "'\tx", "'\rx", "ok", -3, None]  # fmt: skip
    assert markdown("![x](x.png) :red[y]") == r"\!\[x\](x.png) \:red\[y\]"
    # a link's shape (GFM would link it whatever the escapes): a code span, where nothing is a link
    assert markdown("![x](http://127.0.0.1:9/x.png) :red[y]") == "`![x](http://127.0.0.1:9/x.png) :red[y]`"
    assert markdown("12. b") == r"12\. b" and markdown("- a") == r"\- a"
    assert markdown("meta-llama/Llama-3.3-70B (5m: 12 > 0)") == "meta-llama/Llama-3.3-70B (5m: 12 > 0)"  # no markup: as is
    assert markdown_code("a`b``c") == "```a`b``c```" and reads_the_same_in_markdown("- x") is False
    record = logging.LogRecord("t", logging.INFO, __file__, 1, "target %s down", (name,), None)
    assert LogFormatter("%(message)s").format(record) == "target llama\\r\\n\\x1b[2J\\x07\\u202e down"


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory):
    """A database written by the real collector from a page serving the hostile model name, for a
    target whose name holds CR/LF and a clear-screen sequence; the page stays served for inspect."""
    db_url = f"sqlite:///{tmp_path_factory.mktemp('hostile')}/h.db"
    routes = {"/metrics": (200, "text/plain; version=0.0.4", page(3.0))}
    with serve_http(routes) as base:
        target = TargetSettings(name=SCREEN_TARGET, vllm_url=f"{base}/metrics")
        now = [time.time() - 60]
        service = CollectionService(Settings(db_url=db_url, targets=(target,)), clock=lambda: now[0])
        try:
            for step in range(3):
                now[0] += 5
                routes["/metrics"] = (200, "text/plain; version=0.0.4", page(3.0 + step))
                service.collect_once(describe=False)
        finally:
            service.close()
        yield db_url, f"{base}/metrics"


SCREEN_TARGET = "prod\r\n\x1b[2Jx"


def run_cli(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out, out
    return out


def test_terminal_escapes_in_names_are_shown_not_run(hostile_db, capsys):
    db_url, page_url = hostile_db
    shown = "prod\\r\\n\\x1b[2Jx"
    out = run_cli(capsys, "status", "--db", db_url)
    assert out.startswith(f"{shown}: ") and f"\n{shown}: figures over 5m" in out
    assert shown in run_cli(capsys, "status", "--db", db_url, "--all")
    table = run_cli(capsys, "query", "--db", db_url, "SELECT target, models FROM target_info")
    assert table.splitlines()[2].startswith(shown)
    models = run_cli(capsys, "inspect", page_url)
    assert "models   evil\\r\\nBcc: victim@example.test\\n\\x1b[2J\n" in models


def test_query_csv_neutralises_formula_cells(hostile_db, capsys):
    db_url, _ = hostile_db
    sql = "SELECT '=cmd|'' /C calc''!A0' AS f, '@SUM(A1:A9)' AS g, -3 AS n, target FROM target_info"
    assert main(["query", "--db", db_url, "--format", "csv", sql]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out, newline="")))
    assert rows[1] == ["'=cmd|' /C calc'!A0", "'@SUM(A1:A9)", "-3", SCREEN_TARGET]  # the name kept exactly, quoted
