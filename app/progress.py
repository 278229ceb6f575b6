"""A dependency-free progress line with an ETA, for long work (backfill, sweeps)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressLine:
    """``label ███░░░  45%  9,000/20,160 rounds  ETA 20 s`` redrawn in place on a terminal.

    Off a terminal (logs, CI) it prints a plain line every ``every_pct`` per cent instead, so the
    output stays readable in a file.
    """

    def __init__(self, label: str, total: int, unit: str, stream: TextIO | None = None, every_pct: int = 10) -> None:
        self.label, self.total, self.unit = label, max(total, 1), unit
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every_pct = every_pct
        self.started = time.monotonic()
        self._last_pct = -1

    def update(self, done: int) -> None:
        pct = min(100, int(100 * done / self.total))
        if not self.tty and (pct // self.every_pct == self._last_pct // self.every_pct):
            return
        if self.tty and pct == self._last_pct and done != self.total:
            return
        self._last_pct = pct
        elapsed = time.monotonic() - self.started
        eta = elapsed * (self.total - done) / done if done else float("nan")
        bar = "█" * (pct // 5) + "░" * (20 - pct // 5)
        line = f"{self.label} {bar} {pct:3d}%  {done:,}/{self.total:,} {self.unit}  ETA {_seconds(eta)}"
        self.stream.write(("\r" + line) if self.tty else line + "\n")
        self.stream.flush()

    def finish(self, note: str = "") -> None:
        elapsed = time.monotonic() - self.started
        end = f"{self.label} done: {self.total:,} {self.unit} in {elapsed:.1f} s{(' ' + note) if note else ''}"
        self.stream.write(("\r" + end + " " * 20 + "\n") if self.tty else end + "\n")
        self.stream.flush()


def _seconds(value: float) -> str:
    if value != value:  # NaN: nothing done yet
        return "--"
    return f"{value:.0f} s" if value < 120 else f"{value / 60:.1f} min"
