"""Which user a sandboxed command runs as, and its process-count limit.

``RLIMIT_NPROC`` does not bind uid 0 (the kernel exempts the initial user namespace's root, and a
user namespace created by root still maps to it), and CI jobs often run as root. So when this
process is root and util-linux ``setpriv`` is installed, bubblewrap runs as root (it can then
bind what root can read, such as a Python under ``/root``) and, inside the sandbox, ``setpriv``
drops the command to an unprivileged uid of its own (``command_uid``: from a range no account
uses, one per command of this process at a time) with no capabilities left; its workspace and
read-write binds are handed over to that uid first (``hand_over``). When not root, the command
keeps our uid and its limit adds the processes and threads that uid already runs
(``process_limit``), since the kernel counts every one of the uid's, not only the command's.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import threading
from collections.abc import Iterable
from pathlib import Path

_BASE_UID = 1_900_000_000  # far above any account or subordinate-uid range in common use
_SLOTS = 1_000
_counter = itertools.count()
_lock = threading.Lock()
_CACHE: dict[str, str] = {}


def setpriv() -> str | None:
    """util-linux ``setpriv`` when this process is root and has it (the probe of
    ``isolation()`` checks that the drop works inside bwrap, and clears this when it does not)."""
    if "setpriv" not in _CACHE:
        path = shutil.which("setpriv") or ""
        _CACHE["setpriv"] = path if path and os.geteuid() == 0 else ""
    return _CACHE["setpriv"] or None


# bwrap (as root) keeps for the command only what it needs to drop to the uid; setpriv then
# empties every capability set, so the command can never regain root.
CAP_ADD = ("--cap-add", "CAP_SETUID,CAP_SETGID")


def drop_argv(setpriv_path: str, uid: int) -> list[str]:
    return [setpriv_path, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--"]


def command_uid() -> int:
    """A uid for one command: distinct across the commands this process runs at a time."""
    with _lock:
        slot = next(_counter) % _SLOTS
    return _BASE_UID + (os.getpid() % 1_000) * _SLOTS + slot


def hand_over(paths: Iterable[Path], uid: int) -> None:
    """Make ``paths`` (recursively, never through a symlink) owned by ``uid``: the command writes
    there. Files this process writes later are handed over again before the next command."""
    for root in paths:
        with contextlib.suppress(OSError):
            os.lchown(root, uid, uid)
        for folder, dirs, files in os.walk(root, followlinks=False):
            for name in (*dirs, *files):
                with contextlib.suppress(OSError):
                    os.lchown(os.path.join(folder, name), uid, uid)


def processes_of(uid: int) -> int:
    """How many tasks (processes and their threads: the kernel counts both) ``uid`` runs now
    (0 without /proc)."""
    count = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError):
                if os.stat(entry.path).st_uid == uid:
                    count += len(os.listdir(os.path.join(entry.path, "task")))
    return count


def process_limit(wanted: int, uid: int) -> int:
    """The ``RLIMIT_NPROC`` that leaves the command ``wanted`` processes of its own."""
    return wanted + processes_of(uid)
