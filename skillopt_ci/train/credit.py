"""Credit assignment for an accepted training step with several edits: leave one edit out at a
time on the validation tasks the step changed, and keep only the edits that earn their place
(the pure algorithm is :func:`skillopt_ci.core.credit.attribute_credit`; this runs its
evaluations under ``steps/<step>/credit/``). With a ``confidence`` the statistical rule of
:func:`~skillopt_ci.core.credit.attribute_credit_confident` decides instead; its round ``r`` uses
the validation sample indices ``repeats * (r + 1)`` onward, fresh beside the gate's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from skillopt_ci.core.credit import (
    CreditResult,
    attribute_credit,
    attribute_credit_confident,
    means,
)
from skillopt_ci.core.edits import Edit, EditCaps
from skillopt_ci.core.records import TaskResult
from skillopt_ci.core.task import Task
from skillopt_ci.train.evaluate import StageEvaluator


@dataclass
class CreditAssigner:
    evaluator: StageEvaluator
    val_tasks: Sequence[Task]
    caps: EditCaps
    confidence: float | None = None  # ``train.credit_confidence``; None: the single-pass rule
    repeats: int = 1
    max_rounds: int = 3

    def assign(self, step_id: str, incumbent_text: str, edits: Sequence[Edit], incumbent: Sequence[TaskResult],
               candidate: Sequence[TaskResult]) -> CreditResult:
        """Which of ``edits`` (applied to ``incumbent_text``) to keep, given the incumbent's and the
        accepted candidate's validation results."""

        def score_tasks(text: str, task_ids: Sequence[str], label: str) -> dict[str, float]:
            wanted = set(task_ids)
            tasks = tuple(t for t in self.val_tasks if t.id in wanted)
            run = self.evaluator.evaluate(text, "val", f"steps/{step_id}/credit/{label}", tasks=tasks,
                                          label=f"{step_id} {label}")
            return means(run.results, task_ids)

        def score_all(text: str, label: str) -> list[TaskResult]:
            return self.evaluator.evaluate(text, "val", f"steps/{step_id}/credit/{label}",
                                           label=f"{step_id} {label}").results

        def score_round(text: str, task_ids: Sequence[str], label: str, round_: int) -> dict[str, float]:
            wanted = set(task_ids)
            tasks = tuple(t for t in self.val_tasks if t.id in wanted)
            run = self.evaluator.evaluate(text, "val", f"steps/{step_id}/credit/{label}", tasks=tasks,
                                          sample_offset=self.repeats * (round_ + 1), label=f"{step_id} {label}")
            return means(run.results, task_ids)

        if self.confidence is not None:
            return attribute_credit_confident(incumbent_text, list(edits), list(incumbent), list(candidate),
                                              [t.id for t in self.val_tasks], self.caps, confidence=self.confidence,
                                              max_rounds=self.max_rounds, score=score_round, score_all=score_all)
        return attribute_credit(incumbent_text, list(edits), list(incumbent), list(candidate),
                                [t.id for t in self.val_tasks], self.caps, score_tasks=score_tasks, score_all=score_all)
