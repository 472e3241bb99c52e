"""Which configured skills a change touches, found with real ``git``.

A skill changed when its file or its suite directory changed between the merge base of the two
refs and the head (the working tree when no head ref is given). A ``SKILL.md`` skill is its whole
folder: a change to any file in it (``scripts/``, ``references/``, assets; caches and VCS files
aside, and the suite's own files when the suite sits inside it) modifies the skill, and the
change lists those files. A skill added at head is ``added``; a skill the config listed at base
whose file is gone is ``deleted``. Reads git only: no model call, no evaluation.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.skill import SKILL_FILE, is_junk
from skillopt_ci.gate.git import FileChange, Git
from skillopt_ci.gate.verdict import SkillChange
from skillopt_ci.inputs.config import Config


def find_changes(git: Git, config: Config, base: str, head: str | None) -> list[SkillChange]:
    """Configured skills whose file or suite changed between ``base`` and ``head`` (the working
    tree when ``head`` is None), plus skills configured at ``base`` whose file was deleted."""
    top = git.top_level().resolve()
    changes = git.changed_files(base, head) if head else git.worktree_changes(base)
    by_path = {c.path: c for c in changes}
    found: list[SkillChange] = []
    for entry in config.skills:
        path = _relative(entry.path, top)
        suite = _relative(entry.suite, top)
        change = by_path.get(path)
        files = folder_changes(changes, path, suite)
        if change is not None and change.status == "A":
            found.append(SkillChange(entry.name, path, suite, "added"))
        elif change is not None and change.status in "MTRC":
            found.append(SkillChange(entry.name, path, suite, "modified", change.old_path or path, files))
        elif files and (change is None or change.status != "D"):
            found.append(SkillChange(entry.name, path, suite, "modified", path, files))
        elif any(c.path.startswith(suite + "/") or (c.old_path or "").startswith(suite + "/") for c in changes):
            found.append(SkillChange(entry.name, path, suite, "suite-changed", path))
    listed = {c.path for c in found}
    for name, path, suite in _skills_at(git, base, _relative(config.root, top)):
        if path not in listed and path in by_path and by_path[path].status == "D":
            found.append(SkillChange(name, path, suite, "deleted", path))
    return found


def folder_changes(changes: Sequence[FileChange], skill_path: str, suite: str) -> tuple[tuple[str, str], ...]:
    """The files of ``skill_path``'s folder (when it is a ``SKILL.md``) that changed, besides
    the ``SKILL.md`` itself, junk, and the suite's files: sorted (path in the folder, how)."""
    if Path(skill_path).name != SKILL_FILE:
        return ()
    folder = Path(skill_path).parent.as_posix()
    prefix = "" if folder in ("", ".") else folder + "/"
    suite_prefix = suite.rstrip("/") + "/"

    def inside(path: str | None) -> str | None:
        if not path or not path.startswith(prefix) or path == skill_path or path.startswith(suite_prefix):
            return None
        rel = path[len(prefix):]
        parts = rel.split("/")
        junk = any(is_junk(d, directory=True) for d in parts[:-1]) or is_junk(parts[-1], directory=False)
        return None if junk else rel

    found: dict[str, str] = {}
    for c in changes:
        new, old = inside(c.path), inside(c.old_path) if c.status == "R" else None
        if old:
            found[old] = "deleted"
        if new:
            found[new] = {"A": "added", "D": "deleted"}.get(c.status, "added" if c.status in "RC" else "changed")
    return tuple(sorted(found.items()))


def _relative(path: Path, top: Path) -> str:
    try:
        return path.resolve().relative_to(top).as_posix()
    except ValueError:
        raise InputError(f"{path} is outside the git repository {top}") from None


def _skills_at(git: Git, ref: str, config_dir: str) -> list[tuple[str, str, str]]:
    """(name, path, suite) of the skills the config listed at ``ref``, read without validation."""
    prefix = "" if config_dir in ("", ".") else config_dir + "/"
    text = git.show(ref, f"{prefix}skillopt.yml")
    try:
        data = yaml.safe_load(text) if text else None
    except yaml.YAMLError:
        return []
    out = []
    for item in (data or {}).get("skills") or []:
        if isinstance(item, dict) and isinstance(item.get("path"), str):
            path = Path(prefix + item["path"]).as_posix()
            default = Path(path).parent.name if Path(path).name == "SKILL.md" else Path(path).stem
            out.append((str(item.get("name") or default), path, prefix + str(item.get("suite", ""))))
    return out


def resolve_changes(config: Config, git: Git, base_ref: str, head_ref: str | None,
                    only: Sequence[str] = ()) -> tuple[str, str, str, list[SkillChange]]:
    """(base sha, head sha, merge base, changed skills) — cheap: git only, no model call."""
    base_sha = git.resolve(base_ref)
    head_sha = git.resolve(head_ref) if head_ref else git.resolve("HEAD")
    merge_base = git.merge_base(base_sha, head_sha)
    changes = find_changes(git, config, merge_base, head_sha if head_ref else None)
    if only:
        unknown = sorted(set(only) - {c.name for c in config.skills})
        if unknown:
            raise InputError(f"no configured skill named {', '.join(unknown)}",
                             hint=f"configured: {', '.join(c.name for c in config.skills)}")
        changes = [c for c in changes if c.name in only]
    return base_sha, head_sha, merge_base, changes


def default_base_ref(git: Git) -> str:
    """The branch a change is usually compared with: origin/HEAD, origin/main, main, master."""
    git.top_level()  # outside a repository, say so rather than "no default base branch"
    for ref in ("origin/HEAD", "origin/main", "origin/master", "main", "master"):
        try:
            git.resolve(ref)
            return ref
        except InputError:
            continue
    raise InputError("no default base branch found", hint="pass --base REF")
