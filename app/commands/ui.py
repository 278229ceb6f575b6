"""``python -m app ui``: start the Streamlit dashboard (app/ui/main.py) in a child process.

The child gets its settings through the environment the loader already honours
(SWEETSPOT_CONFIG, SWEETSPOT_DB_URL, SWEETSPOT_UI_PASSWORD), so it loads exactly what this
process loaded, --db included.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from core.errors import UsageError
from core.redact import masked
from core.settings import ENV_CONFIG, ENV_DB_PASSWORD, ENV_DB_URL, ENV_UI_PASSWORD, Settings

HELP = "start the dashboard in the browser (Streamlit) and print its URL"
ROOT = Path(__file__).resolve().parents[2]
MAIN = ROOT / "app" / "ui" / "main.py"
# Addresses that accept connections from other machines on every interface.
PUBLIC_ADDRESSES = ("0.0.0.0", "::", "")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="URL", help="database URL (overrides db_url)")
    parser.add_argument("--port", type=int, help="port to listen on (default: ui.port)")
    parser.add_argument("--address", help="address to bind (default: ui.address)")


def streamlit_command(settings: Settings, port: int, address: str) -> list[str]:
    """The ``streamlit run`` command line: headless, no telemetry, bound where the settings say."""
    return [
        sys.executable, "-m", "streamlit", "run", str(MAIN),
        "--server.port", str(port), "--server.address", address, "--server.headless", "true",
        "--browser.gatherUsageStats", "false", "--global.developmentMode", "false",
        # Ops people get the dashboard, not Streamlit's "Deploy" button and developer menu.
        "--client.toolbarMode", "viewer",
        # Nobody edits the dashboard's scripts while it serves; watching them only costs CPU (without
        # the watchdog package Streamlit polls every file of the app).
        "--server.fileWatcherType", "none",
    ]  # fmt: skip


def refuse_open_public(settings: Settings, address: str) -> None:
    """Refuse to serve the dashboard to every interface with no password, unless asked explicitly.

    A container publishes its port to the network: an open dashboard there shows every target's
    figures and configuration to anyone who finds it.
    """
    if address in PUBLIC_ADDRESSES and not settings.ui_password and not settings.ui.allow_public:
        raise UsageError(
            f"refusing to serve the dashboard on {address or 'every address'} without a password",
            f"set {ENV_UI_PASSWORD}, or ui.allow_public = true to serve it open on purpose",
        )


def child_environment(args: argparse.Namespace, settings: Settings, environ: dict[str, str]) -> dict[str, str]:
    env = dict(environ)
    if args.config:
        env[ENV_CONFIG] = str(Path(args.config).resolve())
    env[ENV_DB_URL] = settings.db_url
    env.pop(ENV_DB_PASSWORD, None)  # the URL above carries it: given twice, the loader refuses
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def execute(args: argparse.Namespace, settings: Settings) -> int:
    port = args.port or settings.ui.port
    address = args.address or settings.ui.address
    refuse_open_public(settings, address)
    env = child_environment(args, settings, dict(os.environ))
    print(f"Sweetspot dashboard: http://{address}:{port}/  (database {masked(settings.db_url)}; Ctrl-C stops it)", flush=True)
    child = subprocess.Popen(streamlit_command(settings, port, address), cwd=ROOT, env=env)
    # A TERM sent to this process (a service manager, `timeout`) must not orphan the server.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return child.wait()
    except KeyboardInterrupt:
        return 130
    finally:
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
