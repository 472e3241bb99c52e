"""Progress on stderr: a bar redrawn in place on a terminal, plain periodic lines in CI logs."""

from __future__ import annotations

import sys
import time
from typing import TextIO

BAR_WIDTH = 28
TTY_REDRAW_S = 0.1
LOG_EVERY_S = 15.0


class Progress:
    """Counts finished units. Draws at most ten times a second on a TTY; elsewhere prints a line
    at every 10% and at least every 15 seconds, so CI logs stay short but show life."""

    def __init__(self, total: int, label: str, *, stream: TextIO | None = None, enabled: bool = True,
                 clock=time.monotonic):
        self.total = total
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = enabled and total > 0
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = 0
        self.errors = 0
        self._clock = clock
        self._start = clock()
        self._last_draw = 0.0
        self._last_decile = 0

    def advance(self, *, error: bool = False) -> None:
        self.done += 1
        self.errors += int(error)
        if not self.enabled:
            return
        now = self._clock()
        if self.tty:
            if now - self._last_draw >= TTY_REDRAW_S or self.done == self.total:
                self._last_draw = now
                self.stream.write("\r" + self._bar(now))
                self.stream.flush()
            return
        decile = self.done * 10 // self.total
        if decile > self._last_decile or now - self._last_draw >= LOG_EVERY_S or self.done == self.total:
            self._last_decile = decile
            self._last_draw = now
            self.stream.write(self._line(now) + "\n")
            self.stream.flush()

    def _rate(self, now: float) -> str:
        elapsed = max(now - self._start, 1e-9)
        rate = self.done / elapsed
        left = (self.total - self.done) / rate if rate > 0 else 0
        return f"{elapsed:.0f}s elapsed, ~{left:.0f}s left"

    def _bar(self, now: float) -> str:
        filled = BAR_WIDTH * self.done // self.total
        err = f" {self.errors} errors" if self.errors else ""
        return f"{self.label} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {self.done}/{self.total}{err} {self._rate(now)}"

    def _line(self, now: float) -> str:
        pct = 100 * self.done // self.total
        err = f", {self.errors} errors" if self.errors else ""
        return f"{self.label}: {self.done}/{self.total} ({pct}%{err}) {self._rate(now)}"

    def close(self) -> None:
        if self.enabled and self.tty and self.done:
            self.stream.write("\n")
            self.stream.flush()
