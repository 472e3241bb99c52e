"""The optimizer buffer: what later reflections of an epoch should know about earlier steps.

It holds the edits the gate rejected (with the reason) and the train tasks that keep failing, so
the optimizer does not propose the same losing edit again and looks harder at stubborn tasks. It
is a frozen record: every update returns a new buffer, and ``to_dict``/``from_dict`` round-trip
exactly, so a resumed run shows the optimizer the same memory.

Epoch boundary (:meth:`OptimizerBuffer.for_new_epoch`): failure counts are cleared (a new epoch
revisits every task with a changed skill), but the last :data:`CARRY_OVER` rejected edits are
kept, marked with the epoch they were rejected in, so the first steps of the next epoch do not
immediately re-propose them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Annotated, Any, ClassVar

from skillopt_ci.core import codec
from skillopt_ci.core.edits import Edit

BUFFER_SCHEMA_VERSION = 1
MAX_REJECTED = 20
MAX_RECURRING = 20
CARRY_OVER = 5
_SHOWN_CHARS = 160


@dataclass(frozen=True)
class RejectedEdit:
    edit: Edit
    reason: str = ""
    epoch: int = 0


@dataclass(frozen=True)
class OptimizerBuffer(codec.Record):
    """``rejected`` keeps the last :data:`MAX_REJECTED` rejected edits (one entry per distinct
    edit, the latest reason); ``failure_counts`` maps a task id to the number of steps of this
    epoch in which it failed, in first-failure order."""

    JSON_HEAD: ClassVar = {"schema_version": BUFFER_SCHEMA_VERSION}

    epoch: int = field(default=0, kw_only=True)  # first in the JSON, last in the constructor
    rejected: tuple[RejectedEdit, ...] = ()
    failure_counts: Annotated[Mapping[str, int], codec.FROZEN_MAP] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def recurring_failures(self) -> tuple[str, ...]:
        """Task ids failing in two or more steps of this epoch: most failures first, ties in
        first-failure order, at most :data:`MAX_RECURRING`."""
        order = {tid: i for i, tid in enumerate(self.failure_counts)}
        ids = [tid for tid, n in self.failure_counts.items() if n >= 2]
        ids.sort(key=lambda tid: (-self.failure_counts[tid], order[tid]))
        return tuple(ids[:MAX_RECURRING])

    def with_rejected(self, edits: Iterable[Edit], reason: str) -> OptimizerBuffer:
        """Add ``edits`` (typically a rejected step's applied edits) with the gate's ``reason``."""
        kept = list(self.rejected)
        for edit in edits:
            kept = [r for r in kept if r.edit.key() != edit.key()]
            kept.append(RejectedEdit(edit, reason, self.epoch))
        return OptimizerBuffer(tuple(kept[-MAX_REJECTED:]), self.failure_counts, epoch=self.epoch)

    def with_failures(self, task_ids: Iterable[str]) -> OptimizerBuffer:
        """Count one more failing step for each distinct id in ``task_ids``; call once per step."""
        counts = dict(self.failure_counts)
        for tid in dict.fromkeys(task_ids):
            counts[tid] = counts.get(tid, 0) + 1
        return OptimizerBuffer(self.rejected, MappingProxyType(counts), epoch=self.epoch)

    def for_new_epoch(self) -> OptimizerBuffer:
        """A buffer for the next epoch: failure counts cleared, the last :data:`CARRY_OVER`
        rejected edits kept."""
        carried = self.rejected[-CARRY_OVER:] if CARRY_OVER else ()
        return OptimizerBuffer(tuple(carried), MappingProxyType({}), epoch=self.epoch + 1)

    def render(self) -> str:
        """Short markdown for the reflection prompt; says so when there is nothing yet."""
        parts = []
        if self.rejected:
            lines = ["Edits the validation gate rejected (do not propose them again unchanged):"]
            for r in self.rejected:
                when = "" if r.epoch == self.epoch else f" (epoch {r.epoch + 1})"
                lines.append(f"- {describe_edit(r.edit)}: {_clip(r.reason)}{when}")
            parts.append("\n".join(lines))
        recurring = self.recurring_failures
        if recurring:
            shown = ", ".join(f"{tid} ({self.failure_counts[tid]} steps)" for tid in recurring)
            parts.append(f"Tasks that failed in two or more steps of this epoch: {shown}.")
        return "\n\n".join(parts) if parts else "Nothing yet: no edit has been rejected and no task has failed twice."

    def _json_out(self, data: dict[str, Any]) -> dict[str, Any]:
        return {**data, "recurring_failures": list(self.recurring_failures)}  # for readers; not read back

    @classmethod
    def _json_in(cls, data: Any) -> Any:
        """``{}`` or ``None`` is an empty buffer; another schema version is a ``ValueError``."""
        version = (data or {}).get("schema_version", BUFFER_SCHEMA_VERSION)
        if version != BUFFER_SCHEMA_VERSION:
            raise ValueError(f"optimizer buffer schema_version {version!r}, expected {BUFFER_SCHEMA_VERSION}")
        return data or {}


def describe_edit(edit: Edit) -> str:
    """One line for a prompt: the operation, its anchor and its text, shortened."""
    if edit.op == "append":
        return f'append "{_clip(edit.text)}"'
    if edit.op == "delete":
        return f'delete "{_clip(edit.anchor)}"'
    if edit.op == "insert_after":
        return f'insert after "{_clip(edit.anchor)}": "{_clip(edit.text)}"'
    return f'replace "{_clip(edit.anchor)}" with "{_clip(edit.text)}"'


def _clip(text: str, limit: int = _SHOWN_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
