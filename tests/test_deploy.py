"""The stack: compose.yaml checked against the CLI, the health command, the UI's public-address guard."""

from __future__ import annotations

import argparse
import http.server
import socketserver
import threading
import time
from pathlib import Path

import pytest
import yaml

from app.cli import build_parser, main
from app.commands.health import collector_health
from app.commands.ui import refuse_open_public
from app.loader import load_settings
from core.errors import UsageError
from core.settings import Settings, UiSettings
from db.engine import open_engine
from db.writer import Writer
from tests.store_helpers import failed_round, vllm_round

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]


def _app_args(argv: list[str]) -> argparse.Namespace:
    """The arguments a container's command line gives `python -m app` (a typo fails to parse)."""
    try:
        return build_parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"`python -m app {' '.join(argv)}` is not a valid command line")


def _health_argv(service: dict) -> list[str]:
    test = service["healthcheck"]["test"]
    assert test[:4] == ["CMD", "python", "-m", "app"], test
    return test[4:]


def test_the_collector_runs_collect_and_is_healthy_when_health_says_so():
    collector = SERVICES["collector"]
    assert _app_args(collector["command"]).command == "collect"
    assert _app_args(_health_argv(collector)).command == "health"


def test_the_ui_listens_on_the_published_port_and_checks_itself():
    ui = SERVICES["ui"]
    args = _app_args(ui["command"])
    assert args.command == "ui" and args.address == "0.0.0.0"
    published = {p.split(":")[-1] for p in ui["ports"]}
    assert published == {str(args.port)}
    health = _app_args(_health_argv(ui))
    assert health.command == "health" and health.ui
    # `health --ui` asks the port the settings name: the one the command line serves on
    assert load_settings(ROOT / "deploy" / "sweetspot.example.toml", {}).ui.port == args.port


def test_postgres_keeps_its_data_on_a_volume_and_is_waited_for():
    postgres = SERVICES["postgres"]
    volume = postgres["volumes"][0].split(":")[0]
    assert volume in COMPOSE["volumes"]
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    for name in ("collector", "ui"):
        assert SERVICES[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
        env = SERVICES[name]["environment"]
        # the password apart from the URL, which logs and the dashboard show
        assert env["SWEETSPOT_DB_URL"] == "postgresql://sweetspot@postgres:5432/sweetspot"
        assert env["SWEETSPOT_DB_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
        assert "POSTGRES_PASSWORD" not in env["SWEETSPOT_DB_URL"]
        mounted = [v.split(":")[1] for v in SERVICES[name]["volumes"]]
        assert env["SWEETSPOT_CONFIG"] in mounted


def test_secrets_come_from_the_environment_only():
    text = (ROOT / "deploy" / "compose.yaml").read_text()
    for secret in ("POSTGRES_PASSWORD", "SWEETSPOT_UI_PASSWORD", "SWEETSPOT_SMTP_PASSWORD"):
        assert f"${{{secret}" in text
    assert "password" not in (ROOT / "deploy" / "sweetspot.example.toml").read_text().lower()


def test_the_dockerfile_has_a_healthcheck_the_cli_understands():
    line = next(x for x in (ROOT / "Dockerfile").read_text().splitlines() if x.startswith("HEALTHCHECK"))
    argv = line.split("CMD", 1)[1].strip().strip("[]").replace('"', "").split(", ")
    assert argv[:3] == ["python", "-m", "app"]
    assert _app_args(argv[3:]).command == "health"


def _settings(tmp_path: Path, interval_s: float = 5.0) -> Settings:
    return Settings(db_url=f"sqlite:///{tmp_path}/h.db", interval_s=interval_s)


def _store(settings: Settings, *rounds) -> None:
    engine = open_engine(settings.db_url)
    writer = Writer(engine)
    writer.write_rounds(rounds)
    writer.close()
    engine.dispose()


def test_health_is_good_within_three_intervals_and_says_why_not_after(tmp_path):
    settings = _settings(tmp_path)
    open_engine(settings.db_url).dispose()
    healthy, reason = collector_health(settings, time.time())
    assert not healthy and "no round stored" in reason and "collect" in reason
    now = time.time()
    _store(settings, vllm_round(now - 12, 10.0))
    assert collector_health(settings, now)[0]
    healthy, reason = collector_health(settings, now + 10)  # 22 s > 3 × 5 s
    assert not healthy and "3 × interval_s" in reason and "collector running" in reason


def test_a_failed_round_is_still_a_round_written(tmp_path):
    # the collector is alive and writing; the target's own health is the verdict's business
    settings = _settings(tmp_path)
    now = time.time()
    _store(settings, failed_round(now - 1))
    assert collector_health(settings, now)[0]


def test_health_command_exit_status(tmp_path, capsys):
    db = f"sqlite:///{tmp_path}/c.db"
    open_engine(db).dispose()
    assert main(["health", "--db", db]) == 1
    assert "UNHEALTHY: no round stored" in capsys.readouterr().err
    _store(Settings(db_url=db), vllm_round(time.time(), 1.0))
    assert main(["health", "--db", db]) == 0
    assert capsys.readouterr().out.startswith("healthy: ")


def test_ui_health_reports_a_dashboard_that_does_not_answer(capsys, tmp_path):
    from tests.support.http_server import closed_port_url

    port = closed_port_url().split(":")[2].split("/")[0]
    config = tmp_path / "c.toml"
    config.write_text(f"[ui]\nport = {port}\n")
    assert main(["health", "--ui", "--config", str(config)]) == 1
    assert "does not answer" in capsys.readouterr().err


def test_ui_health_checks_the_port_it_is_given(capsys):
    # `run --port 8502` then `health --ui` checked 8501 only, and had no --port
    from tests.support.http_server import closed_port_url

    port = closed_port_url().split(":")[2].split("/")[0]
    assert main(["health", "--ui", "--port", port]) == 1
    assert f"127.0.0.1:{port}/_stcore/health" in capsys.readouterr().err
    with socketserver.TCPServer(("127.0.0.1", 0), _Healthy) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            assert main(["health", "--ui", "--port", str(server.server_address[1])]) == 0
        finally:
            server.shutdown()
    assert capsys.readouterr().out.startswith("healthy: the dashboard answers at")
    assert main(["health", "--port", "8502"]) == 2  # the collector's health has no port


class _Healthy(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the stdlib's name
        self.send_response(200 if self.path == "/_stcore/health" else 404)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


# every spelling of "all interfaces" getaddrinfo accepts, IPv4-mapped ones, and LAN addresses
EXPOSED = ["0", "0.0.0.0", "::", "[::]", "0000::", "0:0:0:0:0:0:0:0", "0x0", "000.000.000.000", "0.0", "::ffff:0.0.0.0",
           "[::ffff:0.0.0.0]", "", " ", "192.168.1.20", "10.0.0.5", "172.16.0.1", "192.0.2.7", "fe80::1%1", "2001:db8::1"]
LOOPBACK = ["127.0.0.1", "127.1", "127.0.0.2", "0x7f000001", "2130706433", "::1", "[::1]", "localhost", "::ffff:127.0.0.1"]


@pytest.mark.parametrize("address", EXPOSED)
def test_the_ui_refuses_an_exposed_address_without_a_password(address, tmp_path, capsys):
    # the real command line: it stops before Streamlit starts, with one line
    assert main(["ui", "--address", address, "--db", f"sqlite:///{tmp_path}/u.db"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ERROR: refusing to serve the dashboard on ") and "\n" not in err
    assert "SWEETSPOT_UI_PASSWORD" in err and "ui.allow_public" in err and "127.0.0.1" in err
    refuse_open_public(Settings(ui_password="x"), address)
    refuse_open_public(Settings(ui=UiSettings(allow_public=True)), address)


@pytest.mark.parametrize("address", LOOPBACK)
def test_loopback_needs_no_password(address):
    refuse_open_public(Settings(), address)


def test_a_host_name_counts_for_the_addresses_it_resolves_to(monkeypatch):
    import socket

    real = socket.getaddrinfo  # a LAN name, as a resolver would answer it (no DNS in tests)
    lan = {"dashboard.lan": "192.168.1.20", "both.lan": "127.0.0.1"}
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: real(lan.get(host, host), *a, **k)
                        + (real("10.1.2.3", *a, **k) if host == "both.lan" else []))
    for name in ("dashboard.lan", "both.lan"):
        with pytest.raises(UsageError, match="reachable from other machines"):
            refuse_open_public(Settings(), name)
    with pytest.raises(UsageError, match="does not resolve"):
        refuse_open_public(Settings(), "no-such-host.invalid")


def test_ui_command_refuses_before_starting_streamlit(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "app", "ui", "--address", "0.0.0.0", "--db", f"sqlite:///{tmp_path}/u.db"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin"})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().startswith("ERROR: refusing to serve the dashboard on '0.0.0.0' (every interface) without a password")
