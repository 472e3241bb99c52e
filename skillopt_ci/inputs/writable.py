"""Writing files: up-front checks that a path the user gave can be written, atomic writes, and one
line for a file-system error.

:func:`write_atomic` writes to a temporary name and renames, so a reader sees the old file or the
new one, never a part; secrets are redacted on the way.

A path mistake (``--out`` naming a file, ``--html`` naming a directory, a cache or runs directory
under a file or in a place without write permission) is bad input: it is reported before any
paid work, as one line naming the path and the option or setting it came from, exit 2. What
slips past these checks (a race, a full disk) reaches :func:`os_error_message` in the CLI.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import EXIT_INPUT, EXIT_RUNTIME, InputError
from skillopt_ci.core.paths import display_path
from skillopt_ci.core.redact import redact

# errno values that mean "this path cannot be used": the user must pick another one.
_PATH_MISTAKES = {errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ENOENT,
                  errno.EROFS, errno.ENAMETOOLONG, errno.ELOOP}


_DISK_FULL = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded"}


def _first_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(".")


def check_dir(path: Path, what: str) -> None:
    """Raise :class:`InputError` unless ``path`` is a writable directory or can be created.
    ``what`` names where the path came from (``--out``, ``runs_dir in skillopt.yml``)."""
    where = display_path(path)
    if path.exists():
        if not path.is_dir():
            raise InputError(f"{what} is a file, not a directory", where=where,
                             hint=f"give {what} a new or empty directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise InputError(f"{what} is not writable (permission denied)", where=where,
                             hint=f"give {what} a directory you can write to")
        return
    _check_creatable(path, what, where)


def check_file(path: Path, what: str) -> None:
    """Raise :class:`InputError` unless ``path`` names a file that can be written (created or
    replaced)."""
    where = display_path(path)
    if path.is_dir():
        raise InputError(f"{what} is a directory; it must name a file", where=where,
                         hint=f"e.g. {what} {display_path(path / 'report.html')}")
    if path.exists():
        if not os.access(path.parent, os.W_OK | os.X_OK):
            raise InputError(f"{what} cannot be replaced: no permission to write in its directory", where=where)
        return
    _check_creatable(path, what, where)


def _check_creatable(path: Path, what: str, where: str) -> None:
    ancestor = _first_existing(path.parent if path.parent != path else path)
    if not ancestor.is_dir():
        raise InputError(f"{what} cannot be created: {display_path(ancestor)} is a file, not a directory",
                         where=where, hint=f"choose another {what}")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise InputError(f"{what} cannot be created: no permission to write in {display_path(ancestor)}",
                         where=where, hint=f"choose another {what}")


def os_error_message(exc: OSError) -> tuple[str, int] | None:
    """One line and an exit code for a file-system error on a named path; None for others
    (those are bugs or network errors and keep their traceback)."""
    if exc.errno in _DISK_FULL:  # the results written so far are kept; free space and resume
        where = f": {exc.filename}" if exc.filename is not None else ""
        return f"{_DISK_FULL[exc.errno]}{where} (free some space, then run the same command again)", EXIT_RUNTIME
    if exc.filename is None:
        return None
    reason = exc.strerror or type(exc).__name__
    target = f"{exc.filename} -> {exc.filename2}" if exc.filename2 else str(exc.filename)
    code = EXIT_INPUT if exc.errno in _PATH_MISTAKES else EXIT_RUNTIME
    hint = " (check that path and the directories above it)" if code == EXIT_INPUT else ""
    return f"{target}: {reason}{hint}", code


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so a reader sees the old file or the new one, never a part.
    Secrets are redacted on the way (:mod:`skillopt_ci.core.redact`). An error names ``path``
    (or its folder), never the temporary file."""
    text = redact(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = _create_temp(path)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path.parent)) from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:  # a full disk while writing: name the file the user knows
        Path(tmp).unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _create_temp(path: Path) -> tuple[int, str]:
    """A new file next to ``path``, created with mode 0666 so the umask decides its permissions
    (``tempfile.mkstemp`` would make it 0600 whatever the umask)."""
    while True:
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue


def write_json_atomic(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
