"""A task: one example of an eval suite, and the files it references.

A task's ``files`` and ``images`` fields name files of the suite directory: a path, a list of
paths, or a mapping {path in the workspace: path in the suite directory}. :func:`task_paths` reads
either field the same way for the suite loader (which checks and hashes the files) and for the
environments (which copy or send them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from skillopt_ci.core.errors import InputError

PATH_FIELDS = ("files", "images")


@dataclass(frozen=True)
class Task:
    """One task record of a suite split.

    ``fields`` holds the whole record as read from the file (``id``, ``input``, ``expected``,
    ``metadata`` and anything else), so prompt templates and scorers can reach any field.
    ``source`` is ``file:line`` (or ``file[index]`` for a JSON list), used in error messages.
    """

    id: str
    input: Any
    expected: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)
    source: str = ""

    @property
    def should_trigger(self) -> bool | None:
        """A trigger task's ``should_trigger`` (``None``: not a trigger task; see scorers.trigger)."""
        value = self.fields.get("should_trigger")
        return value if isinstance(value, bool) else None

    def get(self, dotted: str) -> Any:
        """Look up ``a.b.c`` in the task record; raises KeyError naming the missing part."""
        value: Any = self.fields
        for part in dotted.split("."):
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                raise KeyError(dotted)
        return value


def task_paths(task: Task, key: str) -> dict[str, str]:
    """The task's ``files`` or ``images`` as {path in the workspace: path relative to the suite
    directory}. A list keeps each path as it is (an asset ``@root/path`` lands at ``path``); a mapping names the workspace path. Any other
    shape is an :class:`InputError` at the task's source."""
    value = task.fields.get(key)
    if value is None:
        return {}
    if isinstance(value, str):
        return {_workspace_name(value): value}
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return {_workspace_name(v): v for v in value}
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return dict(value)
    raise InputError(f"task {task.id!r}: {key!r} must be a path, a list of paths or a mapping of paths",
                     where=task.source or None)


def _workspace_name(path: str) -> str:
    """Where a listed file lands in a workspace: its own path, or for an asset ``@root/rel``, ``rel``."""
    return path.partition("/")[2] or path if path.startswith("@") else path
