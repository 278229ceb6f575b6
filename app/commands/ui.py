"""``python -m app ui``: start the Streamlit dashboard (app/ui/main.py) in a child process.

The child gets its settings through the environment the loader already honours
(SWEETSPOT_CONFIG, SWEETSPOT_DB_URL, SWEETSPOT_UI_PASSWORD), so it loads exactly what this
process loaded, --db included.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from core.errors import UsageError
from core.redact import masked
from core.settings import ENV_CONFIG, ENV_DB_PASSWORD, ENV_DB_URL, ENV_UI_PASSWORD, Settings

HELP = "start the dashboard in the browser (Streamlit) and print its URL"
ROOT = Path(__file__).resolve().parents[2]
MAIN = ROOT / "app" / "ui" / "main.py"


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
        # A table's toolbar would write its cells to CSV as they are (a formula cell run by the
        # spreadsheet); the pages' own "Download CSV" buttons neutralise them (core.text.csv_cell)
        "--client.disableDataExport", "true",
        # Nobody edits the dashboard's scripts while it serves; watching them only costs CPU (without
        # the watchdog package Streamlit polls every file of the app).
        "--server.fileWatcherType", "none",
    ]  # fmt: skip


def exposure(address: str) -> str:
    """Why the dashboard bound to ``address`` can be reached from other machines, or "" when it cannot.

    Reached from elsewhere unless every address ``address`` resolves to is a loopback one: every
    spelling of "all interfaces" (``0``, ``0x0``, ``000.000.000.000``, ``[::]``, ``0000::``, an IPv4-mapped
    ``::ffff:0.0.0.0``), a LAN address, and a host name that resolves to any of those. The name is
    resolved as the server will resolve it to bind (getaddrinfo).
    """
    host = address.strip().removeprefix("[").removesuffix("]")
    if not host:
        return "every interface"
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except (OSError, UnicodeError) as exc:
        return f"cannot tell: it does not resolve ({exc})"
    ips = [ip for ip in sorted({ipaddress.ip_address(str(a).split("%")[0]) for a in found}, key=str) if not _loopback(ip)]
    if not ips:
        return ""
    if any(ip.is_unspecified or (ip.version == 6 and ip.ipv4_mapped is not None and ip.ipv4_mapped.is_unspecified)
           for ip in ips):
        return "every interface"
    return f"reachable from other machines at {', '.join(map(str, ips))}"


def _loopback(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return (mapped or ip).is_loopback


def refuse_open_public(settings: Settings, address: str) -> None:
    """Refuse to serve the dashboard beyond this machine with no password, unless asked explicitly.

    A container publishes its port to the network: an open dashboard there shows every target's
    figures and configuration to anyone who finds it. Anything but loopback counts (:func:`exposure`).
    """
    if settings.ui_password or settings.ui.allow_public:
        return
    why = exposure(address)
    if why:
        raise UsageError(
            f"refusing to serve the dashboard on {address!r} ({why}) without a password",
            f"set {ENV_UI_PASSWORD}, bind to 127.0.0.1 (ui.address / --address), "
            "or set ui.allow_public = true to serve it open on purpose",
        )


def proxy_environment(settings: Settings) -> dict[str, str]:
    """The server's trust in ``X-Forwarded-For``: only from ``ui.trusted_proxies`` (uvicorn, under
    Streamlit, otherwise believes any loopback peer, so one local client could name itself anew at
    each password guess). Empty: the header is never believed; the TCP peer is the client."""
    return {"FORWARDED_ALLOW_IPS": ",".join(settings.ui.trusted_proxies)}


def refuse_taken_port(address: str, port: int, how: str) -> None:
    """End at once when another program listens on ``port``: the URL printed next would serve it.

    Streamlit finds the port taken only after this process has printed the URL, then logs "Port … is
    not available" while the rest keeps running. Binding each address ``address`` resolves to (with
    SO_REUSEADDR, as the server binds) tells first; a port freed in between is the server's to take.
    ``how`` says how to pick another, ``{port}`` standing for the next port found free (port + 1
    may be taken too: suggesting it sent people from one taken port to the next).
    """
    if not port_taken(address, port):
        return
    free = next((p for p in range(port + 1, min(port + _TRIES, 65535) + 1) if not port_taken(address, p)), None)
    hint = f"pick another: {how.format(port=free)}" if free else "pick another: a free port with --port"
    raise UsageError(f"port {port} is taken by another program (on {address or 'every interface'})", hint)


_TRIES = 100  # ports tried after a taken one for the suggestion


def port_taken(address: str, port: int) -> bool:
    """Whether another program holds ``port`` on an address ``address`` resolves to (False where the
    name does not resolve: the server reports that in its own words)."""
    host = address.strip().removeprefix("[").removesuffix("]") or None
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError):
        return False
    for family, kind, proto, _name, sockaddr in infos:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(sockaddr)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return True
    return False


def child_environment(args: argparse.Namespace, settings: Settings, environ: dict[str, str]) -> dict[str, str]:
    env = {**environ, **proxy_environment(settings)}
    if args.config:
        env[ENV_CONFIG] = str(Path(args.config).resolve())
    env[ENV_DB_URL] = settings.db_url
    env.pop(ENV_DB_PASSWORD, None)  # the URL above carries it: given twice, the loader refuses
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def execute(args: argparse.Namespace, settings: Settings) -> int:
    port = args.port or settings.ui.port
    address = settings.ui.address if args.address is None else args.address  # "" is every interface
    refuse_open_public(settings, address)
    refuse_taken_port(address, port, "--port {port} (or ui.port in the config file)")
    env = child_environment(args, settings, dict(os.environ))
    # A TERM sent to this process (a service manager, `timeout`) must not orphan the server. The
    # handler only notes it: raised as an exception it could land inside Popen (a library's thread
    # can take the signal whatever this thread blocks), after the server was started but before
    # `child` named it, leaving streamlit running with no one to stop it.
    # INT too: a shell starts a background job with SIGINT ignored, and Python then leaves it ignored,
    # so `kill -INT` on this process alone did nothing (the terminal's Ctrl-C reaches the child as well).
    stopped: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, _frame: stopped.append(signum))
    print(f"Sweetspot dashboard: http://{address}:{port}/  (database {masked(settings.db_url)}; Ctrl-C stops it)", flush=True)
    child = subprocess.Popen(streamlit_command(settings, port, address), cwd=ROOT, env=env)
    try:
        while child.poll() is None and not stopped:
            time.sleep(0.2)
        return 128 + stopped[0] if stopped else child.returncode
    except KeyboardInterrupt:
        return 130
    finally:
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()  # streamlit may not heed TERM while it starts
