"""A real ALFWorld game in a child process of its own, so games can run concurrently.

TextWorld's PDDL engine is not thread-safe (its grammar parser is one module-level object): two
games loaded at once in one process fail (``IndexError: pop from empty list`` on reset). Each
:class:`GameProcess` therefore starts one child, ``python -B -m``-style
:mod:`skillopt_ci.envs.alfworld_child`, and speaks its line protocol over pipes.

Contract:
- ``GameProcess(path)`` starts the child (the same interpreter; ``PYTHONPATH`` = this process's
  import path, so the child imports what this process would; an environment holding no
  credential: :func:`child_environment`), then :meth:`open` loads the game in it.
- ``open``, ``reset``, ``step``, ``admissible_commands`` and ``close`` forward to the child and
  block until it answers; the caller bounds them (the ``interactive`` environment's
  ``step_timeout_s`` and ``time_limit_s``) and calls :meth:`kill` when one passes its limit.
- The engine's exception is :class:`GameError` (``Type: message``, the child lives on); a
  missing ``alfworld`` package in the child is an :class:`InputError` (exit 2). A child that
  ends while a call waits (a crash, the out-of-memory killer, :meth:`kill`) is
  :class:`GameProcessEnded`, naming the call, the exit code or signal and the child's last
  stderr line.
- ``close()`` asks the child to close the game and exit, waits at most ``CLOSE_WAIT_S``, then
  kills it; the process is always ended and reaped when ``close`` returns.
- ``kill()`` may be called from any thread, at any time, more than once: SIGKILL and reap; every
  later call raises :class:`GameProcessEnded`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.text import clip
from skillopt_ci.sandbox.isolation import allowed_name

INSTALL_HINT = 'pip install "skillopt-ci[alfworld]"'
CLOSE_WAIT_S = 10.0
REAP_WAIT_S = 5.0
# -c puts "" (the working folder) first on the path: drop it, so no file there shadows a module.
BOOT = "import sys; sys.path[:1] = []; from skillopt_ci.envs.alfworld_child import main; main()"


class GameError(RuntimeError):
    """The engine raised in the child (``Type: message``); the game process lives on."""


class GameProcessEnded(RuntimeError):
    """The game process ended while a call waited for it (or before the call)."""


def child_environment() -> dict[str, str]:
    """The child's environment: the sandbox's allow-listed variables (no credential), HOME and
    TMPDIR, and this process's import path."""
    env = {name: value for name, value in os.environ.items()
           if allowed_name(name) or name in ("HOME", "TMPDIR")}
    env.update(PYTHONPATH=os.pathsep.join(p for p in sys.path if p), PYTHONIOENCODING="utf-8",
               PYTHONDONTWRITEBYTECODE="1")
    return env


class _StderrTail:
    """Reads the child's stderr on a daemon thread, keeping its last non-empty line."""

    def __init__(self, stream: IO[str]):
        self.last = ""
        self._thread = threading.Thread(target=self._read, args=(stream,), name="alfworld-stderr", daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        with contextlib.suppress(OSError, ValueError):
            for line in stream:
                if line.strip():
                    self.last = line.strip()

    def settled(self) -> str:
        """The last line, once the child's stderr is closed (waited for at most REAP_WAIT_S)."""
        self._thread.join(REAP_WAIT_S)
        return self.last


class GameProcess:
    def __init__(self, path: Path):
        self.path = path
        self.killed = False
        self.proc = subprocess.Popen(
            [sys.executable, "-B", "-c", BOOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, encoding="utf-8", errors="replace", env=child_environment(),
            close_fds=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self._stdin, self._stdout = self.proc.stdin, self.proc.stdout
        self._stderr = _StderrTail(self.proc.stderr)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def open(self) -> None:
        self._ask({"op": "open", "path": str(self.path)}, "open")

    def reset(self) -> str:
        return str(self._ask({"op": "reset"}, "reset"))

    def step(self, command: str) -> tuple[str, bool]:
        observation, won = self._ask({"op": "step", "command": command}, "step")
        return str(observation), bool(won)

    def admissible_commands(self) -> list[str]:
        return [str(c) for c in self._ask({"op": "admissible"}, "admissible_commands")]

    def close(self) -> None:
        try:
            if self.proc.poll() is None and not self.killed:
                self._ask({"op": "close"}, "close")
        finally:
            try:
                self.proc.wait(CLOSE_WAIT_S)
            except subprocess.TimeoutExpired:
                self.kill()
            self._release()

    def kill(self) -> None:
        self.killed = True
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(REAP_WAIT_S)

    def _ask(self, request: dict[str, Any], what: str) -> Any:
        if self.killed:
            raise self._ended(what)
        try:
            self._stdin.write(json.dumps(request, ensure_ascii=False) + "\n")
            self._stdin.flush()
            line = self._stdout.readline()
        except (OSError, ValueError):  # a broken pipe, or a pipe closed by an earlier end
            line = ""
        if not line:
            raise self._ended(what)
        try:
            answer = json.loads(line)
        except json.JSONDecodeError:
            raise GameError(f"the game process answered {what} with {clip(line.strip(), 120)!r}, "
                            "not a protocol line") from None
        if isinstance(answer, dict) and "error" in answer:
            if answer.get("missing"):
                self.kill()
                raise InputError(f"the ALFWorld world needs the alfworld package (>= 0.4), which the game "
                                 f"process cannot import: {clip(str(answer['error']), 160)}", hint=INSTALL_HINT)
            raise GameError(str(answer["error"]))
        return answer.get("ok") if isinstance(answer, dict) else None

    def _ended(self, what: str) -> GameProcessEnded:
        try:
            code = self.proc.wait(REAP_WAIT_S)
        except subprocess.TimeoutExpired:  # it closed its stdout but lives on: end it
            self.kill()
            code = self.proc.returncode
        last = self._stderr.settled()
        how = _how(code)
        if self.killed:
            how += ", ended by skillopt-ci: a call passed its time limit or the rollout was cancelled"
        said = f"its last stderr line: {clip(last, 160)}" if last else "it wrote nothing to stderr"
        self._release()
        return GameProcessEnded(f"the ALFWorld game process ended during {what} ({how}); {said}")

    def _release(self) -> None:
        for stream in (self._stdin, self._stdout):
            with contextlib.suppress(OSError, ValueError):
                stream.close()


def _how(code: int | None) -> str:
    """``exit code 3`` or ``killed by SIGKILL``."""
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"
