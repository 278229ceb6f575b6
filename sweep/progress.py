"""A plain-text progress bar with ETA on stderr (no dependency).

On a terminal the bar is redrawn in place; elsewhere (a log file, CI) one line is written when each
level starts and ends, so a long sweep still shows it is alive without flooding the log.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from core.durations import format_duration
from db.results import SweepLevel
from sweep.engine import EngineLevel
from sweep.report import format_engine

_WIDTH = 24


def _clock(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}:{seconds % 60:02d}"


class Progress:
    """Progress of a sweep of ``levels`` levels of ``level_s`` seconds each.

    A level lasts longer than its ``level_s``: the requests in flight at its window's end run to their
    end (the drain). The time left counts, for every level to come, the mean drain of the levels done
    (a sweep announced at 66 s took 141 s when it did not)."""

    def __init__(self, levels: int, level_s: float, stream: TextIO | None = None, tty: bool | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.levels = levels
        self.level_s = level_s
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.clock = clock
        self._drawn = False
        self._started: float | None = None
        self._drains: list[float] = []

    @property
    def drain_s(self) -> float:
        """The mean drain of the levels done so far (0 before the first ends)."""
        return sum(self._drains) / len(self._drains) if self._drains else 0.0

    def _left(self, index: int, elapsed_s: float) -> float:
        """Seconds left: this level's rest of window and drain, and the levels after it."""
        per_level = self.level_s + self.drain_s
        return max(0.0, per_level - elapsed_s) + (self.levels - index - 1) * per_level

    def start_level(self, index: int, concurrency: int) -> None:
        """Level ``index`` (0-based) begins."""
        self._started = self.clock()
        if not self.tty:
            left = self._left(index, 0.0)
            self._line(
                f"level {index + 1}/{self.levels}: concurrency {concurrency} for "
                f"{format_duration(self.level_s)} ({_clock(left)} left)"
            )

    def update(self, index: int, concurrency: int, elapsed_s: float, requests: int, errors: int) -> None:
        """Redraw the bar (terminals only): ``elapsed_s`` into level ``index``, requests ended so far."""
        if not self.tty:
            return
        done = min(1.0, (index * self.level_s + min(elapsed_s, self.level_s)) / (self.levels * self.level_s))
        left = self._left(index, elapsed_s)
        filled = int(done * _WIDTH)
        bar = "#" * filled + "-" * (_WIDTH - filled)
        text = (
            f"[{bar}] {100 * done:3.0f}%  level {index + 1}/{self.levels} concurrency {concurrency}"
            f"  ETA {_clock(left)}  {requests} requests, {errors} errors"
        )
        self.stream.write("\r" + text.ljust(100))
        self.stream.flush()
        self._drawn = True

    def finish_level(
        self,
        index: int,
        level: SweepLevel,
        errors: list[tuple[str, int]] | None = None,
        engine: EngineLevel | None = None,
    ) -> None:
        """Level ``index`` is measured: one summary line, the engine's own figures when it has them,
        then its most frequent errors (text, count)."""
        if self._started is not None:
            self._drains.append(max(0.0, self.clock() - self._started - self.level_s))
            self._started = None
        tok = "n/a" if level.tokens_per_s is None else f"{level.tokens_per_s:.1f} tok/s"
        ttft = "n/a" if level.ttft_p95_s is None else f"{level.ttft_p95_s:.2f} s"
        self._line(
            f"level {index + 1}/{self.levels} done: concurrency {level.concurrency}, {tok}, "
            f"TTFT P95 {ttft}, {level.requests} requests, {level.errors} errors"
        )
        if engine is not None:
            self._line(f"  {format_engine(engine)}")
        for text, count in errors or ():
            self._line(f"  {count} × {text}")

    def _line(self, text: str) -> None:
        if self._drawn:
            self.stream.write("\r" + " " * 100 + "\r")
            self._drawn = False
        self.stream.write(text + "\n")
        self.stream.flush()
