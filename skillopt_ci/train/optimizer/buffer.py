"""The optimizer buffer: what later reflections of an epoch should know about earlier steps.

It holds the edits dropped so far (with the reason and what kind of evidence dropped them) and the
train tasks that keep failing, so the optimizer does not repeat an edit that was measured and lost
and looks harder at stubborn tasks. It is a frozen record: every update returns a new buffer, and
``to_dict``/``from_dict`` round-trip exactly, so a resumed run shows the optimizer the same memory.

A dropped edit is *evidence*, not a verdict (:func:`classify_rejection`): it is **refuted** when it
was measured and lost (the validation gate scored it against the incumbent, or it lost its paired
re-runs), and **unproven** when it was dropped for a procedural reason (proposed only by a success
reflection, could not be applied alone, fixed nothing on one noisy sample, an unpaired count, a
rejected slow-update block). :meth:`OptimizerBuffer.render` tells the optimizer not to repeat the
first kind and that it may propose the second again: an optimizer that heeds the memory would
otherwise lose a whole kind of fix to one unlucky sample.

Epoch boundary (:meth:`OptimizerBuffer.for_new_epoch`): failure counts are cleared (a new epoch
revisits every task with a changed skill), but the last :data:`CARRY_OVER` dropped edits are kept,
marked with the epoch they were dropped in.

On disk (schema 2) each entry has ``kind`` and ``evidence``; a schema-1 file still reads, its
entries unproven unless the reason says the validation gate measured them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Annotated, Any, ClassVar

from skillopt_ci.core import codec
from skillopt_ci.core.edits import Edit

BUFFER_SCHEMA_VERSION = 2
READS_VERSIONS = (1, 2)
MAX_REJECTED = 20
MAX_RECURRING = 20
CARRY_OVER = 5
_SHOWN_CHARS = 160
REFUTED_HEADING = "Measured and lost"
UNPROVEN_HEADING = "Tried but not measured — may be proposed again"
# A schema-1 reason that shows the validation gate measured the edit (its own sentences).
_V1_MEASURED = ("validation", "paired over")


class RejectionKind(str, Enum):
    """``refuted``: measured against the incumbent and lost. ``unproven``: dropped before anything
    measured it (a procedural reason or too small a sample)."""

    REFUTED = "refuted"
    UNPROVEN = "unproven"


@dataclass(frozen=True)
class Rejection:
    """Why an edit was dropped: the step's ``reason`` (for people and the epoch log), its
    ``kind`` and the ``evidence`` the optimizer is shown."""

    reason: str
    kind: RejectionKind = RejectionKind.UNPROVEN
    evidence: str = ""


def classify_rejection(reason: str, *, validated: bool = False, candidate_val: float | None = None,
                       incumbent_val: float | None = None, together: int = 1, block: bool = False,
                       pairs: tuple[int, int] | None = None) -> Rejection:
    """The one place that decides whether a dropped edit was refuted or is only unproven.

    Refuted: the validation gate measured the candidate and it lost (``validated``, and it did not
    score above the incumbent: one rejected for a gain too small to be significant is unproven; a
    rejected slow-update ``block`` is not held against the optimizer's step edits), with the means
    as evidence and how many edits were judged ``together``; or its paired re-runs against the
    incumbent (``pairs``: wins, losses over discordant pairs) were lost more often than won.
    Everything else (``pairs is None``, a procedural reason) is unproven, with ``reason`` as the
    evidence. Pure and deterministic.
    """
    if validated and not block:
        if candidate_val is not None and incumbent_val is not None:
            evidence = f"validation {candidate_val:.3f} vs the incumbent's {incumbent_val:.3f}"
            if candidate_val > incumbent_val:  # better, only not by enough: not a loss
                return Rejection(reason, RejectionKind.UNPROVEN, f"{evidence}: higher, but not enough to be accepted")
        elif incumbent_val is not None:
            evidence = f"validation did not beat the incumbent's {incumbent_val:.3f}"
        else:
            evidence = _clip(reason)
        if together > 1:
            evidence += f", judged together with {together - 1} other edit{'s' if together > 2 else ''}"
        return Rejection(reason, RejectionKind.REFUTED, evidence)
    if pairs is not None:
        wins, losses = pairs
        if losses > wins:
            return Rejection(reason, RejectionKind.REFUTED,
                             f"lost {losses} of {wins + losses} discordant paired re-runs against the incumbent")
    return Rejection(reason, RejectionKind.UNPROVEN, _clip(reason))


@dataclass(frozen=True)
class RejectedEdit:
    edit: Edit
    reason: str = ""
    epoch: int = 0
    kind: RejectionKind = RejectionKind.UNPROVEN
    evidence: str = ""

    @property
    def refuted(self) -> bool:
        return self.kind is RejectionKind.REFUTED


@dataclass(frozen=True)
class OptimizerBuffer(codec.Record):
    """``rejected`` keeps the last :data:`MAX_REJECTED` dropped edits (one entry per distinct
    edit, the latest rejection); ``failure_counts`` maps a task id to the number of steps of this
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

    def with_rejected(self, edits: Iterable[Edit], reason: str | Rejection) -> OptimizerBuffer:
        """Add ``edits`` (typically a rejected step's applied edits) with why they were dropped: a
        :class:`Rejection` from :func:`classify_rejection`, or a bare reason (unproven)."""
        why = reason if isinstance(reason, Rejection) else classify_rejection(reason)
        kept = list(self.rejected)
        for edit in edits:
            kept = [r for r in kept if r.edit.key() != edit.key()]
            kept.append(RejectedEdit(edit, why.reason, self.epoch, why.kind, why.evidence))
        return OptimizerBuffer(tuple(kept[-MAX_REJECTED:]), self.failure_counts, epoch=self.epoch)

    def with_failures(self, task_ids: Iterable[str]) -> OptimizerBuffer:
        """Count one more failing step for each distinct id in ``task_ids``; call once per step."""
        counts = dict(self.failure_counts)
        for tid in dict.fromkeys(task_ids):
            counts[tid] = counts.get(tid, 0) + 1
        return OptimizerBuffer(self.rejected, MappingProxyType(counts), epoch=self.epoch)

    def for_new_epoch(self) -> OptimizerBuffer:
        """A buffer for the next epoch: failure counts cleared, the last :data:`CARRY_OVER`
        dropped edits kept."""
        carried = self.rejected[-CARRY_OVER:] if CARRY_OVER else ()
        return OptimizerBuffer(tuple(carried), MappingProxyType({}), epoch=self.epoch + 1)

    def render(self) -> str:
        """Short markdown for the reflection prompt: the refuted edits under
        :data:`REFUTED_HEADING` (do not repeat without a new reason), the unproven ones under
        :data:`UNPROVEN_HEADING` (may come back), the recurring failures; says so when there is
        nothing yet."""
        parts = []
        refuted = [r for r in self.rejected if r.refuted]
        unproven = [r for r in self.rejected if not r.refuted]
        if refuted:
            parts.append(self._section(
                f"{REFUTED_HEADING}: each of these was measured against the skill without it and did worse. "
                "Do not propose one again unless you have a new reason, and state it.", refuted))
        if unproven:
            parts.append(self._section(
                f"{UNPROVEN_HEADING}: each was dropped before anything measured it against the skill "
                "without it (the reason is given; one noisy sample proves nothing). Propose one again, as it "
                "is or improved, when the trajectories call for it.", unproven))
        recurring = self.recurring_failures
        if recurring:
            shown = ", ".join(f"{tid} ({self.failure_counts[tid]} steps)" for tid in recurring)
            parts.append(f"Tasks that failed in two or more steps of this epoch: {shown}.")
        return "\n\n".join(parts) if parts else "Nothing yet: no edit has been dropped and no task has failed twice."

    def _section(self, head: str, entries: list[RejectedEdit]) -> str:
        lines = [head]
        for r in entries:
            when = "" if r.epoch == self.epoch else f" (epoch {r.epoch + 1})"
            lines.append(f"- {describe_edit(r.edit)}: {_clip(r.evidence or r.reason)}{when}")
        return "\n".join(lines)

    def _json_out(self, data: dict[str, Any]) -> dict[str, Any]:
        return {**data, "recurring_failures": list(self.recurring_failures)}  # for readers; not read back

    @classmethod
    def _json_in(cls, data: Any) -> Any:
        """``{}`` or ``None`` is an empty buffer; a schema-1 buffer gains each entry's kind and
        evidence; another schema version is a ``ValueError``."""
        data = data or {}
        version = data.get("schema_version", BUFFER_SCHEMA_VERSION)
        if version not in READS_VERSIONS:
            raise ValueError(f"optimizer buffer schema_version {version!r}, expected {BUFFER_SCHEMA_VERSION}")
        if version == 1:
            data = {**data, "rejected": [_from_v1(r) for r in data.get("rejected") or []]}
        return data


def _from_v1(entry: Any) -> Any:
    """A schema-1 entry: refuted when its reason says the validation gate measured it."""
    if not isinstance(entry, Mapping) or "kind" in entry:
        return entry
    reason = str(entry.get("reason", ""))
    validated = any(word in reason.lower() for word in _V1_MEASURED)
    why = classify_rejection(reason, validated=validated)
    return {**entry, "kind": why.kind.value, "evidence": why.evidence}


def describe_edit(edit: Edit) -> str:
    """One line for a prompt: the operation, its anchor and its text, shortened (a description
    edit says so first)."""
    line = _describe(edit)
    return line if edit.part == "body" else f"in the {edit.part}: {line}"


def _describe(edit: Edit) -> str:
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
