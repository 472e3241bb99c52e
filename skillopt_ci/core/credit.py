"""Credit assignment for an accepted step: keep only the edits that pull their weight.

A step's edits are judged together by the validation gate, so an accepted candidate can carry a
harmful or useless edit beside a good one. After acceptance, each edit is left out in turn (the
least supported first) and the skill without it is scored on the validation tasks whose score the
step changed — the only tasks where an edit can have shown its worth. An edit whose absence does
not lower that score is dropped for good; edits are tried one at a time, so of two edits that fix
the same tasks one is kept. If anything was dropped, the smaller skill is scored on the whole
validation split and replaces the candidate only if it scores at least as well there; otherwise
the candidate stands as accepted.

With a confidence (``train.credit_confidence``), :func:`attribute_credit_confident` replaces the
single-pass rule by a test, so no edit is dropped on one noisy pass: the skill with the edit and
the skill without it are both re-measured, with fresh samples, on the tasks the step changed
(fresh samples for the "with" side too: the accepted candidate's own scores are, on average,
lucky), and the per-task paired differences (with − without) decide. The edit is dropped only
when the one-sided upper confidence bound of their mean is at most 0 — the skill without it is,
with that confidence, not worse — and kept as soon as the lower bound is above 0. While neither,
another round of repeats is run on the tasks where the two still disagree, at most
``max_rounds`` rounds; an edit still undecided then is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from skillopt_ci.core.edits import Edit, EditCaps, apply_edits
from skillopt_ci.core.records import TaskResult, task_scores
from skillopt_ci.core.stats import t_quantile

EPSILON = 1e-9

# (skill text, task ids, label) → per-task mean score on those validation tasks
ScoreTasks = Callable[[str, Sequence[str], str], dict[str, float]]
# (skill text, label) → validation results on the whole split
ScoreAll = Callable[[str, str], list[TaskResult]]
# (skill text, task ids, label, round) → per-task mean score on fresh samples of that round
ScoreRound = Callable[[str, Sequence[str], str, int], dict[str, float]]


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


def _start(incumbent_text: str, edits: Sequence[Edit], incumbent: Sequence[TaskResult],
           candidate: Sequence[TaskResult], task_ids: Sequence[str], caps: EditCaps) -> CreditResult:
    """Every edit kept, and the tasks the step changed (none when there is nothing to attribute:
    fewer than two edits, or no task changed)."""
    candidate_text, _ = apply_edits(incumbent_text, edits, caps)
    result = CreditResult(text=candidate_text, kept=list(edits))
    if len(edits) >= 2:
        result.tasks = changed_tasks(incumbent, candidate, task_ids)
    return result


def attribute_credit(incumbent_text: str, edits: Sequence[Edit], incumbent: Sequence[TaskResult],
                     candidate: Sequence[TaskResult], task_ids: Sequence[str], caps: EditCaps, *,
                     score_tasks: ScoreTasks, score_all: ScoreAll) -> CreditResult:
    """Leave each edit out in turn (last, i.e. least supported, first) and keep only the edits
    whose absence lowers the score on the tasks the step changed. Deterministic."""
    result = _start(incumbent_text, edits, incumbent, candidate, task_ids, caps)
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
    return _settle(result, incumbent_text, edits, candidate, task_ids, caps, score_all)


def _settle(result: CreditResult, incumbent_text: str, edits: Sequence[Edit], candidate: Sequence[TaskResult],
            task_ids: Sequence[str], caps: EditCaps, score_all: ScoreAll) -> CreditResult:
    """Score the pruned skill on the whole split; it replaces the candidate only if not worse
    there. (After tested drops this pass can only undo them, never drop more: an edit can matter
    on a task the step left unchanged, where two edits' effects cancel.)"""
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


def one_sided_bounds(diffs: Sequence[float], confidence: float) -> tuple[float, float, float]:
    """(mean, lower, upper): one-sided t bounds at ``confidence`` each for the mean of ``diffs``.
    All zero: no effect seen, both bounds 0. One non-zero value: no spread to estimate, unbounded.
    Equal non-zero values: their spread is taken as their size (a sample of a few 0/1 outcomes
    with no spread is not evidence of none)."""
    n = len(diffs)
    mean = sum(diffs) / n
    if all(abs(d) <= EPSILON for d in diffs):
        return 0.0, 0.0, 0.0
    if n < 2:
        return mean, float("-inf"), float("inf")
    sd = (sum((d - mean) ** 2 for d in diffs) / (n - 1)) ** 0.5
    half = t_quantile(confidence, n - 1) * max(sd, abs(mean) if sd <= EPSILON else 0.0) / n ** 0.5
    return mean, mean - half, mean + half


def credit_verdict(diffs: Sequence[float], confidence: float) -> bool | None:
    """``True``: drop the edit (without it is, with ``confidence``, not worse); ``False``: keep it
    (with it is, with ``confidence``, better); ``None``: not decided yet. ``diffs`` are per-task
    paired differences, with the edit minus without it."""
    if not diffs:
        return None
    _, lower, upper = one_sided_bounds(diffs, confidence)
    if upper <= EPSILON:
        return True
    if lower > EPSILON:
        return False
    return None


def attribute_credit_confident(incumbent_text: str, edits: Sequence[Edit], incumbent: Sequence[TaskResult],
                               candidate: Sequence[TaskResult], task_ids: Sequence[str], caps: EditCaps, *,
                               confidence: float, max_rounds: int, score: ScoreRound,
                               score_all: ScoreAll) -> CreditResult:
    """Like :func:`attribute_credit`, but an edit is dropped only with ``confidence`` (see the
    module docstring). Deterministic given the scores."""
    result = _start(incumbent_text, edits, incumbent, candidate, task_ids, caps)
    if not result.tasks:
        return result
    for index in reversed(range(len(edits))):
        edit = edits[index]
        trial = [e for e in result.kept if e is not edit]
        text, outcomes = apply_edits(incumbent_text, trial, caps)
        if len(trial) == len(result.kept) or not trial or not all(o.applied for o in outcomes):
            continue
        with_text, _ = apply_edits(incumbent_text, result.kept, caps)
        verdict, trial_note = _judge_edit(with_text, text, result.tasks, confidence, max_rounds, score,
                                          f"{len(result.removed)}", index)
        result.trials.append({"left_out": edit.to_dict(), **trial_note})
        if verdict:
            result.kept = trial
            result.removed.append({"edit": edit.to_dict(), "reason": trial_note["reason"]})
    return _settle(result, incumbent_text, edits, candidate, task_ids, caps, score_all)


def _judge_edit(with_text: str, without_text: str, tasks: Sequence[str], confidence: float, max_rounds: int,
                score: ScoreRound, with_label: str, index: int) -> tuple[bool, dict[str, Any]]:
    """Paired rounds on ``tasks`` until :func:`credit_verdict` decides or the rounds run out."""
    sums = {t: [0.0, 0.0, 0.0] for t in tasks}  # with, without, rounds measured
    wanted, verdict, rounds = list(tasks), None, 0
    while wanted and rounds < max_rounds and verdict is None:
        label = f"with-{with_label}-r{rounds}" if rounds == 0 else f"with-{with_label}-for-{index}-r{rounds}"
        with_scores = score(with_text, wanted, label, rounds)
        without_scores = score(without_text, wanted, f"without-{index}-r{rounds}", rounds)
        for t in wanted:
            if t in with_scores and t in without_scores:
                acc = sums[t]
                acc[0], acc[1], acc[2] = acc[0] + with_scores[t], acc[1] + without_scores[t], acc[2] + 1
        rounds += 1
        per_task = {t: (a[0] - a[1]) / a[2] for t, a in sums.items() if a[2]}
        verdict = credit_verdict(list(per_task.values()), confidence)
        wanted = [t for t, d in per_task.items() if abs(d) > EPSILON]  # repeats only where the two disagree
    diffs = [(a[0] - a[1]) / a[2] for a in sums.values() if a[2]]
    mean, lower, upper = one_sided_bounds(diffs, confidence) if diffs else (0.0, float("-inf"), float("inf"))
    where = (f"mean difference {mean:+.3f}, one-sided {confidence:.0%} bounds {lower:+.3f} and {upper:+.3f} "
             f"over {len(diffs)} tasks, {rounds} round{'s' if rounds != 1 else ''}")
    dropped = verdict is True
    reason = (f"without it validation is not worse ({where})" if dropped
              else f"leaving it out loses ({where})" if verdict is False
              else f"not shown useless with {confidence:.0%} confidence ({where})")
    finite = [None if abs(b) == float("inf") else round(b, 6) for b in (lower, upper)]
    return dropped, {"mean_difference": round(mean, 6), "bounds": finite, "tasks": len(diffs), "rounds": rounds,
                     "dropped": dropped, "reason": reason}
