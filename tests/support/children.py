"""Every process a test starts ends with the test, also when the run is interrupted or killed.

One mechanism every spawn passes, whoever wrote the test: :func:`install` (tests/conftest.py calls it
in every pytest process, the xdist controller and each worker) wraps ``subprocess.Popen``, which
``subprocess.run``, ``check_output``, asyncio and Playwright's driver all go through, so that

* each child starts in a process group (a session) of its own, the group that a reap kills whole:
  a collector's, a simulator's or a browser's own children go with it;
* each child's environment carries this pytest process's token in ``TESTS_CHILD_OWNERS`` (every
  ancestor pytest's token too), inherited by everything below it, also by what leaves the group
  (PostgreSQL's postmaster calls ``setsid``) or is forked without ``subprocess`` (multiprocessing);
* each group is owned by what was running when it started: a fixture being set up (any scope), else
  the test. The owner's end reaps it: after the fixture's teardown; after the test's teardown when
  nobody holds its ``Popen`` any more (one that a wider fixture's object holds, a server the test
  restarted, is that object's to stop). A group is killed (SIGKILL; a test that wanted a graceful stop
  has done it) only while a member still carries the token, so a process that reused the number
  (pid_max is 32768 here) is left alone; a member that leads its group takes the group with it;
* SIGTERM and SIGHUP to a pytest process, and its exit, reap every group it started and then every
  process carrying its token (the controller's token is in its workers' environment: they go too);
* a SIGKILL runs no handler: a watchdog process (:mod:`tests.support.reaper`), started at install,
  holds the read end of a pipe only this pytest process writes to; when the pipe closes, however the
  process died, the watchdog does the same reap. Without it an xdist worker orphaned by a killed
  controller kept running its test, and its collector with it.

Spawns that choose their own session or group (``start_new_session``, ``process_group``) keep it and
are registered all the same.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

OWNERS_VAR = "TESTS_CHILD_OWNERS"
ROOT = Path(__file__).resolve().parents[2]

_ORIGINAL_INIT = subprocess.Popen.__init__
_lock = threading.Lock()
# pgid → its owner (a fixture definition, a test item, or SESSION) and its Popen (weakly: a Popen
# nobody holds any more is a child nobody will stop)
_groups: dict[int, tuple[object, weakref.ref[subprocess.Popen[Any]] | None]] = {}
_owners: list[object] = []  # the stack of what is running: the innermost owns a child started now
_token = ""
_watchdog: Any = None  # the reaper's pipe (write end), kept open for the life of this process
SESSION = "session"


def token() -> str:
    """This pytest process's token ('' before :func:`install`)."""
    return _token


def _owner_list() -> str:
    return os.environ.get(OWNERS_VAR, "")


def _popen_init(self: subprocess.Popen[Any], args: Any, *pargs: Any, **kwargs: Any) -> None:
    if len(pargs) > 0:  # positional bufsize/executable/...: this hook only sees keywords; none in the tests
        _ORIGINAL_INIT(self, args, *pargs, **kwargs)
        return
    own_group = "process_group" in kwargs or kwargs.get("start_new_session")
    if not own_group:
        kwargs["start_new_session"] = True
    if kwargs.get("env") is not None and _token:  # an environment built from scratch still carries the tokens
        kwargs["env"] = {**kwargs["env"], OWNERS_VAR: _owner_list()}
    _ORIGINAL_INIT(self, args, **kwargs)
    _await_exec(self.pid)
    pgid = self.pid if kwargs.get("start_new_session") or kwargs.get("process_group") == 0 else None
    if pgid is None:
        with contextlib.suppress(ProcessLookupError):
            pgid = os.getpgid(self.pid)
    if pgid is not None and pgid != os.getpgrp():
        register(pgid, self)


def _await_exec(pid: int, timeout_s: float = 2.0) -> None:
    """Return once the child's environment (and so its token) shows in /proc, at most ``timeout_s`` s.
    Popen returns when exec closes its close-on-exec pipe, before the kernel has laid out the new
    program's environment: /proc/PID/environ then reads empty (3 times in 300 spawns here), and a
    check or a reap in that moment found no token (issue 44's test failed so in a full run). Every
    child started here has a non-empty environment (it carries TESTS_CHILD_OWNERS), so empty means
    not yet; a child that already ended (a zombie) or vanished shows none and is not waited for."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/environ").read_bytes():
                return
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.0005)


def register(pgid: int, proc: subprocess.Popen[Any] | None = None) -> None:
    """Own the process group ``pgid`` for the innermost owner running now, and tell the watchdog."""
    with _lock:
        _groups[pgid] = (_owners[-1] if _owners else SESSION, None if proc is None else weakref.ref(proc))
        if _watchdog is not None:
            with contextlib.suppress(OSError):
                _watchdog.write(f"{pgid}\n".encode())
                _watchdog.flush()


def _processes() -> Iterator[tuple[int, int]]:
    """(pid, process group) of every process the machine runs now."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            yield int(entry.name), int(stat.rpartition(")")[2].split()[2])


def carries(pid: int, tok: str) -> bool:
    """Whether process ``pid`` was started with ``tok`` among its TESTS_CHILD_OWNERS."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    prefix = OWNERS_VAR.encode() + b"="
    for item in environ.split(b"\0"):
        if item.startswith(prefix):
            return tok.encode() in item[len(prefix):].split(b":")
    return False


def kill_groups(pgids: set[int], tok: str, sig: int = signal.SIGKILL) -> set[int]:
    """Send ``sig`` to each group of ``pgids`` that a process carrying ``tok`` is still in; return those."""
    if not pgids:
        return set()
    ours = {pgrp for pid, pgrp in _processes() if pgrp in pgids and carries(pid, tok)}
    for pgid in ours:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
    return ours


def kill_carriers(tok: str, spare: set[int], sig: int = signal.SIGKILL) -> list[int]:
    """Send ``sig`` to every process but ``spare`` that carries ``tok``, to the whole group of one that
    leads its group: a process that renames itself (vLLM's ``VLLM::EngineCore`` and workers, through
    setproctitle) overwrites the environment /proc shows, and only its group finds it; return their pids."""
    hit = [(pid, pgrp) for pid, pgrp in _processes() if pid not in spare and carries(pid, tok)]
    for pid, pgrp in hit:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if pid == pgrp and pgrp != os.getpgrp():
                os.killpg(pgrp, sig)
            else:
                os.kill(pid, sig)
    return [pid for pid, _ in hit]


def _abandoned(ref: weakref.ref[subprocess.Popen[Any]] | None) -> bool:
    """Whether nobody holds the Popen any more (CPython keeps one whose child still ran in
    ``subprocess._active``, to reap it later: that one is abandoned too)."""
    proc = None if ref is None else ref()
    return proc is None or proc in getattr(subprocess, "_active", ())


def reap(owner: object, held_too: bool = True) -> None:
    """Kill the groups ``owner`` started that still run (its teardown has stopped what it meant to).
    ``held_too`` False (a test's end): only those whose Popen nobody holds any more; one a wider
    fixture's object still holds (a server the test restarted) is that object's to stop, and the
    session's end, a signal or the watchdog reaps it all the same."""
    with _lock:
        mine = {g: ref for g, (o, ref) in _groups.items() if o is owner}
    if mine and not held_too:
        gc.collect()  # a Popen in a reference cycle (a traceback's frames) is freed only by a collection
        mine = {g: ref for g, ref in mine.items() if _abandoned(ref)}
    with _lock:
        for g in mine:
            _groups.pop(g, None)
    kill_groups(set(mine), _token)


def reap_all() -> None:
    """Kill every group this process started, then every process carrying its token."""
    if not _token:
        return
    with _lock:
        pgids = set(_groups)
        _groups.clear()
    kill_groups(pgids, _token)
    kill_carriers(_token, {os.getpid()})


@contextlib.contextmanager
def owned_by(owner: object) -> Iterator[None]:
    """Children started inside belong to ``owner`` (until :func:`reap` is called for it)."""
    _owners.append(owner)
    try:
        yield
    finally:
        _owners.remove(owner)


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    reap_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def install() -> None:
    """Wrap ``subprocess.Popen``, give this process its token, start its watchdog, and reap at exit
    and on SIGTERM/SIGHUP. Idempotent."""
    global _token, _watchdog
    if _token:
        return
    _token = f"{os.getpid()}-{secrets.token_hex(4)}"
    read_end, write_end = os.pipe()
    # the watchdog starts through the original Popen: not in the registry, and in a session of its
    # own so that a terminal's ^C or a time limit's kill of this process group leaves it to do its job
    watchdog = subprocess.Popen.__new__(subprocess.Popen)
    # own (and it carries no token: an outer run's reap leaves it to finish this one's)
    env = {k: v for k, v in os.environ.items() if k != OWNERS_VAR}
    _ORIGINAL_INIT(watchdog, [sys.executable, "-m", "tests.support.reaper", str(read_end), _token], cwd=ROOT, env=env,
                   pass_fds=(read_end,), start_new_session=True, stdin=subprocess.DEVNULL)  # fmt: skip
    os.close(read_end)
    _watchdog = os.fdopen(write_end, "wb")
    os.environ[OWNERS_VAR] = ":".join(filter(None, (_owner_list(), _token)))
    subprocess.Popen.__init__ = _popen_init  # type: ignore[method-assign]
    atexit.register(reap_all)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) in (signal.SIG_DFL, None):
            signal.signal(signum, _on_signal)


# -- the pytest hooks (tests/conftest.py imports them; `pytest -p tests.support.children` loads them) --


def pytest_configure(config: pytest.Config) -> None:
    install()


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[object], request: pytest.FixtureRequest) -> Iterator[object]:
    """A child started while a fixture is set up is the fixture's: it lives until the fixture's teardown."""
    with owned_by(fixturedef):
        return (yield)


def pytest_fixture_post_finalizer(fixturedef: pytest.FixtureDef[object], request: pytest.FixtureRequest) -> None:
    reap(fixturedef)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[object]:
    """A child the test started and nobody holds is ended after its teardown, whatever the test did."""
    try:
        with owned_by(item):
            return (yield)
    finally:
        reap(item, held_too=False)
