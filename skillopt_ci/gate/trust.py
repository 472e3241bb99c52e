"""What an untrusted head (a fork's pull request) may contribute: documents and task data, never code.

Contract:
- Nothing of an untrusted head is ever checked out. It may contribute *data*: the configured
  skill documents, and the task files of suites that accept them, read from git objects.
  Everything that selects or is code — the configuration, every suite's definition, scorers,
  tool functions, worlds and ``verify`` commands (and its tasks, unless it accepts fork tasks), a
  skill's ``scripts/``, any other file — comes from the trusted tree: the base commit the pull
  request targets, which is on the base repository's branch.
- The decision is made from the difference between the head and its merge base with that base
  commit (``git diff --raw``: every path with its modes and blob), never from the pull request's
  file list, and against the trusted tree's configuration, never the head's.
- A change is a **document** when it is a regular, non-executable file (mode 100644, so no
  symlink) of at most :data:`MAX_DOCUMENT_BYTES`, and is either a configured skill file itself or
  a text file (:data:`DOCUMENT_SUFFIXES`) inside a ``SKILL.md`` skill's folder outside its
  ``scripts/``; and it lies in no suite folder. Deleting such a file is a document change too.
- A change is **task data** when it is one of the task files (:func:`~skillopt_ci.inputs.fork_data.task_files`)
  of a suite whose ``suite.yaml`` *in the trusted tree* sets ``fork_tasks: true`` and may
  (:func:`~skillopt_ci.inputs.fork_data.accepts_fork_tasks`: its environment and scorer run no
  user Python outside the sandbox), and is a regular file of at most
  :data:`~skillopt_ci.inputs.fork_data.MAX_TASK_BYTES` (or is deleted). A fork's own
  ``suite.yaml`` never counts: changing it refuses the run.
- Any other change to the configuration, inside a configured skill folder or inside a suite
  folder is **refused**: the whole run is refused, with each path and why. A change anywhere else
  is **ignored**: it never reaches the disk, so it cannot run.
- :func:`trusted_head` writes one commit: the base commit's tree with the documents and task
  files replaced, its parent the base commit. Checking it out puts only trusted files and that
  data on disk, and the gate's diff from the base is exactly that data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import yaml

from skillopt_ci.core.skill import SKILL_FILE
from skillopt_ci.gate.git import Git, RawChange
from skillopt_ci.inputs.config import Config
from skillopt_ci.inputs.fork_data import MAX_TASK_BYTES, accepts_fork_tasks, task_files

MAX_DOCUMENT_BYTES = 1024 * 1024
DOCUMENT_SUFFIXES = (".md", ".markdown", ".txt")
REGULAR = "100644"


@dataclass(frozen=True)
class TrustPlan:
    """The documents and task files an untrusted head contributes (path → blob, None when
    deleted), the changes that refuse the run (path, why) and the changes that are never used."""

    documents: dict[str, str | None] = field(default_factory=dict)
    refused: tuple[tuple[str, str], ...] = ()
    ignored: tuple[str, ...] = ()
    tasks: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class TrustedLayout:
    """The trusted tree's configured folders, relative to the repository (POSIX)."""

    config_file: str
    skill_files: tuple[str, ...]
    skill_folders: tuple[str, ...]  # the folders of SKILL.md skills
    suite_folders: tuple[str, ...]
    task_files: tuple[str, ...] = ()  # of the suites that accept task data from forks

    @classmethod
    def of(cls, config: Config, config_file: str, top: Path,
           read: Callable[[str], str | None] | None = None) -> TrustedLayout:
        """``read`` gives a file of the trusted tree (repository path → text, None when absent):
        the ``suite.yaml`` files whose ``fork_tasks`` decide which task files a fork may change."""
        top = top.resolve()

        def rel(path: Path) -> str:
            resolved = path.resolve()
            return resolved.relative_to(top).as_posix() if resolved.is_relative_to(top) else "/"

        files = tuple(rel(e.path) for e in config.skills)
        folders = tuple(str(PurePosixPath(f).parent) for f in files if PurePosixPath(f).name == SKILL_FILE)
        suites = tuple(dict.fromkeys(rel(e.suite) for e in config.skills))
        tasks = [t for suite in suites if read is not None for t in _fork_task_files(suite, read)]
        return cls(PurePosixPath(config_file).as_posix(), files, folders, suites, tuple(tasks))


def _fork_task_files(suite: str, read: Callable[[str], str | None]) -> list[str]:
    """The task files of ``suite`` that a fork may change, by the trusted ``suite.yaml``."""
    if suite == "/":
        return []
    text = read(f"{suite}/suite.yaml" if suite not in (".", "") else "suite.yaml")
    try:
        data = yaml.safe_load(text) if text else None
    except yaml.YAMLError:
        return []
    if not isinstance(data, dict) or not accepts_fork_tasks(data):
        return []
    return [name if suite in (".", "") else f"{suite}/{name}" for name in task_files(data)]


def _under(path: str, folder: str) -> bool:
    return folder in (".", "") or path == folder or path.startswith(folder.rstrip("/") + "/")


def classify(change: RawChange, size: int | None, layout: TrustedLayout) -> tuple[str, str]:
    """``("document" | "task" | "refused" | "ignored", why)`` for one changed path. Pure."""
    path = change.path
    if path == layout.config_file:
        return "refused", "the configuration (it chooses the suites, scorers and models)"
    if path in layout.task_files:
        return _task_verdict(change, size)
    if any(_under(path, suite) for suite in layout.suite_folders):
        return "refused", ("a suite folder (suite definitions, scorers and tools come from the base branch; task "
                           "files only where its suite.yaml there sets fork_tasks: true)")
    folder = next((f for f in layout.skill_folders if _under(path, f)), None)
    if path not in layout.skill_files and folder is None:
        return "ignored", "outside every configured skill"
    if folder is not None and _under(path, f"{folder}/scripts"):
        return "refused", "a skill's scripts/ (code the agent may run)"
    if change.deleted:
        return "document", "deleted"
    if change.new_mode != REGULAR:
        return "refused", _not_regular(change.new_mode)
    if path not in layout.skill_files and not path.lower().endswith(DOCUMENT_SUFFIXES):
        return "refused", f"not a text document ({', '.join(DOCUMENT_SUFFIXES)})"
    if size is not None and size > MAX_DOCUMENT_BYTES:
        return "refused", f"{size:,} bytes, over the {MAX_DOCUMENT_BYTES:,}-byte limit for a document"
    return "document", "changed"


def _task_verdict(change: RawChange, size: int | None) -> tuple[str, str]:
    if change.deleted:
        return "task", "deleted"
    if change.new_mode != REGULAR:
        return "refused", _not_regular(change.new_mode)
    if size is not None and size > MAX_TASK_BYTES:
        return "refused", f"{size:,} bytes, over the {MAX_TASK_BYTES:,}-byte limit for a task file"
    return "task", "changed"


def _not_regular(mode: str) -> str:
    kind = {"120000": "a symbolic link", "100755": "an executable file", "160000": "a submodule"}
    return f"{kind.get(mode, 'mode ' + mode)}, not a regular file"


def plan_untrusted(git: Git, layout: TrustedLayout, merge_base: str, head: str) -> TrustPlan:
    """Classify every path the head changed since ``merge_base``."""
    documents: dict[str, str | None] = {}
    tasks: dict[str, str | None] = {}
    refused: list[tuple[str, str]] = []
    ignored: list[str] = []
    for change in git.raw_changes(merge_base, head):
        size = git.blob_size(change.new_blob) if change.new_mode == REGULAR else None
        verdict, why = classify(change, size, layout)
        if verdict in ("document", "task"):
            (documents if verdict == "document" else tasks)[change.path] = None if change.deleted else change.new_blob
        elif verdict == "refused":
            refused.append((change.path, why))
        else:
            ignored.append(change.path)
    return TrustPlan(documents, tuple(refused), tuple(ignored), tasks)


def trusted_head(git: Git, base: str, plan: TrustPlan, head: str) -> str:
    """The commit to evaluate for an untrusted ``head``: ``base``'s tree plus its data."""
    what = "the skill documents and task files" if plan.tasks else "the skill documents"
    return git.commit_with(base, {**plan.documents, **plan.tasks}, f"skillopt-ci: {what} of {head[:12]} on {base[:12]}")


def refusal_text(refused: Sequence[tuple[str, str]], limit: int = 10) -> str:
    """The refused paths as a markdown list (``path``: why), at most ``limit`` lines."""
    from skillopt_ci.render.markdown import code_span

    lines = [f"- {code_span(path, 160)}: {why}" for path, why in refused[:limit]]
    if len(refused) > limit:
        lines.append(f"- and {len(refused) - limit} more")
    return "\n".join(lines)
