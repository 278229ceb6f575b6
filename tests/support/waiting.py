"""Waiting on a condition, the one way tests wait (issue 44: the suite holds on a busy machine).

A test waits for what it means (a round stored, a port answering, a process gone), never for a
duration, and asserts the behaviour it then sees, never the pace. The bound only ends a test that
would otherwise wait for good: it is sized for a load average of 20 on two cores, where everything
runs 5-10x slower than idle, so a bound is never what decides a test on a busy machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

T = TypeVar("T")


class Process(Protocol):
    """What a wait watches of a started process (a ``Popen``)."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...


# Seconds: what a wait for one step of a local server or process gets (a collector's start, a round,
# a config reload); at load 20 on two cores a Python process took up to 30 s just to import the app.
STEP_BOUND_S = 120.0
POLL_S = 0.3
# Seconds: the timeout for reading a local test server that answers at once; at load 20 such an
# answer took over 2 s (a test of a timeout itself keeps its own, short one)
LOCAL_ANSWER_S = 10.0


def wait_until(condition: Callable[[], T], what: str, timeout: float = STEP_BOUND_S, interval: float = POLL_S,
               watch: Iterable[Process] = ()) -> T:  # fmt: skip
    """Poll ``condition`` until it returns a true value, and return that value. An exception from it
    counts as "not yet" (a database not made yet) and is shown if the wait ends. A process of
    ``watch`` that exits ends the wait at once (it will not bring the condition about)."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = condition()
        except Exception as exc:  # noqa: BLE001 - "not yet"; the last one is reported
            value, last_error = None, exc  # type: ignore[assignment]
        if value:
            return value
        exited = [f"pid {p.pid} (exit status {p.returncode})" for p in watch if p.poll() is not None]
        assert not exited, f"{', '.join(exited)} exited while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}" + (
            f" (last error: {last_error!r})" if last_error else "")
        time.sleep(interval)
