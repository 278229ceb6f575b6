"""Progress bars with an ETA for long work, dependency-free, on stderr: a count of units
(:class:`ProgressLine`: backfill's rounds and steps) and a load sweep's levels (:class:`SweepProgress`).

On a terminal a bar is redrawn in place; elsewhere (a log file, CI) a plain line is written now and
then instead, so the output stays readable in a file without flooding it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Protocol, TextIO

from core.durations import format_duration


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


class LevelResult(Protocol):
    """What a sweep level's summary line shows (db.results.SweepLevel)."""

    @property
    def concurrency(self) -> int: ...
    @property
    def tokens_per_s(self) -> float | None: ...
    @property
    def ttft_p95_s(self) -> float | None: ...
    @property
    def requests(self) -> int: ...
    @property
    def errors(self) -> int: ...


_WIDTH = 24


def _clock(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}:{seconds % 60:02d}"


class SweepProgress:
    """Progress of a sweep of ``levels`` levels of ``level_s`` seconds each.

    A level lasts longer than its ``level_s``: the requests in flight at its window's end run to their
    end (the drain). Drains grow with concurrency (longer requests at a higher load): the time left
    counts, for every level to come, the last level's drain × √(its concurrency ÷ the last's), an
    estimate measured within 20 % of the real duration against the simulator (docs/sweep.md). Off a
    terminal a line is written at least every ``every_s`` seconds inside a level."""

    def __init__(self, levels: int, level_s: float, stream: TextIO | None = None, tty: bool | None = None,
                 clock: Callable[[], float] = time.monotonic, concurrencies: tuple[int, ...] = (),
                 every_s: float = 30.0) -> None:  # fmt: skip
        self.levels = levels
        self.level_s = level_s
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.clock = clock
        self.concurrencies = concurrencies
        self.every_s = every_s
        self._drawn = False
        self._started: float | None = None
        self._last_line = clock()
        self._drains: list[tuple[int, float]] = []  # (concurrency, drain seconds) of the levels done

    @property
    def drain_s(self) -> float:
        """The last level's drain (0 before the first ends)."""
        return self._drains[-1][1] if self._drains else 0.0

    def expected_drain_s(self, index: int) -> float:
        """The drain expected of level ``index``: the last measured one scaled by √ of the concurrency."""
        if not self._drains:
            return 0.0
        last_concurrency, last_drain = self._drains[-1]
        if index >= len(self.concurrencies) or last_concurrency < 1:
            return last_drain
        return last_drain * (self.concurrencies[index] / last_concurrency) ** 0.5

    def _left(self, index: int, elapsed_s: float) -> float:
        """Seconds left: this level's rest of window and drain, and the levels after it."""
        this = max(0.0, self.level_s + self.expected_drain_s(index) - elapsed_s)
        return this + sum(self.level_s + self.expected_drain_s(i) for i in range(index + 1, self.levels))

    def start_level(self, index: int, concurrency: int) -> None:
        """Level ``index`` (0-based) begins."""
        self._started = self.clock()
        if not self.tty:
            left = self._left(index, 0.0)
            drains = "" if self._drains else " + drains"
            self._line(
                f"level {index + 1}/{self.levels}: concurrency {concurrency} for "
                f"{format_duration(self.level_s)} ({_clock(left)}{drains} left)"
            )

    def update(
        self, index: int, concurrency: int, elapsed_s: float, requests: int, errors: int, in_flight: int = 0
    ) -> None:
        """Redraw the bar (terminals), or write a line if ``every_s`` passed since the last (elsewhere):
        ``elapsed_s`` into level ``index``, requests ended so far, requests in flight."""
        left = self._left(index, elapsed_s)
        draining = f", draining {in_flight} in flight" if elapsed_s > self.level_s else ""
        if not self.tty:
            if self.clock() - self._last_line >= self.every_s:
                self._line(
                    f"level {index + 1}/{self.levels} concurrency {concurrency}: {_clock(elapsed_s)} in{draining}, "
                    f"{requests} requests ended, {errors} errors, about {_clock(left)} left"
                )
            return
        done = min(1.0, (index * self.level_s + min(elapsed_s, self.level_s)) / (self.levels * self.level_s))
        filled = int(done * _WIDTH)
        bar = "#" * filled + "-" * (_WIDTH - filled)
        text = (
            f"[{bar}] {100 * done:3.0f}%  level {index + 1}/{self.levels} concurrency {concurrency}"
            f"  ETA {_clock(left)}  {requests} requests, {errors} errors{draining}"
        )
        self.stream.write("\r" + text.ljust(100))
        self.stream.flush()
        self._drawn = True

    def finish_level(
        self,
        index: int,
        level: LevelResult,
        errors: list[tuple[str, int]] | None = None,
        engine_line: str = "",
        warmup_errors: list[tuple[str, int]] | None = None,
    ) -> None:
        """Level ``index`` is measured: one summary line, the engine's own figures when it has them
        (``engine_line``, sweep.report.format_engine), then its most frequent errors (text, count):
        those of the measured requests (they add up to the line's count), then the warm-up's."""
        if self._started is not None:
            self._drains.append((level.concurrency, max(0.0, self.clock() - self._started - self.level_s)))
            self._started = None
        tok = "n/a" if level.tokens_per_s is None else f"{level.tokens_per_s:.1f} tok/s"
        ttft = "n/a" if level.ttft_p95_s is None else f"{level.ttft_p95_s:.2f} s"
        self._line(
            f"level {index + 1}/{self.levels} done: concurrency {level.concurrency}, {tok}, "
            f"TTFT P95 {ttft}, {level.requests} requests, {level.errors} errors"
        )
        if engine_line:
            self._line(f"  {engine_line}")
        for text, count in errors or ():
            self._line(f"  {count} × {text}")
        for text, count in warmup_errors or ():
            self._line(f"  warm-up, left out of the figures: {count} × {text}")

    def _line(self, text: str) -> None:
        if self._drawn:
            self.stream.write("\r" + " " * 100 + "\r")
            self._drawn = False
        self.stream.write(text + "\n")
        self.stream.flush()
        self._last_line = self.clock()
