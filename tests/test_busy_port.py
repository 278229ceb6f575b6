"""A dashboard port another program holds: `run` and `ui` end at once naming it and how to pick another."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def busy_port():
    with socket.socket() as other:  # as `python -m http.server` holds it: listening on every interface
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.bind(("0.0.0.0", 0))
        other.listen()
        yield other.getsockname()[1]


@pytest.mark.parametrize("command", [["run"], ["ui", "--address", "127.0.0.1"], ["ui", "--address", "localhost"]])
def test_a_taken_port_ends_the_command_at_once_with_the_way_out(tmp_path, busy_port, command):
    done = subprocess.run([sys.executable, "-m", "app", *command, "--db", f"sqlite:///{tmp_path}/x.db",
                           "--port", str(busy_port)], cwd=ROOT, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"port {busy_port} is taken by another program" in lines[0]
    # the way out: the next port that was free when asked (busy + 1 unless another program, here another
    # test's server, held that one too: the suggestion skips it)
    suggested = int(re.search(r"--port (\d+)", lines[0]).group(1))  # type: ignore[union-attr]
    assert busy_port < suggested <= busy_port + 100, lines[0]
    if command == ["run"]:
        assert f"PORT={suggested} make run" in lines[0]
    assert "dashboard: http" not in done.stdout and "simulator" not in done.stdout  # nothing started, no URL


def test_make_run_passes_port_to_the_command():
    dry = subprocess.run(["make", "-n", "run", "PORT=8502"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert "-m app run --port 8502" in dry.stdout


def test_a_free_port_is_left_to_the_server():
    from app.commands.ui import refuse_taken_port

    refuse_taken_port("127.0.0.1", free_port(), "")  # no error: nothing listens there


def test_the_port_suggested_is_free_itself():
    # port + 1 was suggested whatever it was: here it is taken too, and the one after is offered
    from app.commands.ui import port_taken, refuse_taken_port
    from core.errors import UsageError

    held = []
    try:
        for _ in range(20):  # two neighbouring ports held, as a second dashboard on 8502 would
            first = socket.socket()
            first.bind(("127.0.0.1", 0))
            second = socket.socket()
            try:
                second.bind(("127.0.0.1", first.getsockname()[1] + 1))
            except OSError:
                first.close()
                second.close()
                continue
            held = [first, second]
            break
        assert held, "no two neighbouring ports free on this machine"
        for sock in held:
            sock.listen()
        port = held[0].getsockname()[1]
        with pytest.raises(UsageError) as caught:
            refuse_taken_port("127.0.0.1", port, "--port {port}")
        suggested = int(caught.value.hint.rsplit("--port ", 1)[1])
        assert suggested >= port + 2 and not port_taken("127.0.0.1", suggested)
    finally:
        for sock in held:
            sock.close()
