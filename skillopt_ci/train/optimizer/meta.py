"""The meta skill: the optimizer's own short memory of which kinds of edits helped.

At an epoch boundary the optimizer reads the epoch's edits — accepted or rejected, and why — and
rewrites a few lines of advice to itself ("adding a missing keyword rule helped; broad catch-all
rules were measured and lost"). A rejected edit is marked refuted (measured and lost) or unproven
(dropped before anything measured it), so one unlucky sample does not become a lesson. The meta skill is shown to later reflections only; it never enters the
deployed skill.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from skillopt_ci.core import codec
from skillopt_ci.core.codec import Record
from skillopt_ci.core.edits import Edit
from skillopt_ci.core.text import clip, fence
from skillopt_ci.models.base import Message, ModelCaller, Usage
from skillopt_ci.prompts.render import render_template
from skillopt_ci.train.optimizer.ask import ask_json, text_reply
from skillopt_ci.train.optimizer.buffer import RejectionKind, describe_edit
from skillopt_ci.train.optimizer.proposals import ProposalError, extract_json_object
from skillopt_ci.train.optimizer.reflect import render_meta_skill, system_prompt

TEMPLATE = "meta_skill.md"
MAX_META_LINES = 15
MAX_META_CHARS = 2000
MAX_LOG_ENTRIES = 40


@dataclass(frozen=True)
class EpochEdit(Record):
    """One edit tried this epoch: ``accepted`` by the gate or not, ``reason`` (the gate's
    sentence: the score change or why it was rejected) and, for a rejected edit, its ``kind``
    (``None`` in logs written before kinds existed)."""

    edit: Edit
    accepted: bool
    reason: str = ""
    kind: Annotated[RejectionKind | None, codec.OMIT_NONE] = None

    @property
    def outcome(self) -> str:
        if self.accepted:
            return "accepted"
        if self.kind is RejectionKind.REFUTED:
            return "measured and lost"
        return "dropped unmeasured" if self.kind is RejectionKind.UNPROVEN else "rejected"


@dataclass(frozen=True)
class MetaResult:
    """``meta_skill`` is the new memory, or ``None`` with ``error`` (keep the old one)."""

    meta_skill: str | None
    error: str | None
    usage: Usage = field(default_factory=Usage)
    attempts: int = 0


def render_epoch_log(entries: Sequence[EpochEdit]) -> str:
    shown = entries[-MAX_LOG_ENTRIES:]
    lines = [
        f"- {e.outcome}: {describe_edit(e.edit)} "
        f"(from a {e.edit.source} reflection, support {e.edit.support}) — {clip(e.reason, 200)}"
        for e in shown
    ]
    if len(entries) > len(shown):
        lines.insert(0, f"({len(entries) - len(shown)} earlier entries not shown)")
    return fence("\n".join(lines))


def parse_meta(text: str) -> str:
    """The ``meta_skill`` string of a reply; raises :class:`ProposalError`."""
    data = extract_json_object(text)
    if "meta_skill" not in data:
        raise ProposalError("'meta_skill' is required")
    value = data["meta_skill"]
    if not isinstance(value, str):
        raise ProposalError(f"meta_skill: expected a string, got {type(value).__name__}")
    value = value.strip()
    lines = [line for line in value.splitlines() if line.strip()]
    if len(lines) > MAX_META_LINES:
        raise ProposalError(f"meta_skill: {len(lines)} lines, at most {MAX_META_LINES} allowed")
    if len(value) > MAX_META_CHARS:
        raise ProposalError(f"meta_skill: {len(value)} characters, at most {MAX_META_CHARS} allowed")
    return value


def meta_messages(meta_skill: str, entries: Sequence[EpochEdit]) -> list[Message]:
    values = {"meta_skill": render_meta_skill(meta_skill), "epoch_log": render_epoch_log(entries),
              "count": len(entries), "max_lines": MAX_META_LINES}
    return [Message("system", system_prompt()), Message("user", render_template(TEMPLATE, values))]


async def update_meta_skill(
    models: ModelCaller, meta_skill: str, epoch_log: Sequence[EpochEdit | Mapping[str, Any]]
) -> MetaResult:
    """Rewrite the meta skill from this epoch's edits (records or their ``to_dict`` form). An
    empty log changes nothing and calls no model. Never raises for a bad reply or a provider
    error."""
    entries = [e if isinstance(e, EpochEdit) else EpochEdit.from_dict(e) for e in epoch_log]
    if not entries:
        return MetaResult(meta_skill, None)
    answer = await ask_json(models, meta_messages(meta_skill, entries), parse_meta, text_reply("meta_skill", "meta_skill"))
    return MetaResult(answer.value, answer.error, answer.usage, answer.attempts)
