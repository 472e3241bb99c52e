"""Which suites take task data from a fork's pull request, and which of their files that is. Pure.

Contract:
- A suite opts in with ``fork_tasks: true`` in its ``suite.yaml``. The trust model
  (:mod:`skillopt_ci.gate.trust`) reads the opt-in from the trusted tree, never from the fork.
- Fork task data may only reach code that runs in the sandbox, or no code at all. So a suite may
  opt in only when its environment is one whose model-steered code runs in the sandbox
  (:data:`FORK_TASK_ENVIRONMENTS`: ``chat`` runs none; ``tools``, ``codex``, ``claude-code`` and
  ``codegen`` run theirs there, function tools included) and its scorer is not user Python
  (``python`` runs in skillopt-ci's process). ``interactive`` is refused (its world is user
  Python in skillopt-ci's process, and gets the task), and so is an environment a plug-in
  provides (its code runs in skillopt-ci's process). :func:`fork_tasks_problem` says why, and
  validation makes that exit 2.
- A suite's **task files** are the split files its loader reads (:func:`task_files`): the
  declared ``splits`` paths, else ``train``/``val``/``test`` with ``.jsonl`` or ``.json``; only
  ``.jsonl`` and ``.json`` names inside the suite folder, so never ``suite.yaml``, a ``.py`` or
  anything under ``__pycache__``. A fork's version must be a regular file (mode 100644) of at
  most :data:`MAX_TASK_BYTES`; the trust model checks that.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

FORK_TASKS_KEY = "fork_tasks"
FORK_TASK_ENVIRONMENTS = ("chat", "tools", "codex", "claude-code", "codegen")
IN_PROCESS_SCORERS = ("python",)
TASK_SUFFIXES = (".jsonl", ".json")
MAX_TASK_BYTES = 8 * 1024 * 1024
_SPLITS = ("train", "val", "test")


def environment_type(data: Mapping[str, Any]) -> str:
    env = data.get("environment", "chat")
    kind = env.get("type") if isinstance(env, Mapping) else env
    return kind if isinstance(kind, str) else "chat"


def fork_tasks_problem(data: Mapping[str, Any]) -> str | None:
    """Why the suite (its ``suite.yaml`` as data) may not take task data from forks; None when
    it may (or does not ask to)."""
    if data.get(FORK_TASKS_KEY) is not True:
        return None
    scorer = data.get("scorer")
    kind = scorer.get("type") if isinstance(scorer, Mapping) else scorer
    if kind in IN_PROCESS_SCORERS:
        return (f"a suite whose scorer is {kind!r} cannot take task data from forks: the scorer is this "
                "repository's Python, run in skillopt-ci's own process (with the model keys), and a fork's "
                "tasks would reach it; remove fork_tasks or use a built-in or a verify scorer (verify runs "
                "in the sandbox)")
    env = environment_type(data)
    if env not in FORK_TASK_ENVIRONMENTS:
        why = ("its world is this repository's Python, run in skillopt-ci's own process, and gets each task"
               if env == "interactive" else "a plug-in environment runs in skillopt-ci's own process")
        return (f"a suite in the {env!r} environment cannot take task data from forks: {why}; remove "
                f"fork_tasks (it is allowed with: {', '.join(FORK_TASK_ENVIRONMENTS)})")
    return None


def accepts_fork_tasks(data: Any) -> bool:
    """Whether a trusted ``suite.yaml`` (as data) lets forks change its task files."""
    return isinstance(data, Mapping) and data.get(FORK_TASKS_KEY) is True and fork_tasks_problem(data) is None


def task_files(data: Mapping[str, Any]) -> tuple[str, ...]:
    """The files the suite's loader reads tasks from, relative to its folder (POSIX), whether or
    not they exist: what a fork may change when the suite accepts fork tasks."""
    splits = data.get("splits")
    declared: Mapping[str, Any] = splits if isinstance(splits, Mapping) else {}
    found: list[str] = []
    for split in _SPLITS:
        named = declared.get(split)
        names = [named] if isinstance(named, str) else [f"{split}{suffix}" for suffix in TASK_SUFFIXES]
        found += [n for n in (_inside(name) for name in names) if n]
    return tuple(dict.fromkeys(found))


def _inside(name: str) -> str | None:
    path = PurePosixPath(name.replace("\\", "/"))
    parts = path.parts
    if (not parts or path.is_absolute() or ".." in parts or "__pycache__" in parts
            or not path.name.lower().endswith(TASK_SUFFIXES) or path.name == "suite.yaml"):
        return None
    return path.as_posix()
