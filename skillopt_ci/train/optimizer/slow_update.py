"""Slow update: at an epoch boundary, rewrite one protected block of durable guidance.

The previous epoch's skill and the current one are run on the same train sample; :func:`categorize`
sorts the tasks into improved, regressed, still failing and still passing, and the optimizer
writes the new full content of the protected block ``block_name`` (short, general guidance that
should survive later step edits). The result is a candidate like any other: the trainer puts it
through the validation gate, never force-accepts it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from skillopt_ci.core.codec import Record
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.records import TaskResult, by_task
from skillopt_ci.core.skill import PROTECTED_RE, find_protected
from skillopt_ci.core.text import fence
from skillopt_ci.models.base import Message, ModelCaller, Usage
from skillopt_ci.prompts.render import render_template
from skillopt_ci.train.optimizer.ask import ask_json, text_reply
from skillopt_ci.train.optimizer.proposals import ProposalError, extract_json_object
from skillopt_ci.train.optimizer.reflect import system_prompt

TEMPLATE = "slow_update.md"
MAX_BLOCK_LINES = 12
FEEDBACK_CHARS = 160
CATEGORIES = ("improved", "regressed", "still_failing", "still_passing")


@dataclass(frozen=True)
class TaskChange:
    """One task of the sample: the scorer's feedback under the previous and the current skill."""

    task_id: str
    before: str = ""
    after: str = ""


@dataclass(frozen=True)
class SlowUpdateInput(Record):
    improved: tuple[TaskChange, ...] = ()
    regressed: tuple[TaskChange, ...] = ()
    still_failing: tuple[TaskChange, ...] = ()
    still_passing: tuple[TaskChange, ...] = ()

    def render(self, name: str) -> str:
        changes = getattr(self, name)
        if not changes:
            return "(none)"
        lines = []
        for c in changes:
            if name in ("improved", "regressed") and c.before != c.after:
                lines.append(f"- {c.task_id}: before: {c.before or '-'} → now: {c.after or '-'}")
            else:
                lines.append(f"- {c.task_id}: {c.after or '-'}")
        return fence("\n".join(lines))


@dataclass(frozen=True)
class SlowUpdateResult:
    """``content`` is the new block content (without markers), or ``None`` with ``error``."""

    content: str | None
    analysis: str
    error: str | None
    usage: Usage = field(default_factory=Usage)
    attempts: int = 0


def categorize(previous: Sequence[TaskResult], current: Sequence[TaskResult]) -> SlowUpdateInput:
    """Compare two rollouts of the same tasks, by task id. A task passed when most of its valid
    repeats passed (a tie is a fail); tasks without a valid repeat on either side are left out.
    Order: the order tasks first appear in ``current``. Pure."""
    before, after = _verdicts(previous), _verdicts(current)
    out: dict[str, list[TaskChange]] = {name: [] for name in CATEGORIES}
    for tid, (now, now_feedback) in after.items():
        if tid not in before:
            continue
        was, was_feedback = before[tid]
        name = ("still_passing" if was else "improved") if now else ("regressed" if was else "still_failing")
        out[name].append(TaskChange(tid, was_feedback, now_feedback))
    return SlowUpdateInput(**{name: tuple(v) for name, v in out.items()})


def _verdicts(results: Sequence[TaskResult]) -> dict[str, tuple[bool, str]]:
    verdicts = {}
    for tid, rs in by_task(r for r in results if r.ok).items():
        passed = 2 * sum(1 for r in rs if r.passed) > len(rs)
        example = next(r for r in rs if bool(r.passed) == passed)
        verdicts[tid] = (passed, _clip(example.feedback))
    return verdicts


def block_content(skill_text: str, block_name: str) -> str | None:
    """The text inside the protected block ``block_name`` (markers excluded), or ``None``."""
    try:
        regions = find_protected(skill_text)
    except InputError:
        return None
    for region in regions:
        if region.name == block_name:
            return PROTECTED_RE.sub("", skill_text[region.start : region.end]).strip()
    return None


def slow_update_messages(
    previous_skill: str, current_skill: str, categories: SlowUpdateInput, block_name: str
) -> list[Message]:
    current_block = block_content(current_skill, block_name)
    values: dict[str, object] = {
        "previous_skill": fence(previous_skill),
        "current_skill": fence(current_skill),
        "block_name": block_name,
        "current_block": fence(current_block) if current_block else "(empty)",
        "max_lines": MAX_BLOCK_LINES,
        **{name: categories.render(name) for name in CATEGORIES},
    }
    return [Message("system", system_prompt()), Message("user", render_template(TEMPLATE, values))]


def parse_block(text: str) -> tuple[str, str]:
    """``(analysis, block)`` from a reply ``{"analysis": str, "block": str}``; raises
    :class:`ProposalError`."""
    data = extract_json_object(text)
    for key in ("analysis", "block"):
        if key not in data:
            raise ProposalError(f"{key!r} is required")
        if not isinstance(data[key], str):
            raise ProposalError(f"{key}: expected a string, got {type(data[key]).__name__}")
    block = data["block"].strip()
    if "skillopt:protected" in block:
        raise ProposalError("block: write only the content, without the protected-region markers")
    lines = [line for line in block.splitlines() if line.strip()]
    if len(lines) > MAX_BLOCK_LINES:
        raise ProposalError(f"block: {len(lines)} lines, at most {MAX_BLOCK_LINES} allowed")
    return data["analysis"].strip(), block


async def slow_update(
    models: ModelCaller,
    previous_skill: str,
    current_skill: str,
    categories: SlowUpdateInput,
    block_name: str = "durable",
) -> SlowUpdateResult:
    """Ask for the new content of ``block_name``; never raises for a bad reply or a provider
    error (``error`` is set and ``content`` is ``None``)."""
    messages = slow_update_messages(previous_skill, current_skill, categories, block_name)
    answer = await ask_json(models, messages, parse_block, text_reply("slow_update", "analysis", "block"))
    if answer.value is None:
        return SlowUpdateResult(None, "", answer.error, answer.usage, answer.attempts)
    analysis, block = answer.value
    return SlowUpdateResult(block, analysis, None, answer.usage, answer.attempts)


def _clip(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= FEEDBACK_CHARS else flat[: FEEDBACK_CHARS - 1] + "…"
