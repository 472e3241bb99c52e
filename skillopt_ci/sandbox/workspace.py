"""A rollout's workspace: a fresh temporary folder, its files, its commands, its cleanup.

``Workspace.create(files)`` makes a folder named ``skillopt-ws-*`` in the system temp folder and
copies the task's files in (a missing source is a ``SandboxError`` naming it). Every path the file
methods take is relative to the workspace and confined to it (``paths``): absolute paths, ``..``
escapes and symlinks leading out are refused, and no symlink is followed when opening. ``run``
executes a command inside it under ``SandboxLimits`` with a clean environment (``process``,
``isolation``); ``run_in`` does the same in any existing folder. ``written_files`` compares the folder with the snapshot taken after creation and
skill installation (size, mtime, then content hash). ``cleanup`` is idempotent; every workspace
still alive is removed when the interpreter exits, which includes exiting on Ctrl-C.

Under bubblewrap a command sees only this folder writable and none of the checkout, the runner's
files or other workspaces; without it, ``sandbox.policy`` decides whether it runs (docs/sandbox.md).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from skillopt_ci.core.redact import redact
from skillopt_ci.sandbox import files
from skillopt_ci.sandbox.binds import NO_BINDS, Binds
from skillopt_ci.sandbox.isolation import SCRATCH, clean_environment
from skillopt_ci.sandbox.paths import SandboxError, confine, open_confined, walk
from skillopt_ci.sandbox.process import kill_all_running, run_process
from skillopt_ci.sandbox.result import DEFAULT_LIMITS, ProcessResult, SandboxLimits

PREFIX = "skillopt-ws-"
_SKIP = frozenset({SCRATCH})
_LIVE: dict[int, Workspace] = {}
_LIVE_LOCK = threading.Lock()

Snapshot = dict[str, tuple[int, int, str]]


class Workspace:
    """One rollout's folder. ``path`` is its real absolute path."""

    def __init__(self, path: Path):
        self.path = path
        self._snapshot: Snapshot = {}
        self._closed = False
        with _LIVE_LOCK:
            _LIVE[id(self)] = self

    @classmethod
    def create(cls, files: Mapping[str, Path] | None = None) -> Workspace:
        """A fresh workspace holding ``files`` ({workspace path: source file or folder})."""
        workspace = cls(Path(os.path.realpath(tempfile.mkdtemp(prefix=PREFIX))))
        try:
            (workspace.path / SCRATCH).mkdir()
            for relative, source in (files or {}).items():
                workspace._copy_in(Path(source), relative)
            workspace._snapshot = workspace._take_snapshot()
        except BaseException:
            workspace.cleanup()
            raise
        return workspace

    def _copy_in(self, source: Path, relative: str) -> None:
        target = confine(self.path, relative)
        if target == self.path:
            raise SandboxError(f"{relative}: a task file needs a name inside the workspace")
        if not source.exists():
            raise SandboxError(f"{source}: the file does not exist", hint="fix the task's files")
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=_ignore_symlinks, dirs_exist_ok=True)
        else:
            shutil.copyfile(source, target)

    def install_skill(self, folder: Path, dest: str, skill_text: str) -> None:
        """Copy the skill ``folder`` to ``dest`` and write its ``SKILL.md`` from ``skill_text``."""
        if not Path(folder).is_dir():
            raise SandboxError(f"{folder}: the skill folder does not exist")
        self._copy_in(Path(folder), dest)
        files.write_text(self.path, f"{dest.rstrip('/')}/SKILL.md", skill_text)
        self._snapshot = self._take_snapshot()

    def resolve(self, relative: str) -> Path:
        """The real path of ``relative`` inside the workspace; ``SandboxError`` if it escapes."""
        return confine(self.path, relative)

    def read_text(self, relative: str, max_chars: int = 100_000) -> str:
        return files.read_text(self.path, relative, max_chars)

    def write_text(self, relative: str, text: str) -> int:
        """Write ``text`` (UTF-8), creating folders; returns the number of bytes written."""
        return files.write_text(self.path, relative, text)

    def list_files(self, relative: str = ".", max_entries: int = 500) -> list[str]:
        """Workspace-relative paths of the files below ``relative``, sorted, symlinks left out."""
        return files.list_files(self.path, relative, max_entries, _SKIP)

    def glob(self, pattern: str, max_entries: int = 500) -> list[str]:
        return files.glob(self.path, pattern, max_entries, _SKIP)

    def grep(self, pattern: str, relative: str = ".", max_matches: int = 200) -> list[str]:
        """``path:line: text`` for lines matching the regular expression ``pattern``."""
        return files.grep(self.path, pattern, relative, max_matches, _SKIP)

    async def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        limits: SandboxLimits = DEFAULT_LIMITS,
        binds: Binds = NO_BINDS,
    ) -> ProcessResult:
        """Run ``argv`` in the workspace under ``limits`` (see ``sandbox.process``); ``binds``
        are extra paths it may see (``sandbox.binds``)."""
        if self._closed:
            raise SandboxError("the workspace was already cleaned up")
        return await run_in(self.path, argv, stdin=stdin, limits=limits, binds=binds)

    def _take_snapshot(self) -> Snapshot:
        snapshot: Snapshot = {}
        for relative in walk(self.path, self.path, _SKIP):
            info = os.lstat(self.path / relative)
            snapshot[relative] = (info.st_size, info.st_mtime_ns, self._digest(relative))
        return snapshot

    def _digest(self, relative: str) -> str:
        digest = hashlib.sha256()
        fd = open_confined(self.path, self.path / relative, os.O_RDONLY)
        with os.fdopen(fd, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()

    def written_files(self) -> list[str]:
        """Files created or changed since ``create()``/``install_skill``, sorted (no symlinks).

        A file whose size and mtime are unchanged is taken as unchanged; otherwise its content
        hash decides (a file rewritten with the same bytes was not written)."""
        changed = []
        for relative in walk(self.path, self.path, _SKIP):
            before = self._snapshot.get(relative)
            try:
                info = os.lstat(self.path / relative)
                if before is not None and (info.st_size, info.st_mtime_ns) == before[:2]:
                    continue
                if before is None or info.st_size != before[0] or self._digest(relative) != before[2]:
                    changed.append(relative)
            except OSError:
                continue  # vanished or unreadable since the walk: nothing to keep
        return changed

    def keep(self, dest: Path, max_bytes: int) -> list[str]:
        """Copy the written files to ``dest`` when their total size is at most ``max_bytes``;
        otherwise copy none. Returns the workspace-relative paths copied. The copies are a sink
        like every file of a run directory: a text file is redacted (an agent may have written
        out its own environment)."""
        sizes = {}
        for relative in self.written_files():
            with contextlib.suppress(OSError):
                sizes[relative] = os.lstat(self.path / relative).st_size
        if not sizes or sum(sizes.values()) > max_bytes:
            return []
        kept = []
        for relative in sizes:
            try:
                files.copy_out(self.path, relative, Path(dest) / relative)
            except SandboxError:
                continue  # made unreadable or replaced by a symlink since the listing
            _redact_file(Path(dest) / relative)
            kept.append(relative)
        return kept

    def cleanup(self) -> None:
        """Remove the folder; safe to call twice, and called for every live workspace at exit."""
        with _LIVE_LOCK:
            _LIVE.pop(id(self), None)
        if self._closed:
            return
        self._closed = True
        remove_tree(self.path)

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


async def run_in(
    folder: Path,
    argv: Sequence[str],
    *,
    stdin: str | None = None,
    limits: SandboxLimits = DEFAULT_LIMITS,
    binds: Binds = NO_BINDS,
) -> ProcessResult:
    """Run ``argv`` in an existing ``folder`` as ``Workspace.run`` does: under ``limits``, with
    ``clean_environment(folder)`` (HOME is the folder, TMPDIR its scratch folder, created here).
    For a folder some other code made, such as a finished rollout's workspace being scored."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SandboxError(f"{folder}: the folder does not exist")
    (folder / SCRATCH).mkdir(exist_ok=True)
    return await run_process(argv, cwd=folder, env=clean_environment(folder), stdin=stdin, limits=limits,
                             binds=binds)


def _ignore_symlinks(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if os.path.islink(os.path.join(folder, n))]


def remove_tree(path: Path) -> None:
    """Remove ``path`` even when a command made folders in it unreadable or unwritable."""

    def retry(function, target, _exc_info) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(target), stat.S_IRWXU)
            os.chmod(target, stat.S_IRWXU)
        with contextlib.suppress(OSError):
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target, ignore_errors=True)
            else:
                os.unlink(target)

    if path.exists() or path.is_symlink():
        shutil.rmtree(path, onerror=retry)


@atexit.register
def cleanup_all() -> None:
    """Remove every workspace still alive (registered at import, runs at interpreter exit)."""
    kill_all_running()
    with _LIVE_LOCK:
        live = list(_LIVE.values())
    for workspace in live:
        with contextlib.suppress(Exception):
            workspace.cleanup()


def _redact_file(path: Path) -> None:
    """Mask secrets in a kept text file (binary files, which cannot hold a readable key, stay)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    masked = redact(text)
    if masked != text:
        path.write_text(masked, encoding="utf-8")
