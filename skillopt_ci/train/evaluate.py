"""How training evaluates a skill text, and what it has spent.

:class:`StageEvaluator` runs one evaluation of a training stage (rollout, validation, credit,
test) inside the training run directory with the budget that is left. An evaluation that stops
for its budget raises :class:`BudgetExhausted` (the stage is not recorded and the run finishes
at its last checkpoint); one stopped by its :class:`EarlyStop` callback is returned, and the
callback says so — no stop message is ever parsed.

:class:`BudgetMeter` adds this process's spend to what earlier processes of the same run spent
(from ``state.json``), so budgets hold across a resume.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from skillopt_ci.core.records import TaskResult
from skillopt_ci.core.skill import Skill, parse_skill
from skillopt_ci.engine.budgets import target_calls
from skillopt_ci.engine.evaluation import EvalSession, make_plan
from skillopt_ci.engine.runner import EvalOutcome
from skillopt_ci.inputs.config import Budgets
from skillopt_ci.inputs.suite import Suite
from skillopt_ci.models.budget import BudgetReached, usd
from skillopt_ci.train.history import StageSpend
from skillopt_ci.train.state import Spend

StopCheck = Callable[[Mapping[tuple[str, int], TaskResult]], "str | None"]


class BudgetExhausted(Exception):
    """A budget ran out inside a stage; the stage is not recorded and the run finishes."""


class EarlyStop:
    """A ``stop_when`` callback that remembers whether it fired. The runner also sees it before
    the first launch on resumed results, so a resumed early rejection fires again."""

    def __init__(self, check: StopCheck) -> None:
        self._check = check
        self.fired = False

    def __call__(self, results: Mapping[tuple[str, int], TaskResult]) -> str | None:
        reason = self._check(results)
        self.fired = self.fired or reason is not None
        return reason


@dataclass
class BudgetMeter:
    """Spend so far (earlier processes plus this one) against the run's budgets."""

    session: EvalSession
    budgets: Budgets
    clock: Callable[[], float] = time.monotonic
    before: Spend = field(default_factory=Spend)
    started: float = field(default=0.0, init=False)
    cancelled: Callable[[], int] = lambda: 0  # this process's cancelled rollouts (the evaluator's count)
    held: int = 0  # target calls kept back from the next evaluation (training's reserve for its test)

    def __post_init__(self) -> None:
        self.started = self.clock()

    def start(self, spent_before: Spend) -> None:
        """Count from now, on top of what earlier processes of the run spent."""
        self.before, self.started = spent_before, self.clock()

    def spent(self) -> Spend:
        pool, base = self.session.pool.total_spend(), self.before
        return Spend(
            input_tokens=base.input_tokens + (pool.usage.input_tokens or 0),
            output_tokens=base.output_tokens + (pool.usage.output_tokens or 0),
            cost_usd=round(base.cost_usd + pool.cost_usd, 6),
            cost_known=base.cost_known and pool.cost_known,
            wall_time_s=round(base.wall_time_s + self.clock() - self.started, 3),
            cancelled_rollouts=base.cancelled_rollouts + self.cancelled(),
            target_calls=base.target_calls + target_calls(self.session.pool),
        )

    def remaining(self) -> Budgets:
        """The budgets left for the next evaluation, in the runner's terms (this process)."""
        b, before = self.budgets, self.before
        return Budgets(
            max_tokens=None if b.max_tokens is None else b.max_tokens - before.tokens,
            max_dollars=None if b.max_dollars is None else b.max_dollars - before.cost_usd,
            max_wall_seconds=None if b.max_wall_seconds is None
            else b.max_wall_seconds - before.wall_time_s - (self.clock() - self.started),
            max_target_calls=None if b.max_target_calls is None
            else b.max_target_calls - before.target_calls - self.held,
        )

    def exhausted(self) -> str | None:
        """Why the run must stop now, or ``None``."""
        spent, b = self.spent(), self.budgets
        if b.max_tokens is not None and spent.tokens >= b.max_tokens:
            return f"token budget reached ({spent.tokens} of {b.max_tokens})"
        if b.max_dollars is not None and spent.cost_usd >= b.max_dollars:
            return f"dollar budget reached (${spent.cost_usd:.4f} of ${b.max_dollars})"
        if b.max_target_calls is not None and spent.target_calls >= b.max_target_calls:
            return f"target-call budget reached ({spent.target_calls} of {b.max_target_calls} target calls)"
        if b.max_wall_seconds is not None and spent.wall_time_s >= b.max_wall_seconds:
            return f"wall-time budget reached ({spent.wall_time_s:.0f}s of {b.max_wall_seconds}s)"
        return None

    def refused(self, exc: BudgetReached) -> str:
        """The stop line of a call the budget refused to send, with what the run spent so far."""
        spent, b = self.spent(), self.budgets
        if exc.kind == "token":
            return f"token budget reached ({spent.tokens} of {b.max_tokens}; {exc.refusal()})"
        return f"dollar budget reached ({usd(spent.cost_usd)} spent of ${b.max_dollars}; {exc.refusal()})"

    def reading(self) -> StageSpend:
        """This process's model spend so far (stage spend is the difference of two readings)."""
        total = self.session.pool.total_spend()
        return StageSpend(total.usage.input_tokens or 0, total.usage.output_tokens or 0,
                          total.cost_usd if total.cost_known else None, target_calls(self.session.pool))


@dataclass
class StageEvaluator:
    """Evaluates skill texts for one training run: train splits once per task, other splits
    with the suite's (or the policy's) repeats. A text is evaluated as a candidate of ``parent``
    (the skill being trained): only ``SKILL.md`` changes, its folder and resources are kept."""

    session: EvalSession
    suite: Suite
    skill_name: str
    run_dir: Path
    repeats: int
    remaining: Callable[[], Budgets]
    parent: Skill | None = None
    cancelled: int = 0  # rollouts cancelled in flight by early stopping, in this process

    def candidate(self, text: str) -> Skill:
        """The skill ``text`` stands for in this run (what is evaluated and versioned)."""
        if self.parent is None:
            return parse_skill(text, path=self.skill_name)
        return self.parent.with_text(text, path=self.skill_name)

    def evaluate(self, text: str, split: str, out: str, *, sample_offset: int = 0, tasks: tuple | None = None,
                 stop_when: EarlyStop | None = None, label: str = "") -> EvalOutcome:
        """Evaluate ``text`` on ``split`` (or on ``tasks`` of it) into ``run_dir/out``."""
        skill = self.candidate(text)
        plan = make_plan(skill, self.suite, split, 1 if split == "train" else self.repeats, sample_offset=sample_offset)
        if tasks is not None:
            plan = replace(plan, tasks=tasks)
        outcome = self.session.evaluate(plan, self.run_dir / out, budgets=self.remaining(), stop_when=stop_when,
                                        label=label or f"{self.skill_name} {out}")
        self.cancelled += outcome.cancelled
        if not outcome.summary.complete and not (stop_when is not None and stop_when.fired):
            raise BudgetExhausted(outcome.summary.stopped or "")
        return outcome
