"""Reflect: the optimizer reads trajectories, failures and successes apart, and proposes edits.

A rollout's results are split into failures (score below ``threshold`` or not passed) and
successes; errored results are missing data and are not shown. Each kind is cut, in task order,
into groups of ``group_size``; each group is one optimizer call (role ``optimizer``, sample 0),
all calls run concurrently, and the proposals come back in a fixed order — failure groups, then
success groups, by group index — whatever order the calls finish in.

When training may edit the description (``train.target``), a failure that is a trigger mistake
(the skill not used for a request it is for, or used for one it is not) goes to a *trigger*
reflection instead, which sees the description, the mistaken requests and the ones the
description already gets right, and proposes edits of the description; a description-only run
has no body reflections at all.

Failure reflections are asked which rules to add or fix; success reflections which rules are
working and must be kept (they may still propose consolidating edits). Trajectories are
untrusted text: each field sits in a fence no backtick run inside it can close.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from skillopt_ci.core.codec import Record
from skillopt_ci.core.description import LIMIT as DESCRIPTION_LIMIT
from skillopt_ci.core.description import description_of
from skillopt_ci.core.edits import BODY, DESCRIPTION, Edit
from skillopt_ci.core.records import TaskResult
from skillopt_ci.core.text import as_text, fence
from skillopt_ci.models.base import Message, ModelCaller, Usage
from skillopt_ci.prompts.render import load_template, render_template
from skillopt_ci.train.optimizer.ask import ask_json
from skillopt_ci.train.optimizer.buffer import OptimizerBuffer
from skillopt_ci.train.optimizer.proposals import PROPOSAL_REPLY, ParsedProposal, read_proposal

FAILURE, SUCCESS, TRIGGER = "failure", "success", "trigger"
TEMPLATES = {FAILURE: "reflect_failures.md", SUCCESS: "reflect_successes.md", TRIGGER: "reflect_triggers.md"}
SYSTEM_TEMPLATE = "optimizer_system.md"
MAX_FIELD_CHARS = 20_000  # per trajectory field; only pathological outputs are ever cut


@dataclass(frozen=True)
class ReflectionContext:
    """What every reflection of a step sees besides its trajectories. ``skill_text`` is the
    skill exactly as edits will be applied to it (anchors are copied from it)."""

    skill_text: str
    buffer: OptimizerBuffer
    meta_skill: str
    max_edits: int
    parts: tuple[str, ...] = (BODY,)  # what edits may change (train.target): trigger reflections edit the description
    handled: tuple[TaskResult, ...] = ()  # the rollout's trigger tasks the description already gets right


@dataclass(frozen=True)
class Proposal(Record):
    """One reflection's outcome. ``error`` is set (and ``edits`` empty) when the call failed
    twice (malformed output) or the provider failed; ``task_ids`` are the group's tasks."""

    kind: str
    group: int
    edits: tuple[Edit, ...]
    analysis: str
    error: str | None
    attempts: int
    usage: Usage = field(default_factory=Usage)
    task_ids: tuple[str, ...] = ()

    def _json_out(self, data: dict[str, Any]) -> dict[str, Any]:
        return {"kind": data.pop("kind"), "group": data.pop("group"), "task_ids": data.pop("task_ids"), **data}


def split_results(results: Sequence[TaskResult], threshold: float = 1.0) -> tuple[list[TaskResult], list[TaskResult]]:
    """``(failures, successes)`` in the given order; errored or unscored results are dropped."""
    failures: list[TaskResult] = []
    successes: list[TaskResult] = []
    for r in results:
        if r.error or r.score is None:
            continue
        (failures if r.score < threshold or not r.passed else successes).append(r)
    return failures, successes


def chunk(items: Sequence[TaskResult], size: int) -> list[list[TaskResult]]:
    if size < 1:
        raise ValueError(f"group_size must be at least 1, got {size}")
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def render_trajectory(result: TaskResult, number: int) -> str:
    """One trajectory, whole: input, what the agent did (the environment's rendering of its
    steps, when it took any), output, expected answer, score and feedback, each fenced."""
    verdict = "passed" if result.passed else "failed"
    repeat = f", repeat {result.repeat}" if result.repeat else ""
    expected = fence(_cut(as_text(result.expected))) if result.expected is not None else "(no expected answer given)"
    steps = [f"What the agent did (tool calls, results, observations):\n\n{fence(_cut(result.transcript))}"] \
        if result.transcript else []
    return "\n\n".join(
        [
            f"### Trajectory {number}: task {result.task_id}{repeat} — score {result.score:.2f}, {verdict}",
            f"Input the model was given:\n\n{fence(_cut(result.prompt))}",
            *steps,
            f"The model's output:\n\n{fence(_cut(result.output or ''))}",
            f"Expected answer:\n\n{expected}",
            f"Scorer feedback:\n\n{fence(_cut(result.feedback or '(none)'))}",
        ]
    )


def render_trajectories(results: Sequence[TaskResult]) -> str:
    return "\n\n".join(render_trajectory(r, i) for i, r in enumerate(results, 1))


def mistriggered(result: TaskResult) -> bool:
    """A trigger task the agent got wrong: it did not use the skill for a request it is for, or
    used it for one it is not for."""
    return result.should_trigger is not None and result.consult is not None \
        and result.consult.consulted != result.should_trigger


def render_trigger(result: TaskResult, number: int, heading: str = "Request") -> str:
    """One trigger task for a description reflection: the request, whether the skill should be
    used and whether it was, and (for a mistake) what the agent did instead, each fenced."""
    wanted = "yes" if result.should_trigger else "no"
    used = "yes" if result.consult is not None and result.consult.consulted else "no"
    kind = "" if heading != "Request" else (" (a missed trigger)" if result.should_trigger else " (a false trigger)")
    steps = [f"What the agent did:\n\n{fence(_cut(result.transcript))}"] if result.transcript and kind else []
    return "\n\n".join([f"### {heading} {number}: task {result.task_id} — should use the skill: {wanted}; "
                         f"used it: {used}{kind}", f"The request:\n\n{fence(_cut(result.prompt))}", *steps])


def render_description(ctx: ReflectionContext) -> str:
    return fence(description_of(ctx.skill_text) or "")


def system_prompt() -> str:
    return load_template(SYSTEM_TEMPLATE)


def render_meta_skill(meta_skill: str) -> str:
    text = meta_skill.strip()
    return fence(text) if text else "(empty: nothing has been learned about edits yet)"


def reflection_messages(kind: str, group: Sequence[TaskResult], ctx: ReflectionContext) -> list[Message]:
    """The system and user messages of one reflection call."""
    trigger = kind == TRIGGER
    description = description_of(ctx.skill_text) or ""
    user = render_template(
        TEMPLATES[kind],
        {
            "skill": fence(ctx.skill_text),
            **({"description": fence(description), "length": len(description), "limit": f"{DESCRIPTION_LIMIT:,}",
                "handled": "\n\n".join(render_trigger(r, i, "Handled right") for i, r in enumerate(ctx.handled, 1))
                or "(none in this batch)"} if trigger else {}),
            "trajectories": "\n\n".join(render_trigger(r, i) for i, r in enumerate(group, 1)) if trigger
            else render_trajectories(group),
            "count": len(group),
            "buffer": ctx.buffer.render(),
            "meta_skill": render_meta_skill(ctx.meta_skill),
            "max_edits": ctx.max_edits,
        },
    )
    return [Message("system", system_prompt()), Message("user", user)]


async def reflect(
    models: ModelCaller,
    results: Sequence[TaskResult],
    ctx: ReflectionContext,
    *,
    group_size: int = 8,
    threshold: float = 1.0,
) -> list[Proposal]:
    """One proposal per group of failures, then per group of successes. Never raises for a
    malformed reply or a provider error (the proposal carries ``error``)."""
    failures, successes = split_results(results, threshold)
    misses: list[TaskResult] = []
    if DESCRIPTION in ctx.parts:  # trigger mistakes go to the description's reflection, the rest to the body's
        misses = [r for r in failures if mistriggered(r)]
        failures = [r for r in failures if not mistriggered(r)]
        right = tuple(r for r in results if r.ok and r.should_trigger is not None and not mistriggered(r))
        ctx = replace(ctx, handled=right)
    if BODY not in ctx.parts:
        failures, successes = [], []
    jobs = [(FAILURE, i, g) for i, g in enumerate(chunk(failures, group_size))]
    jobs += [(TRIGGER, i, g) for i, g in enumerate(chunk(misses, group_size))]
    jobs += [(SUCCESS, i, g) for i, g in enumerate(chunk(successes, group_size))]
    return list(await asyncio.gather(*(_reflect_group(models, kind, i, g, ctx) for kind, i, g in jobs)))


async def _reflect_group(
    models: ModelCaller, kind: str, index: int, group: list[TaskResult], ctx: ReflectionContext
) -> Proposal:
    def parse(text: str) -> ParsedProposal:  # a trigger reflection's edits come from failures, and edit the description
        return read_proposal(text, ctx.max_edits, source=FAILURE if kind == TRIGGER else kind,
                             part=DESCRIPTION if kind == TRIGGER else BODY)

    answer = await ask_json(models, reflection_messages(kind, group, ctx), parse, PROPOSAL_REPLY)
    ids = tuple(dict.fromkeys(r.task_id for r in group))
    parsed = answer.value
    if parsed is None:
        return Proposal(kind, index, (), "", answer.error, answer.attempts, answer.usage, ids)
    return Proposal(kind, index, parsed.edits, parsed.analysis, None, answer.attempts, answer.usage, ids)


def _cut(text: str) -> str:
    if len(text) <= MAX_FIELD_CHARS:
        return text
    return text[:MAX_FIELD_CHARS] + f"\n[… {len(text) - MAX_FIELD_CHARS} more characters not shown]"
