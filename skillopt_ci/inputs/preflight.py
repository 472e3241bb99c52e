"""What is checked before any paid run, shared by ``validate`` and every command that evaluates.

Contract:
- :func:`skill_warnings` and :func:`prompt_warnings` return warning-level :class:`Problem`\\ s:
  soft Agent Skills deviations (``Skill.warnings``), an empty skill body, a skill over
  ``limits.skill_tokens``, task prompts over ``limits.prompt_tokens``. They never raise.
- :func:`estimate_plan` is a deliberately rough, conservative cost estimate from token counts
  (:func:`skillopt_ci.core.skill.estimate_tokens`) and prices: each rollout sends the skill body and
  the rendered prompt and receives an assumed answer; an LLM judge reads the prompt, the reference
  and the answer plus its own instructions. Rollouts already in the response cache cost nothing.
  An environment that calls the model several times per rollout (``tools``, ``interactive``) is
  estimated at its most turns, each turn re-sending the history so far: an upper bound.
Pure functions; the caller prints and decides.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from skillopt_ci.core.skill import Skill, estimate_tokens
from skillopt_ci.core.task import Task
from skillopt_ci.inputs.config import GatePolicy, Limits, ModelSpec
from skillopt_ci.inputs.suite import Suite
from skillopt_ci.inputs.yamlfile import Problem

ASSUMED_OUTPUT_TOKENS = 512  # per rollout, unless the model's params set max_tokens
JUDGE_INSTRUCTION_TOKENS = 400
JUDGE_OUTPUT_TOKENS = 200
LISTED = 3  # oversized prompts named one by one before "and N more"


class Plan(Protocol):
    """What :func:`plan_warnings` reads of an evaluation plan (``engine.runner.EvalPlan``, which
    sits a layer above: inputs import nothing from the engine)."""

    @property
    def skill(self) -> Skill: ...

    @property
    def suite(self) -> Suite: ...

    @property
    def tasks(self) -> Sequence[Task]: ...


def warning(file: str, message: str) -> Problem:
    return Problem(file, message, level="warning")


def skill_warnings(skill: Skill, shown: str, limits: Limits) -> list[Problem]:
    """Soft problems of a loaded skill (see the module docstring)."""
    found = [warning(f"{shown}:1", w) for w in skill.warnings]
    if not skill.body.strip() and not skill.absent:  # the no-skill baseline is empty on purpose
        found.append(warning(shown, "the skill has no body: the model is evaluated without instructions"))
    tokens = skill.tokens
    if tokens > limits.skill_tokens:
        found.append(warning(shown, f"the skill has about {tokens:,} tokens, over limits.skill_tokens "
                                    f"({limits.skill_tokens:,}); every rollout sends all of it"))
    return found


def prompt_warnings(suite: Suite, tasks: Sequence[Task], limits: Limits) -> list[Problem]:
    """A warning per task whose rendered prompt is over ``limits.prompt_tokens`` (the first few
    by name, the rest counted)."""
    over = [(t, n) for t in tasks if (n := _prompt_tokens(suite, t)) > limits.prompt_tokens]
    found = [warning(t.source, f"task {t.id!r}: the prompt has about {n:,} tokens, over limits.prompt_tokens "
                               f"({limits.prompt_tokens:,})") for t, n in over[:LISTED]]
    if len(over) > LISTED:
        found.append(warning(suite.display, f"{len(over) - LISTED} more task prompt(s) over limits.prompt_tokens"))
    return found


def gate_power_warning(suite: Suite, gate: GatePolicy, where: str) -> list[Problem]:
    """A warning when the gate split is too small for the gate to see the drop it should: the
    ``gate.detect`` effect, or else ``gate.margin`` when it is above 0 (a green check must not be
    read as "no regression" when the suite could not have seen one). The variance is unknown
    before a run, so the binomial worst case stands in (:func:`skillopt_ci.core.stats.detectable_drop`)."""
    from skillopt_ci.core.stats import detectable_drop

    wanted = gate.detect if gate.detect is not None else (gate.margin if gate.margin > 0 else None)
    if wanted is None or gate.split not in suite.splits:
        return []
    n, repeats = len(suite.tasks(gate.split)), gate.repeats or suite.repeats
    drop = detectable_drop(n, repeats, alpha=1 - gate.confidence, margin=gate.margin)
    if drop is not None and drop <= wanted + 1e-9:
        return []
    key = "gate.detect" if gate.detect is not None else "gate.margin"
    seen = "no drop at all (fewer than 2 tasks)" if drop is None else f"drops of about {drop * 100:.0f} points or more"
    return [warning(where, f"the gate's {gate.split} split ({n} task(s) × {repeats} repeat(s)) can detect {seen} "
                           f"with 80% power, not the {wanted * 100:.0f} points of {key}: add tasks or raise "
                           "gate.repeats")]


def plan_warnings(plan: Plan, limits: Limits) -> list[Problem]:
    """Warnings about what ``plan`` would evaluate: its skill and its tasks' prompts."""
    return skill_warnings(plan.skill, plan.skill.path or plan.skill.name, limits) + prompt_warnings(
        plan.suite, plan.tasks, limits)


def max_output(spec: ModelSpec) -> int | None:
    """The answer length a model's params cap (``max_tokens`` and its aliases), if any."""
    for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        value = spec.params.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _prompt_tokens(suite: Suite, task: Task) -> int:
    try:
        return estimate_tokens(suite.render_prompt(task))
    except KeyError:
        return 0  # a placeholder without a value: reported as an error by the suite check


@dataclass(frozen=True)
class CostEstimate:
    rollouts: int
    input_tokens: int
    output_tokens: int
    usd: float
    turns: int = 1  # model calls per rollout at most (multi-turn environments): the estimate is an upper bound

    def describe(self) -> str:
        size = "about" if self.turns == 1 else f"up to (at {self.turns} model calls per rollout)"
        return (f"{size} ${self.usd:,.2f} for {self.rollouts} rollout(s), ~{self.input_tokens:,} input and "
                f"~{self.output_tokens:,} output tokens")


def estimate_plan(skill: Skill, suite: Suite, tasks: Sequence[Task], repeats: int, *,
                  target_price: tuple[float, float], output_tokens: int | None = None,
                  judge_price: tuple[float, float] | None = None,
                  cached: Callable[[Task, str, int], bool] = lambda task, prompt, repeat: False,
                  turns: int = 1) -> CostEstimate:
    """Cost of evaluating ``tasks`` × ``repeats`` (see the module docstring). ``cached(task,
    prompt, repeat)`` says whether that rollout's answer is already in the response cache;
    ``turns`` is the most model calls one rollout makes (each re-sends the history: an answer
    and a tool result or observation of the answer's size per earlier turn)."""
    answer = output_tokens or ASSUMED_OUTPUT_TOKENS
    system = estimate_tokens(skill.body.strip())
    rollouts = inputs = outputs = 0
    usd = 0.0
    for task in tasks:
        prompt = suite.render_prompt(task)
        prompt_tokens = estimate_tokens(prompt)
        judge_in = prompt_tokens + estimate_tokens(str(task.expected or "")) + answer + JUDGE_INSTRUCTION_TOKENS
        for repeat in range(repeats):
            if cached(task, prompt, repeat):
                continue
            rollouts += 1
            sent = sum(system + prompt_tokens + 2 * answer * turn for turn in range(turns))
            inputs += sent
            outputs += answer * turns
            usd += (sent * target_price[0] + answer * turns * target_price[1]) / 1_000_000
            if judge_price is not None:
                inputs += judge_in
                outputs += JUDGE_OUTPUT_TOKENS
                usd += (judge_in * judge_price[0] + JUDGE_OUTPUT_TOKENS * judge_price[1]) / 1_000_000
    return CostEstimate(rollouts, inputs, outputs, usd, turns)
