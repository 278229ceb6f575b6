"""Every process a test starts ends with the test, also when pytest is interrupted or killed
(tests/support/children.py; issue 44: a collector outlived a run stopped by its time limit by 45 min)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import children
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent

# An inner test run's test: a collector as users start it (on a target that refuses) and a shell with
# three children; it writes their pids and then waits to be killed.
INNER_TEST = '''
import subprocess, time
from pathlib import Path

from tests.support.collector_process import collector, wait_until
from tests.support.http_server import closed_port_url

def test_starts_children_and_hangs(tmp_path):
    cfg = tmp_path / "s.toml"
    cfg.write_text(f'db_url = "sqlite:///{tmp_path}/s.db"\\n[[targets]]\\nname = "t"\\nvllm_url = "{closed_port_url()}"\\n')
    # the shell's children: one in its group, one that leaves it (setsid), as PostgreSQL's postmaster
    # does, and one whose environment shows no token (vLLM's engine processes rename themselves,
    # which overwrites the environment /proc shows; here it is emptied)
    shell = (f"sleep 600 & echo $! > {tmp_path}/g1; setsid sleep 600 & echo $! > {tmp_path}/g2; "
             f"env -i /bin/sleep 600 & echo $! > {tmp_path}/g3; wait")
    procs = [collector(cfg, tmp_path / "collector.log"), subprocess.Popen(["sh", "-c", shell])]
    grandchildren = [tmp_path / "g1", tmp_path / "g2", tmp_path / "g3"]
    wait_until(lambda: all(g.exists() and g.read_text().endswith("\\n") for g in grandchildren), "the grandchildren")
    pids = [p.pid for p in procs] + [int(g.read_text()) for g in grandchildren]
    Path(PIDS).write_text(" ".join(map(str, pids)) + "\\n")
    time.sleep(600)  # until killed
'''


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, waiting for its parent to read its status, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def inner_run(tmp_path: Path, workers: int) -> tuple[subprocess.Popen[bytes], list[int], Path]:
    """Start a pytest on INNER_TEST (with the children plugin, ``workers`` xdist workers, 0: none);
    wait until its test has started its children; return pytest, their pids and the log."""
    pids = tmp_path / "pids"
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "test_inner.py").write_text(INNER_TEST.replace("PIDS", repr(str(pids))))
    log = tmp_path / "pytest.log"
    xdist = ["-n", str(workers)] if workers else ["-p", "no:xdist"]
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "tests.support.children", *xdist, "-q", "-o", "addopts=",
                                 "-p", "no:cacheprovider", "--rootdir", str(tmp_path / "inner"), str(tmp_path / "inner")],
                                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    wait_until(lambda: pids.exists() and pids.read_text().endswith("\n") or proc.poll() is not None, "the inner test's children",
               timeout=300)  # fmt: skip
    assert proc.poll() is None, log.read_text()
    return proc, [int(p) for p in pids.read_text().split()], log


@pytest.mark.parametrize(("workers", "how"), [(0, signal.SIGKILL), (0, signal.SIGTERM), (1, signal.SIGKILL), (1, signal.SIGTERM)],
                         ids=["sigkill", "sigterm", "xdist-controller-sigkill", "xdist-controller-sigterm"])  # fmt: skip
def test_a_killed_pytest_leaves_no_child_behind(tmp_path, workers, how):
    proc, pids, log = inner_run(tmp_path, workers)
    assert all(alive(p) for p in pids), [(p, alive(p)) for p in pids]
    below = carriers_of(proc.pid)  # with xdist: the worker too, and what it started
    assert set(pids) - below == {pids[-1]}  # all but the one whose environment is empty
    below |= set(pids)
    proc.send_signal(how)
    proc.wait(timeout=60)
    # the watchdog (SIGKILL) or the handler (SIGTERM) kills them: a few seconds idle, more at load 20
    wait_until(lambda: not any(alive(p) for p in below), "the inner run's processes to end", timeout=120)


def carriers_of(pytest_pid: int) -> set[int]:
    """The processes started under the pytest process ``pytest_pid``: those whose owner list holds
    its token (tests/support/children.py), its xdist workers included."""
    prefix = f"{children.OWNERS_VAR}=".encode()
    found = set()
    for pid, _ in children._processes():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        owners = next((item[len(prefix):].decode() for item in environ.split(b"\0") if item.startswith(prefix)), "")
        if any(t.startswith(f"{pytest_pid}-") for t in owners.split(":")):
            found.add(pid)
    return found


def test_a_child_a_test_left_running_ends_with_the_test(tmp_path):
    # two inner tests: the first leaves a process running and passes; the second finds it gone
    pid_file = tmp_path / "pid"
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "test_leak.py").write_text(textwrap.dedent(f'''
        import os, subprocess
        from pathlib import Path
        from tests.support.waiting import wait_until

        HELD = []  # what a wider fixture's object would hold (a server a test restarted)

        def gone(pid):
            return not Path(f"/proc/{{pid}}").exists() or " Z " in Path(f"/proc/{{pid}}/stat").read_text()

        def test_leaves_a_child():
            proc = subprocess.Popen(["sleep", "600"])
            assert os.getpgid(proc.pid) == proc.pid  # a group of its own
            Path({str(pid_file)!r}).write_text(str(proc.pid))
            HELD.append(subprocess.Popen(["sleep", "600"]))

        def test_finds_it_gone_and_the_held_one_running():
            pid = int(Path({str(pid_file)!r}).read_text())
            wait_until(lambda: gone(pid), "the first test's child to end", timeout=60)
            assert not gone(HELD[0].pid)  # held: its holder stops it
            HELD[0].kill()
            HELD[0].wait()
    '''))
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.support.children", "-p", "no:xdist", "-p", "no:randomly",
                           "-q", "-o", "addopts=", "-p", "no:cacheprovider", "--rootdir", str(tmp_path / "inner"),
                           str(tmp_path / "inner")], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_every_child_of_this_run_has_a_group_and_the_token():
    proc = subprocess.Popen(["sleep", "600"])
    try:
        assert os.getpgid(proc.pid) == proc.pid != os.getpgrp()
        assert children.carries(proc.pid, children.token())
        # a child given an environment of its own still carries it
        bare = subprocess.Popen(["sleep", "600"], env={"PATH": os.environ["PATH"]})
        assert children.carries(bare.pid, children.token())
        bare.kill()
        bare.wait()
    finally:
        proc.kill()
        proc.wait()
