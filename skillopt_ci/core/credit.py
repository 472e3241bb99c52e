"""Credit assignment for an accepted step: keep only the edits that pull their weight.

A step's edits are judged together by the validation gate, so an accepted candidate can carry a
harmful or useless edit beside a good one. After acceptance, each edit is left out in turn (the
least supported first) and the skill without it is scored on the validation tasks whose score the
step changed — the only tasks where an edit can have shown its worth. An edit whose absence does
not lower that score is dropped for good; edits are tried one at a time, so of two edits that fix
the same tasks one is kept. If anything was dropped, the smaller skill is scored on the whole
validation split and replaces the candidate only if it scores at least as well there; otherwise
the candidate stands as accepted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from skillopt_ci.core.edits import Edit, EditCaps, apply_edits
from skillopt_ci.core.records import TaskResult, task_scores

EPSILON = 1e-9

# (skill text, task ids, label) → per-task mean score on those validation tasks
ScoreTasks = Callable[[str, Sequence[str], str], dict[str, float]]
# (skill text, label) → validation results on the whole split
ScoreAll = Callable[[str, str], list[TaskResult]]


@dataclass
class CreditResult:
    text: str
    kept: list[Edit]
    removed: list[dict[str, Any]] = field(default_factory=list)
    trials: list[dict[str, Any]] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    used: str = "full"  # "full" (the candidate as accepted) or "pruned"
    pruned_val: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "trials": self.trials, "removed": self.removed, "used": self.used,
                "pruned_val": self.pruned_val, "kept": [e.to_dict() for e in self.kept]}


def means(results: Sequence[TaskResult], task_ids: Sequence[str]) -> dict[str, float]:
    """Per-task mean scores (tasks without a valid measurement are left out)."""
    return {s.task_id: s.mean for s in task_scores(results, task_ids) if s.mean is not None}


def changed_tasks(incumbent: Sequence[TaskResult], candidate: Sequence[TaskResult],
                  task_ids: Sequence[str]) -> list[str]:
    """Validation tasks measured on both sides whose mean score differs, in suite order."""
    before, after = means(incumbent, task_ids), means(candidate, task_ids)
    return [t for t in task_ids if t in before and t in after and abs(before[t] - after[t]) > EPSILON]


def attribute_credit(incumbent_text: str, edits: Sequence[Edit], incumbent: Sequence[TaskResult],
                     candidate: Sequence[TaskResult], task_ids: Sequence[str], caps: EditCaps, *,
                     score_tasks: ScoreTasks, score_all: ScoreAll) -> CreditResult:
    """Leave each edit out in turn (last, i.e. least supported, first) and keep only the edits
    whose absence lowers the score on the tasks the step changed. Deterministic."""
    candidate_text, _ = apply_edits(incumbent_text, edits, caps)
    result = CreditResult(text=candidate_text, kept=list(edits))
    if len(edits) < 2:
        return result
    result.tasks = changed_tasks(incumbent, candidate, task_ids)
    if not result.tasks:
        return result
    current = sum(means(candidate, result.tasks).values())
    for index in reversed(range(len(edits))):
        edit = edits[index]
        trial = [e for e in result.kept if e is not edit]
        if len(trial) == len(result.kept) or not trial:
            continue
        text, outcomes = apply_edits(incumbent_text, trial, caps)
        score = sum(score_tasks(text, result.tasks, f"without-{index}").values())
        dropped = score >= current - EPSILON and all(o.applied for o in outcomes)
        result.trials.append({"left_out": edit.to_dict(), "score": round(score, 6), "with_it": round(current, 6),
                              "dropped": dropped})
        if dropped:
            result.kept = trial
            result.removed.append({"edit": edit.to_dict(),
                                   "reason": "leaving it out did not lower validation on the tasks the step changed"})
            current = score
    if not result.removed:
        return result
    pruned_text, _ = apply_edits(incumbent_text, result.kept, caps)
    pruned = score_all(pruned_text, "pruned")
    full_scores, pruned_scores = means(candidate, task_ids), means(pruned, task_ids)
    both = [t for t in task_ids if t in full_scores and t in pruned_scores]  # paired, like the gate
    full_mean = _mean({t: full_scores[t] for t in both})
    pruned_mean = _mean({t: pruned_scores[t] for t in both})
    result.pruned_val = pruned_mean
    if pruned_mean is not None and full_mean is not None and pruned_mean >= full_mean - EPSILON:
        result.text, result.used = pruned_text, "pruned"
    else:
        result.kept = list(edits)
    return result


def _mean(values: dict[str, float]) -> float | None:
    return sum(values.values()) / len(values) if values else None
