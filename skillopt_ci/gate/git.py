"""Git, through the real ``git`` command (subprocess, argument lists: nothing goes through a shell).

The gate reads the base version of a file with ``git show REF:path``: it never checks out the base,
so the working tree (and the head version) are never touched.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from skillopt_ci.core.errors import InputError, RuntimeFailure


@dataclass(frozen=True)
class RawChange:
    """One path of ``git diff --raw`` (renames split into a deletion and an addition): the mode
    and blob on each side (``mode`` ``000000`` where the side has no file)."""

    path: str
    old_mode: str
    new_mode: str
    new_blob: str

    @property
    def deleted(self) -> bool:
        return self.new_mode == "000000"


@dataclass(frozen=True)
class FileChange:
    """One path changed between two commits. ``status`` is git's letter: A, M, D, R, C, T."""

    status: str
    path: str
    old_path: str | None = None


class Git:
    """A repository at ``root`` (any directory inside the work tree)."""

    def __init__(self, root: Path):
        self.root = root

    def _run(self, *args: str, check: bool = True, env: dict[str, str] | None = None,
             timeout: float = 120, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        try:
            proc = subprocess.run(["git", *args], cwd=self.root, capture_output=True, timeout=timeout,
                                  env={**os.environ, **env} if env else None, input=stdin)
        except FileNotFoundError:
            raise RuntimeFailure("git is not installed or not on PATH") from None
        except subprocess.TimeoutExpired:
            raise RuntimeFailure(f"git {' '.join(args[:2])} timed out") from None
        if check and proc.returncode != 0:
            message = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            raise RuntimeFailure(f"git {args[0]} failed: {message[-1] if message else proc.returncode}")
        return proc

    def top_level(self) -> Path:
        proc = self._run("rev-parse", "--show-toplevel", check=False)
        if proc.returncode != 0:
            raise InputError("not a git repository (nor inside one)", where=str(self.root),
                             hint="run the gate from a clone; in Actions, use actions/checkout with fetch-depth: 0")
        return Path(proc.stdout.decode().strip())

    def resolve(self, ref: str) -> str:
        """The commit sha of ``ref``. Unknown refs are an input error (exit 2)."""
        if ref.startswith("-"):
            raise InputError(f"invalid git ref {ref!r}")
        proc = self._run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        if proc.returncode != 0:
            raise InputError(
                f"unknown git ref {ref!r}",
                hint="fetch it first (actions/checkout with fetch-depth: 0, or git fetch origin <branch>)",
            )
        return proc.stdout.decode().strip()

    def merge_base(self, a: str, b: str) -> str:
        proc = self._run("merge-base", a, b, check=False)
        if proc.returncode != 0:
            raise InputError(f"{a[:12]} and {b[:12]} have no common ancestor",
                             hint="fetch the full history (fetch-depth: 0)")
        return proc.stdout.decode().strip()

    def changed_files(self, base: str, head: str) -> list[FileChange]:
        """Paths that differ between two commits, with renames detected."""
        return self._diff(base, head)

    def worktree_changes(self, base: str) -> list[FileChange]:
        """Paths that differ between ``base`` and the working tree, untracked files included."""
        changes = self._diff(base)
        untracked = self._run("ls-files", "--others", "--exclude-standard", "-z").stdout.decode("utf-8", "replace")
        known = {c.path for c in changes}
        changes += [FileChange("A", p) for p in untracked.split("\0") if p and p not in known]
        return changes

    def _diff(self, *refs: str) -> list[FileChange]:
        out = self._run("diff", "--name-status", "-M", "-z", *refs, "--").stdout.decode("utf-8", "replace")
        fields = out.split("\0")
        changes: list[FileChange] = []
        i = 0
        while i < len(fields) and fields[i]:
            status = fields[i][0]
            if status in "RC":
                changes.append(FileChange(status, fields[i + 2], fields[i + 1]))
                i += 3
            else:
                changes.append(FileChange(status, fields[i + 1]))
                i += 2
        return changes

    def show(self, ref: str, path: str) -> str | None:
        """The text of ``path`` at ``ref``; ``None`` when the file does not exist there."""
        proc = self._run("show", f"{ref}:{path}", check=False)
        if proc.returncode != 0:
            return None
        return proc.stdout.decode("utf-8", "replace")

    def exists(self, ref: str, path: str) -> bool:
        return self._run("cat-file", "-e", f"{ref}:{path}", check=False).returncode == 0

    def export(self, ref: str, folder: str, dest: Path) -> None:
        """Write the tracked files of ``folder`` at ``ref`` into ``dest`` (which must exist), as
        they were committed: regular files and symbolic links (links are recreated as stored,
        so a link that leaves the folder is still seen, and refused, by the skill loader)."""
        spec = f"{ref}:{folder}" if folder not in ("", ".") else f"{ref}:"
        proc = self._run("archive", "--format=tar", spec, check=False)
        if proc.returncode != 0:
            return  # the folder does not exist at ref: nothing to write
        with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
            for member in tar.getmembers():
                rel = PurePosixPath(member.name)
                if rel.is_absolute() or ".." in rel.parts or not rel.parts:
                    continue  # git never writes such names; refuse them anyway
                target = dest.joinpath(*rel.parts)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                elif member.issym():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.symlink(member.linkname, target)
                elif member.isfile():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    source = tar.extractfile(member)
                    target.write_bytes(source.read() if source else b"")
                    if member.mode & 0o100:
                        target.chmod(0o755)

    def raw_changes(self, base: str, head: str) -> list[RawChange]:
        """Every path that differs between two commits, with modes and the head's blob; renames
        are not detected (a rename is its deletion and its addition), so no path hides."""
        out = self._run("diff", "--raw", "-z", "--no-renames", "--no-abbrev", base, head, "--").stdout
        fields = out.decode("utf-8", "surrogateescape").split("\0")
        changes = []
        for meta, path in zip(fields[0::2], fields[1::2], strict=False):
            if not meta.startswith(":"):
                break
            old_mode, new_mode, _old_blob, new_blob, _status = meta[1:].split(" ")
            changes.append(RawChange(path, old_mode, new_mode, new_blob))
        return changes

    def blob_size(self, blob: str) -> int:
        return int(self._run("cat-file", "-s", blob).stdout.decode().strip())

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return self._run("merge-base", "--is-ancestor", ancestor, descendant, check=False).returncode == 0

    def fetch(self, remote: str, refspec: str) -> None:
        """``git fetch`` of one refspec (objects and the ref only: the work tree is not touched)."""
        self._run("fetch", "--no-tags", "--quiet", remote, refspec, timeout=300)

    def checkout_detached(self, sha: str) -> None:
        self._run("checkout", "--quiet", "--detach", sha, timeout=300)

    def commit_with(self, base: str, files: dict[str, str | None], message: str) -> str:
        """A new commit whose parent is ``base`` and whose tree is ``base``'s with ``files``
        replaced: path → the blob to put there as a regular file (mode 100644), or None to remove
        it. Written through a private index; no ref, the index and the work tree are untouched."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="skillopt-index-") as scratch:
            env = {"GIT_INDEX_FILE": str(Path(scratch) / "index"), "GIT_AUTHOR_NAME": "skillopt-ci",
                   "GIT_AUTHOR_EMAIL": "skillopt-ci@users.noreply.github.com",
                   "GIT_COMMITTER_NAME": "skillopt-ci", "GIT_COMMITTER_EMAIL": "skillopt-ci@users.noreply.github.com"}
            self._run("read-tree", base, env=env)
            for path, blob in sorted(files.items()):
                if blob is None:
                    self._run("update-index", "--force-remove", "--", path, env=env)
                else:
                    self._run("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
            tree = self._run("write-tree", env=env).stdout.decode().strip()
            return self._run("commit-tree", tree, "-p", base, "-m", message, env=env).stdout.decode().strip()

    def write_blob(self, data: bytes) -> str:
        """Store ``data`` as a blob in the object database; its SHA."""
        return self._run("hash-object", "-w", "--stdin", stdin=data).stdout.decode().strip()

    def blob(self, ref: str, path: str) -> bytes | None:
        """The bytes of ``path`` at ``ref`` exactly as committed, or None when it is not there."""
        proc = self._run("cat-file", "blob", f"{ref}:{path}", check=False)
        return proc.stdout if proc.returncode == 0 else None

    def parents(self, sha: str) -> list[str]:
        return self._run("rev-list", "--parents", "-n", "1", sha).stdout.decode().split()[1:]

    def message(self, sha: str) -> str:
        return self._run("log", "-1", "--format=%B", sha).stdout.decode("utf-8", "replace")

    def push(self, remote: str, refspec: str) -> str | None:
        """``git push`` of one refspec; None when it was pushed, else why not: the remote's own
        words and git's status of the ref (a branch that moved is "[rejected] (non-fast-forward)"
        unless the refspec forces), or git's last error line when no ref was sent."""
        proc = self._run("push", "--quiet", "--porcelain", remote, refspec, check=False, timeout=300)
        if proc.returncode == 0:
            return None
        out = proc.stdout.decode("utf-8", "replace").splitlines()
        err = [line.strip() for line in proc.stderr.decode("utf-8", "replace").splitlines()  # git pads remote lines
               if line.strip() and not line.startswith("hint:")]
        status = [line.split("\t")[-1] for line in out if line.startswith("!")]  # the porcelain's refused refs
        remote_said = [line for line in err if line.startswith("remote:")]
        said = remote_said[:1] + status if status else err[-1:]
        return "; ".join(said) or f"git push exited with {proc.returncode}"
