"""Early rejection of a training candidate: stop scoring once it cannot beat the incumbent.

A candidate is accepted when its validation score — the mean over tasks of the per-task mean over
repeats, on the same tasks and repeats as the incumbent — is strictly greater than the
incumbent's and at least ``min_gain`` above it. Scoring can stop as soon as the candidate would
fail that test *even if every remaining rollout scored 1.0* (the highest score). That bound is
exact, so stopping early changes no decision; it only saves rollouts.

An errored rollout makes the final score depend on which tasks end up measured, so the bound is
no longer exact: as soon as the candidate has an error, early stopping is switched off for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from skillopt_ci.core.records import TaskResult

EPSILON = 1e-12


def accepts(candidate: float | None, incumbent: float | None, min_gain: float = 0.0) -> bool:
    """The acceptance rule: strictly better, and by at least ``min_gain``. Ties are rejected."""
    if candidate is None:
        return False
    if incumbent is None:
        return True
    return candidate > incumbent + EPSILON and candidate - incumbent >= min_gain - EPSILON


def best_possible(results: Mapping[tuple[str, int], TaskResult], task_ids: Sequence[str], repeats: int) -> float | None:
    """The highest validation score the candidate can still reach: every rollout not yet scored
    counts as 1.0. ``None`` when an errored rollout makes the bound inexact."""
    if not task_ids:
        return None
    total = 0.0
    for task_id in task_ids:
        task_sum = 0.0
        for repeat in range(repeats):
            r = results.get((task_id, repeat))
            if r is None:
                task_sum += 1.0
            elif not r.ok:
                return None
            else:
                task_sum += float(r.score)  # type: ignore[arg-type]  # r.ok: its score is not None
        total += task_sum / repeats
    return total / len(task_ids)


def cannot_win(incumbent: float | None, task_ids: Sequence[str], repeats: int,
               min_gain: float = 0.0) -> Callable[[Mapping[tuple[str, int], TaskResult]], str | None]:
    """A ``stop_when`` callback for the runner: the reason to stop, or ``None`` to go on."""

    def check(results: Mapping[tuple[str, int], TaskResult]) -> str | None:
        if incumbent is None:
            return None
        bound = best_possible(results, task_ids, repeats)
        if bound is None or accepts(bound, incumbent, min_gain):
            return None
        return f"early rejection: at most {bound:.3f} reachable, the incumbent has {incumbent:.3f}"

    return check
