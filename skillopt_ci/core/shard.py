"""Stable slices of a suite for a matrix of CI jobs (``--shard i/n``).

A task belongs to shard ``1 + (sha256(task id) mod n)``: the assignment depends only on the task's
id, so adding or removing other tasks never moves a task to another shard, and every job of a
matrix computes the same partition without talking to the others.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import overload

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.task import Task

_SHARD_RE = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, task_id: str) -> bool:
        digest = hashlib.sha256(task_id.encode("utf-8")).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index - 1

    def select(self, tasks: Sequence[Task]) -> tuple[Task, ...]:
        return tuple(t for t in tasks if self.holds(t.id))


@overload
def parse_shard(text: str) -> Shard: ...
@overload
def parse_shard(text: None) -> None: ...
@overload
def parse_shard(text: str | None) -> Shard | None: ...
def parse_shard(text: str | None) -> Shard | None:
    """``"2/4"`` → Shard(2, 4). Raises :class:`InputError` on anything else."""
    if text is None:
        return None
    m = _SHARD_RE.match(text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise InputError(f"--shard {text!r} must look like i/n with 1 <= i <= n, e.g. 2/4")
    return Shard(int(m.group(1)), int(m.group(2)))
