"""Proposing a training step's candidate: roll the incumbent out on the step's train batch,
reflect on failures and successes, merge the proposals, and apply them in ranking order until the
step's edit budget of edits has applied (one that cannot apply does not use the budget). Nothing here is gated or recorded; :class:`Proposed` carries what the loop
records, and ``candidate_text`` is ``None`` when no edit could be applied."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from skillopt_ci.core.edits import Edit, EditCaps, EditOutcome
from skillopt_ci.core.records import TaskResult
from skillopt_ci.core.task import Task
from skillopt_ci.core.triggering import trigger_means
from skillopt_ci.engine.evaluation import EvalSession
from skillopt_ci.train.evaluate import StageEvaluator
from skillopt_ci.train.history import Rollout, StageSpend
from skillopt_ci.train.optimizer import (
    OptimizerBuffer,
    Proposal,
    ReflectionContext,
    merge_proposals,
    reflect,
    select_applicable,
)
from skillopt_ci.train.optimizer.reflect import FAILURE, TRIGGER


@dataclass(frozen=True)
class Proposed:
    rollout: Rollout
    proposals: tuple[Proposal, ...]
    merged: tuple[Edit, ...]
    selected: tuple[Edit, ...]  # the edits that applied, at most the budget
    outcomes: tuple[EditOutcome, ...]  # one per edit tried: the selected ones and those skipped on the way
    candidate_text: str | None
    marks: tuple[StageSpend, ...]  # meter readings: before the rollout, after it, after reflection
    scores: tuple[tuple[str, float], ...] = ()  # the incumbent's rollout score per measured task
    successes: tuple[str, ...] = ()  # the rollout's passed tasks, in batch order
    trigger_scores: tuple[tuple[str, float], ...] = ()  # per trigger task: used the skill exactly when it should

    def sources(self, edit: Edit) -> tuple[str, ...]:
        """The rollout failures ``edit`` was proposed for: the tasks of the failure reflections
        that proposed it (merging folds equal edits, so all of them)."""
        wanted = {t for p in self.proposals if p.kind in (FAILURE, TRIGGER) and any(e.key() == edit.key() for e in p.edits)
                  for t in p.task_ids}
        return tuple(t for t in self.rollout.failures if t in wanted)

    @property
    def applied(self) -> list[Edit]:
        return [o.edit for o in self.outcomes if o.applied]

    def why_nothing(self) -> str:
        """Why no candidate was made (when ``candidate_text`` is ``None``)."""
        errors = [p.error for p in self.proposals if p.error]
        if errors and not self.merged:
            return "optimizer output unusable: " + errors[0]
        return "no edit could be applied" if self.outcomes else "no edit proposed"


@dataclass
class EditProposer:
    evaluator: StageEvaluator
    session: EvalSession
    caps: EditCaps
    group_size: int
    max_edits: int
    meter: Callable[[], StageSpend]

    def propose(self, step_id: str, incumbent_text: str, batch: Sequence[Task], epoch: int,
                buffer: OptimizerBuffer, meta_skill: str, budget: int) -> Proposed:
        """rollout → reflect → merge → select → apply, for one step of ``epoch``."""
        before = self.meter()
        rollout = self.evaluator.evaluate(incumbent_text, "train", f"steps/{step_id}/rollout", sample_offset=epoch,
                                          tasks=tuple(batch), label=f"{step_id} rollout")
        after_rollout = self.meter()
        context = ReflectionContext(skill_text=incumbent_text, buffer=buffer, meta_skill=meta_skill,
                                    max_edits=self.max_edits, parts=self.caps.parts)
        proposals = self.session.run(reflect(self.session.pool, rollout.results, context, group_size=self.group_size))
        after_reflect = self.meter()
        merged = merge_proposals(proposals)
        selected, text, outcomes = select_applicable(incumbent_text, merged, budget, self.caps)
        return Proposed(Rollout(rollout.summary.mean, tuple(_failures(rollout.results))), tuple(proposals),
                        tuple(merged), tuple(selected), tuple(outcomes),
                        text if any(o.applied for o in outcomes) else None, (before, after_rollout, after_reflect),
                        tuple((r.task_id, float(r.score)) for r in rollout.results if r.ok and r.score is not None),
                        tuple(r.task_id for r in rollout.results if r.ok and r.passed),
                        tuple(trigger_means(rollout.results, [t.id for t in batch]).items()))


def _failures(results: Sequence[TaskResult]) -> list[str]:
    return [r.task_id for r in results if r.ok and not r.passed]
