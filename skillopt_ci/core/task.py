"""A task: one example of an eval suite."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
