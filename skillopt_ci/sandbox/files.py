"""File operations confined to a workspace root: read, write, list, glob, grep, copy.

Every function takes the workspace's real root path and a workspace-relative path, resolves it
with ``paths.confine`` and opens it with ``paths.open_confined`` (no symlink followed). Listings
and matches are capped; when a cap cuts the output, its last entry says so, because the model
reading a tool result must know the list is not complete.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from skillopt_ci.sandbox.paths import (
    SandboxError,
    confine,
    glob_regex,
    make_dirs_confined,
    open_confined,
    walk,
)

GREP_MAX_FILE_BYTES = 5 * 1024 * 1024
GREP_LINE_CHARS = 400


def _read_bytes(root: Path, relative: str, limit: int) -> tuple[bytes, int]:
    """Up to ``limit`` bytes of a regular file, and its size."""
    real = confine(root, relative)
    try:
        fd = open_confined(root, real, os.O_RDONLY)
    except FileNotFoundError:
        raise SandboxError(f"{relative}: no such file in the workspace") from None
    except OSError as exc:
        raise SandboxError(f"{relative}: cannot open: {exc.strerror or exc}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise SandboxError(f"{relative}: is a directory; list it instead")
        raise SandboxError(f"{relative}: not a regular file")
    with os.fdopen(fd, "rb") as handle:
        return handle.read(limit), info.st_size


def read_text(root: Path, relative: str, max_chars: int) -> str:
    data, size = _read_bytes(root, relative, max_chars * 4 + 4)
    text = data.decode("utf-8", errors="replace")
    if len(text) > max_chars or len(data) < size:
        return text[:max_chars] + f"\n[cut: showed the first {max_chars} characters of {size} bytes]"
    return text


def read_bytes(root: Path, relative: str, limit: int) -> bytes:
    return _read_bytes(root, relative, limit)[0]


def write_text(root: Path, relative: str, text: str) -> int:
    real = confine(root, relative)
    if real == root:
        raise SandboxError(f"{relative}: is the workspace itself; name a file")
    data = text.encode("utf-8")
    try:
        make_dirs_confined(root, real.parent)
        fd = open_confined(root, real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    except OSError as exc:
        raise SandboxError(f"{relative}: cannot write: {exc.strerror or exc}") from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return len(data)


def _capped(items: list[str], cap: int, total: int, what: str) -> list[str]:
    if total <= cap:
        return items
    return [*items[:cap], f"[cut: showed {cap} of {total} {what}]"]


def list_files(root: Path, relative: str, max_entries: int, skip: frozenset[str]) -> list[str]:
    real = confine(root, relative)
    if real.is_file() and not real.is_symlink():
        return [real.relative_to(root).as_posix()]
    if not real.is_dir():
        raise SandboxError(f"{relative}: no such folder in the workspace")
    found = list(walk(root, real, skip))
    return _capped(found, max_entries, len(found), "files")


def glob(root: Path, pattern: str, max_entries: int, skip: frozenset[str]) -> list[str]:
    text = pattern.strip()
    while text.startswith("./"):
        text = text[2:]
    if not text or text.startswith("/") or ".." in Path(text).parts:
        raise SandboxError(f"{pattern}: a glob must be relative to the workspace and stay inside it")
    regex = glob_regex(text)
    found = [p for p in walk(root, root, skip) if regex.match(p)]
    return _capped(found, max_entries, len(found), "matches")


def grep(root: Path, pattern: str, relative: str, max_matches: int, skip: frozenset[str]) -> list[str]:
    """``path:line: text`` for each line matching the regular expression ``pattern``."""
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise SandboxError(f"{pattern}: not a valid regular expression: {exc}") from None
    real = confine(root, relative)
    if real.is_file() and not real.is_symlink():
        paths = [real.relative_to(root).as_posix()]
    elif real.is_dir():
        paths = list(walk(root, real, skip))
    else:
        raise SandboxError(f"{relative}: no such file or folder in the workspace")
    matches: list[str] = []
    total = 0
    for path in paths:
        for number, line in _lines(root, path):
            if regex.search(line):
                total += 1
                if len(matches) < max_matches:
                    matches.append(f"{path}:{number}: {line[:GREP_LINE_CHARS]}")
    return _capped(matches, max_matches, total, "matching lines")


def _lines(root: Path, path: str) -> list[tuple[int, str]]:
    """The numbered lines of a text file; binary and very large files have none."""
    try:
        data, size = _read_bytes(root, path, GREP_MAX_FILE_BYTES + 1)
    except SandboxError:
        return []
    if size > GREP_MAX_FILE_BYTES or b"\x00" in data[:8192]:
        return []
    text = data.decode("utf-8", errors="replace")
    return list(enumerate(text.splitlines(), start=1))


def copy_out(root: Path, relative: str, dest: Path) -> int:
    """Copy one workspace file to ``dest`` (outside the workspace); returns its size."""
    data = read_bytes(root, relative, -1)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)
    return len(data)
