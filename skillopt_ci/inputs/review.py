"""Reading a skill for the static review (:mod:`skillopt_ci.core.skill_review`): its text, and
its folder's files as names, modes and first lines. Nothing is run and no link is followed, so a
fork's skill folder can be reviewed like any other: a symbolic link is listed as not a file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from skillopt_ci.core.skill import SKILL_FILE, is_junk
from skillopt_ci.core.skill_review import Finding, FolderFile, review_skill

MAX_FILES = 2_000  # a folder with more is not a skill folder; the review lists what it read
FIRST_LINE = 200  # bytes read of each file: enough for a shebang


def folder_files(folder: Path) -> dict[str, FolderFile]:
    """The folder's regular files other than its ``SKILL.md`` (and junk), by relative POSIX path."""
    found: dict[str, FolderFile] = {}
    for current, dirs, names in os.walk(folder):  # os.walk does not follow links to directories
        dirs[:] = sorted(d for d in dirs if not is_junk(d, directory=True))
        for name in sorted(names):
            path = Path(current) / name
            rel = path.relative_to(folder).as_posix()
            info = path.lstat()
            if rel == SKILL_FILE or is_junk(name, directory=False) or not stat.S_ISREG(info.st_mode):
                continue
            with path.open("rb") as fh:
                first = fh.read(FIRST_LINE).split(b"\n", 1)[0].decode("utf-8", "replace")
            found[rel] = FolderFile(bool(info.st_mode & stat.S_IXUSR), first)
            if len(found) >= MAX_FILES:
                return found
    return found


def review_path(skill: Path, shown: str, *, base_text: str | None = None, token_limit: int = 5000) -> list[Finding]:
    """The static review of the skill file ``skill`` (shown as ``shown``): a ``SKILL.md`` is
    reviewed with its folder, a lone file alone."""
    text = skill.read_text(encoding="utf-8", errors="replace")
    files = folder_files(skill.parent) if skill.name == SKILL_FILE else None
    return review_skill(text, shown, files, base_text=base_text, token_limit=token_limit)
