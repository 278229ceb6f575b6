"""``python -m app collect`` as a process on a config file of two targets (``wait_until`` is
:mod:`tests.support.waiting`'s, kept here for the tests that import it from here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.waiting import wait_until

__all__ = ["collector", "first_line", "two_targets", "wait_until"]

ROOT = Path(__file__).resolve().parents[2]


def two_targets(path: Path, head: str, first: tuple[str, str], second: tuple[str, str], first_extra: str = "") -> Path:
    """A config file: ``head`` (top-level settings), then two ``[[targets]]`` given as (name, vllm_url)."""
    (a, a_url), (b, b_url) = first, second
    path.write_text(f'{head}\n[[targets]]\nname = "{a}"\nvllm_url = "{a_url}"\n{first_extra}\n'
                    f'[[targets]]\nname = "{b}"\nvllm_url = "{b_url}"\n')  # fmt: skip
    return path


def collector(config: Path, log: Path) -> subprocess.Popen[bytes]:
    """``collect`` on ``config``, its output (stdout and stderr) into ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "app", "--config", str(config), "collect"], cwd=ROOT,
                                stdout=out, stderr=subprocess.STDOUT)  # fmt: skip


def first_line(env: dict[str, str], *argv: str) -> str:
    """The first line a long-running command (``collect``, ``ui``) prints, its start line; the command
    is then stopped with SIGTERM and waited for. The wait is the product's own stop grace and more:
    a collector's round in flight finishes first, and under the whole suite's load one took over the
    30 s this waited before (21 stops alone took 0.17-0.76 s)."""
    import signal

    from app.scheduler import STOP_GRACE_S

    proc = subprocess.Popen([sys.executable, "-m", "app", *argv], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        return proc.stdout.readline()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=STOP_GRACE_S + 30)
        finally:
            proc.kill()
