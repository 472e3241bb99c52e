"""Extra paths a caller lets a sandboxed command see: ``Binds``.

Under bubblewrap a command sees a read-only system with the checkout, the runner's files, the
user's home, ``/run`` and the host's ``/tmp`` hidden, and only its own workspace writable
(docs/sandbox.md). A caller that legitimately needs more passes a ``Binds`` to
``run_process``/``run_in``/``Workspace.run``: ``read_only`` paths are bound read-only (an agent
CLI's install folder, a suite's scorer files), ``read_write`` paths are bound writable (a
per-rollout home folder, a folder holding a Unix socket to a local endpoint). Each path is bound
at the same place inside, after every hiding mount, so a bind under a hidden folder is visible.

Invariants: paths are made absolute and real (symlinks resolved) when the ``Binds`` is built; a
path that does not exist is an error at run time (``SandboxError``), never silently skipped,
because a command that then fails for a missing file would hide why. Without isolation the binds
change nothing: the command sees the whole machine anyway.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


def _real(paths: Iterable[str | os.PathLike[str]]) -> tuple[Path, ...]:
    return tuple(Path(os.path.realpath(os.path.abspath(os.fspath(p)))) for p in paths)


@dataclass(frozen=True)
class Binds:
    """Paths bound into the sandbox besides the workspace: ``read_only`` and ``read_write``."""

    read_only: tuple[Path, ...] = ()
    read_write: tuple[Path, ...] = ()

    @classmethod
    def of(cls, read_only: Iterable[str | os.PathLike[str]] = (),
           read_write: Iterable[str | os.PathLike[str]] = ()) -> Binds:
        """A ``Binds`` of these paths, made absolute and real."""
        return cls(_real(read_only), _real(read_write))

    def __add__(self, other: Binds) -> Binds:
        return Binds(self.read_only + other.read_only, self.read_write + other.read_write)


NO_BINDS = Binds()
