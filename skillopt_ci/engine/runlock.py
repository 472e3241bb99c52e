"""One writer per run directory: an exclusive ``flock`` on ``DIR/.lock``, held for the run's life.

Contract:
- :class:`RunLock` creates the directory if needed and takes the lock. When another process holds
  it, it raises :class:`RuntimeFailure` (exit 3) naming that process (its pid and command line,
  which the holder writes into the lock file), or, with ``wait=True``, waits for it.
- Within one process the lock is re-entrant: the command holds its top directory, and the
  evaluations under it take the same lock again for free (``flock`` itself would refuse a second
  open of the same file in the same process).
- The kernel drops the lock when the process dies, ``kill -9`` included: a stale lock file never
  blocks anyone. The file stays (removing it would let a third process lock a new file while a
  second one waits on the old), except in a directory this process created and left empty, which
  is removed; a lock file deleted while a process waited is detected and locked afresh.
- ``interrupted_runs()`` lists the directories whose lock was released by a Ctrl-C, so the CLI can
  say what was kept.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from skillopt_ci.core.errors import InputError, RuntimeFailure

LOCK = ".lock"


@dataclass
class _Held:
    fd: int
    count: int
    created: bool


_HELD: dict[str, _Held] = {}
_INTERRUPTED: list[Path] = []


def _key(path: Path) -> str:
    return os.path.realpath(path)


_command: list[str] = []


def set_command(argv: list[str]) -> None:
    """The command line to show another process (the CLI records its own arguments)."""
    _command[:] = argv


def holder_text() -> str:
    """What a waiting process is told about us: pid and command line."""
    argv = _command or [Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python", *sys.argv[1:]]
    return f"pid {os.getpid()}: {' '.join(argv)}"


def created_by_lock(path: Path) -> bool:
    """Whether this process created ``path`` when it took the lock (so an empty aborted run may
    be removed without touching anything older)."""
    held = _HELD.get(_key(path))
    return bool(held and held.created)


def interrupted_runs() -> list[Path]:
    return list(_INTERRUPTED)


class RunLock:
    """``with RunLock(path, wait=False):`` — see the module docstring."""

    def __init__(self, path: Path, *, wait: bool = False, notify: Callable[[str], None] | None = None):
        self.path = path
        self.wait = wait
        self.notify = notify or (lambda line: print(line, file=sys.stderr, flush=True))

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        key = _key(self.path)
        last = key in _HELD and _HELD[key].count == 1
        self.release()
        if last and exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            _INTERRUPTED.append(self.path)

    def acquire(self) -> None:
        key = _key(self.path)
        if key in _HELD:
            _HELD[key].count += 1
            return
        created = not self.path.exists()
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise InputError("exists and is not a directory", where=str(self.path),
                             hint="choose a new or empty directory for --out") from None
        except PermissionError:
            raise InputError("cannot create the run directory: permission denied", where=str(self.path)) from None
        fd = self._lock_file()
        os.ftruncate(fd, 0)
        os.pwrite(fd, (holder_text() + "\n").encode("utf-8", "replace"), 0)
        _HELD[key] = _Held(fd, 1, created)

    def _lock_file(self) -> int:
        """Open and lock ``.lock``; retry when the directory was replaced while we waited."""
        file = self.path / LOCK
        told = False
        while True:
            self.path.mkdir(parents=True, exist_ok=True)
            fd = os.open(file, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                        raise
                    other = _read_holder(fd)
                    if not self.wait:
                        raise RuntimeFailure(
                            f"another skillopt-ci process is writing to this run directory ({other})",
                            where=str(self.path),
                            hint="wait for it to finish, pass --wait to queue behind it, or choose another --out",
                        ) from None
                    if not told:
                        self.notify(f"waiting for {other} to finish with {self.path}")
                        told = True
                    fcntl.flock(fd, fcntl.LOCK_EX)
                if _same_file(fd, file):
                    return fd
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)

    def release(self) -> None:
        key = _key(self.path)
        held = _HELD.get(key)
        if held is None:
            return
        held.count -= 1
        if held.count:
            return
        del _HELD[key]
        with contextlib.suppress(OSError):
            os.ftruncate(held.fd, 0)
            if held.created and [p.name for p in self.path.iterdir()] == [LOCK]:
                # Nothing was written (e.g. bad input found after locking): leave no trace.
                (self.path / LOCK).unlink()
                self.path.rmdir()
        os.close(held.fd)  # closing the only descriptor drops the flock


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text or "pid unknown"


def _same_file(fd: int, file: Path) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(file)
    except FileNotFoundError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
