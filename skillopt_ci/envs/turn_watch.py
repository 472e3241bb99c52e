"""Watching an agent CLI's event stream as it arrives: turns counted (a kill past the limit),
arrival times noted for the steps, and the CLI's own "cannot reach the model" lines recognised."""

from __future__ import annotations

import time
from collections.abc import Callable

UNREACHABLE_LINES = 2  # "cannot reach the model, retrying" lines before a rollout is stopped


class TurnWatch:
    """Counts turns in the CLI's stdout as it arrives; trips (kill) once past ``limit``. It also
    notes when each line arrived (``times``, seconds since it was made), for the steps' timing."""

    def __init__(self, limit: int, is_turn: Callable[[str], bool],
                 unreachable: Callable[[str], str | None] = lambda line: None):
        self.limit, self.is_turn, self.unreachable = limit, is_turn, unreachable
        self.turns = 0
        self.retries: list[str] = []  # the CLI's "cannot reach the model, retrying" messages
        self.gave_up: str | None = None
        self.times: list[float] = []
        self._rest = b""
        self._start = time.monotonic()

    @property
    def tripped(self) -> bool:
        return self.turns > self.limit or self.gave_up is not None

    def __call__(self, chunk: bytes) -> bool:
        lines = (self._rest + chunk).split(b"\n")
        self._rest = lines.pop()
        now = time.monotonic() - self._start
        for line in lines:
            self.times.append(now)
            text = line.decode("utf-8", errors="replace")
            if self.is_turn(text):
                self.turns += 1
            message = self.unreachable(text)
            if message is not None:
                self.retries.append(message)
                if len(self.retries) >= UNREACHABLE_LINES and self.gave_up is None:
                    self.gave_up = f"the model endpoint could not be reached ({message})"
        return self.tripped
