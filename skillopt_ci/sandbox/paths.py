"""Confinement of paths to a workspace root.

``confine(root, relative)`` turns a workspace-relative path into the real path inside ``root``
or raises ``SandboxError``: absolute paths, ``..`` that leaves the root and symlinks whose target
lies outside are refused. ``open_confined`` then opens that real path one component at a time
with ``O_NOFOLLOW`` starting from the root, so a directory swapped for a symlink between the check
and the open (a command still running in the workspace) makes the open fail instead of following
the link out. ``walk`` lists regular files below a directory without entering symlinked folders.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from skillopt_ci.core.errors import EXIT_INPUT, SkilloptError


class SandboxError(SkilloptError):
    """A path outside the workspace, a missing or unreadable file, a bad pattern.

    ``message`` is one line meant for the model (a tool error) or the user (a missing task file).
    """

    exit_code = EXIT_INPUT


def confine(root: Path, relative: str) -> Path:
    """The real path of ``relative`` inside ``root`` (which must itself be a real path)."""
    text = str(relative).strip()
    if not text:
        text = "."
    if "\x00" in text:
        raise SandboxError(f"{relative!r}: a path may not contain a NUL character")
    if text.startswith(("/", "\\", "~")) or PurePosixPath(text).is_absolute():
        raise SandboxError(f"{relative}: absolute paths are not allowed; use a path relative to the workspace")
    normal = os.path.normpath(text)
    if normal == ".." or normal.startswith("../"):
        raise SandboxError(f"{relative}: the path leaves the workspace")
    real = Path(os.path.realpath(root / normal))
    if real != root and root not in real.parents:
        raise SandboxError(f"{relative}: the path leads outside the workspace (through a symlink)")
    return real


def relative_parts(root: Path, real: Path) -> list[str]:
    return [] if real == root else list(real.relative_to(root).parts)


def open_confined(root: Path, real: Path, flags: int, mode: int = 0o644) -> int:
    """A file descriptor for ``real`` (below ``root``) opened without following any symlink."""
    parts = relative_parts(root, real)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        if not parts:
            return os.dup(fd)
        return os.open(parts[-1], flags | os.O_NOFOLLOW, mode, dir_fd=fd)
    finally:
        os.close(fd)


def make_dirs_confined(root: Path, real: Path) -> None:
    """Create the directories of ``real`` below ``root``, never through a symlink."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in relative_parts(root, real):
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
            next_fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = next_fd
    finally:
        os.close(fd)


def walk(root: Path, start: Path, skip: frozenset[str] = frozenset()) -> list[str]:
    """Workspace-relative paths of the regular files below ``start``, sorted, symlinks skipped.

    ``skip`` names top-level entries of the root that are left out (the scratch directory).
    """
    return sorted(_walk(root, start, skip))


def _walk(root: Path, start: Path, skip: frozenset[str]) -> Iterator[str]:
    for folder, dirs, files in os.walk(start, followlinks=False):
        here = Path(folder)
        rel_folder = here.relative_to(root)
        if rel_folder == Path("."):
            dirs[:] = [d for d in dirs if d not in skip]
            files = [f for f in files if f not in skip]
        dirs[:] = sorted(d for d in dirs if not (here / d).is_symlink())
        for name in sorted(files):
            path = here / name
            if path.is_symlink() or not path.is_file():
                continue
            yield (rel_folder / name).as_posix()


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob over workspace-relative POSIX paths: ``*`` and ``?`` stay within one folder,
    ``**/`` matches any number of folders (also none), ``[...]`` is a character class."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")
