"""The watchdog of one pytest process (:mod:`tests.support.children`): ``python -m tests.support.reaper FD TOKEN``.

It reads process group ids, one a line, from the pipe ``FD`` that only its pytest process writes
to. End of file means that process is gone, whichever way (a SIGKILL included): the groups it
started are asked to stop (SIGTERM), given a moment, then killed with everything else that still
carries its ``TOKEN``.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from tests.support.children import kill_carriers, kill_groups

GRACE_S = 2.0  # SIGTERM to SIGKILL: a collector stores its round in flight in well under this when idle


def main(fd: int, tok: str) -> None:
    groups: set[int] = set()
    buffered = b""
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while chunk := pipe.read(4096):
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            groups.update(int(line) for line in lines if line.strip())
    if kill_groups(groups, tok, signal.SIGTERM):
        time.sleep(GRACE_S)
        kill_groups(groups, tok, signal.SIGKILL)
    kill_carriers(tok, {os.getpid()})


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
