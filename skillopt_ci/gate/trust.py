"""What an untrusted head (a fork's pull request) may contribute: documents, never code.

Contract:
- Nothing of an untrusted head is ever checked out. It may contribute *data*: the configured
  skill documents, read from git objects. Everything that selects or is code — the
  configuration, every suite folder (definitions, tasks, scorers, tool functions, worlds,
  ``verify`` commands), a skill's ``scripts/``, any other file — comes from the trusted tree: the
  base commit the pull request targets, which is on the base repository's branch.
- The decision is made from the difference between the head and its merge base with that base
  commit (``git diff --raw``: every path with its modes and blob), never from the pull request's
  file list, and against the trusted tree's configuration, never the head's.
- A change is a **document** when it is a regular, non-executable file (mode 100644, so no
  symlink) of at most :data:`MAX_DOCUMENT_BYTES`, and is either a configured skill file itself or
  a text file (:data:`DOCUMENT_SUFFIXES`) inside a ``SKILL.md`` skill's folder outside its
  ``scripts/``; and it lies in no suite folder. Deleting such a file is a document change too.
- Any other change to the configuration, inside a configured skill folder or inside a suite
  folder is **refused**: the whole run is refused, with each path and why. A change anywhere else
  is **ignored**: it never reaches the disk, so it cannot run.
- :func:`trusted_head` writes one commit: the base commit's tree with the documents replaced,
  its parent the base commit. Checking it out puts only trusted files and the documents on disk,
  and the gate's diff from the base is exactly the documents.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from skillopt_ci.core.skill import SKILL_FILE
from skillopt_ci.gate.git import Git, RawChange
from skillopt_ci.inputs.config import Config

MAX_DOCUMENT_BYTES = 1024 * 1024
DOCUMENT_SUFFIXES = (".md", ".markdown", ".txt")
REGULAR = "100644"


@dataclass(frozen=True)
class TrustPlan:
    """The documents an untrusted head contributes (path → blob, None when deleted), the changes
    that refuse the run (path, why) and the changes that are never used."""

    documents: dict[str, str | None] = field(default_factory=dict)
    refused: tuple[tuple[str, str], ...] = ()
    ignored: tuple[str, ...] = ()


@dataclass(frozen=True)
class TrustedLayout:
    """The trusted tree's configured folders, relative to the repository (POSIX)."""

    config_file: str
    skill_files: tuple[str, ...]
    skill_folders: tuple[str, ...]  # the folders of SKILL.md skills
    suite_folders: tuple[str, ...]

    @classmethod
    def of(cls, config: Config, config_file: str, top: Path) -> TrustedLayout:
        top = top.resolve()

        def rel(path: Path) -> str:
            resolved = path.resolve()
            return resolved.relative_to(top).as_posix() if resolved.is_relative_to(top) else "/"

        files = tuple(rel(e.path) for e in config.skills)
        folders = tuple(str(PurePosixPath(f).parent) for f in files if PurePosixPath(f).name == SKILL_FILE)
        return cls(PurePosixPath(config_file).as_posix(), files, folders, tuple(rel(e.suite) for e in config.skills))


def _under(path: str, folder: str) -> bool:
    return folder in (".", "") or path == folder or path.startswith(folder.rstrip("/") + "/")


def classify(change: RawChange, size: int | None, layout: TrustedLayout) -> tuple[str, str]:
    """``("document" | "refused" | "ignored", why)`` for one changed path. Pure."""
    path = change.path
    if path == layout.config_file:
        return "refused", "the configuration (it chooses the suites, scorers and models)"
    if any(_under(path, suite) for suite in layout.suite_folders):
        return "refused", "a suite folder (suite definitions, tasks, scorers and tools come from the base branch)"
    folder = next((f for f in layout.skill_folders if _under(path, f)), None)
    if path not in layout.skill_files and folder is None:
        return "ignored", "outside every configured skill"
    if folder is not None and _under(path, f"{folder}/scripts"):
        return "refused", "a skill's scripts/ (code the agent may run)"
    if change.deleted:
        return "document", "deleted"
    if change.new_mode != REGULAR:
        kind = {"120000": "a symbolic link", "100755": "an executable file", "160000": "a submodule"}
        return "refused", f"{kind.get(change.new_mode, 'mode ' + change.new_mode)}, not a regular file"
    if path not in layout.skill_files and not path.lower().endswith(DOCUMENT_SUFFIXES):
        return "refused", f"not a text document ({', '.join(DOCUMENT_SUFFIXES)})"
    if size is not None and size > MAX_DOCUMENT_BYTES:
        return "refused", f"{size:,} bytes, over the {MAX_DOCUMENT_BYTES:,}-byte limit for a document"
    return "document", "changed"


def plan_untrusted(git: Git, layout: TrustedLayout, merge_base: str, head: str) -> TrustPlan:
    """Classify every path the head changed since ``merge_base``."""
    documents: dict[str, str | None] = {}
    refused: list[tuple[str, str]] = []
    ignored: list[str] = []
    for change in git.raw_changes(merge_base, head):
        size = git.blob_size(change.new_blob) if change.new_mode == REGULAR else None
        verdict, why = classify(change, size, layout)
        if verdict == "document":
            documents[change.path] = None if change.deleted else change.new_blob
        elif verdict == "refused":
            refused.append((change.path, why))
        else:
            ignored.append(change.path)
    return TrustPlan(documents, tuple(refused), tuple(ignored))


def trusted_head(git: Git, base: str, plan: TrustPlan, head: str) -> str:
    """The commit to evaluate for an untrusted ``head``: ``base``'s tree plus the documents."""
    return git.commit_with(base, plan.documents, f"skillopt-ci: the skill documents of {head[:12]} on {base[:12]}")


def refusal_text(refused: Sequence[tuple[str, str]], limit: int = 10) -> str:
    """The refused paths as a markdown list (``path``: why), at most ``limit`` lines."""
    from skillopt_ci.render.markdown import code_span

    lines = [f"- {code_span(path, 160)}: {why}" for path, why in refused[:limit]]
    if len(refused) > limit:
        lines.append(f"- and {len(refused) - limit} more")
    return "\n".join(lines)
