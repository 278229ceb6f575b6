"""Local GPU readings (NVML) on a thread of their own, each awaited no longer than the scrape timeout.

NVML calls are blocking calls into the driver, and a GPU in trouble (fallen off the bus, a reset
under way, another process holding the driver's lock) can keep one waiting for seconds or for good:
exactly when the vLLM and gateway figures matter most. Read in the round's own thread, such a call
would hold back every source of every target, and every later round. Here a reading runs on a
daemon thread while the round's HTTP requests are in flight; the round takes it if it is done by
the round's deadline, and otherwise stores "no GPU data" with why, and goes on. While a reading is
stuck no other is started (NVML would only queue behind it): later rounds fail their GPU source at
once, and the first round after it returns starts a fresh one. A daemon thread never holds back the
process's exit, stuck or not.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from core.errors import ScrapeError

HINT = "A GPU may be failing: check `nvidia-smi` and the kernel log (Xid errors) on this host"


class GpuRead:
    """One reading asked of the thread: its result or error once ``done`` is set."""

    __slots__ = ("argument", "started", "done", "value", "error")

    def __init__(self, argument: Any) -> None:
        self.argument = argument
        self.started = time.monotonic()
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class GpuReader:
    """Runs ``read(argument)`` on one daemon thread, one reading at a time."""

    def __init__(self, read: Callable[[Any], Any]) -> None:
        self._read = read
        self._jobs: queue.SimpleQueue[GpuRead | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._current: GpuRead | None = None

    def start(self, argument: Any) -> GpuRead:
        """Ask for a reading now; when one is still under way, the same (it is waited for, not queued)."""
        current = self._current
        if current is not None and not current.done.is_set():
            return current
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="sweetspot-nvml", daemon=True)
            self._thread.start()
        self._current = job = GpuRead(argument)
        self._jobs.put(job)
        return job

    def result(self, job: GpuRead, deadline: float) -> Any:
        """The reading's value, waiting until ``deadline`` (``time.monotonic()``) at most; raises its
        error, or ScrapeError when it is not done by then."""
        if not job.done.wait(max(0.0, deadline - time.monotonic())):
            waited = time.monotonic() - job.started
            raise ScrapeError(f"no GPU data: NVML has not answered for {waited:.1f} s (a reading is still under way)", HINT)
        if job.error is not None:
            raise job.error
        return job.value

    def busy(self) -> bool:
        """Whether a reading is under way (stuck, perhaps)."""
        return self._current is not None and not self._current.done.is_set()

    def close(self) -> None:
        """Let the thread end once its reading, if any, returns (it is a daemon: nothing waits for it)."""
        if self._thread is not None:
            self._jobs.put(None)

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job.value = self._read(job.argument)
            except BaseException as exc:  # handed to the round that waits for it
                job.error = exc
            finally:
                job.done.set()
