"""The gate's acceptance criterion: how often it fails a PR that changed nothing, and how often it
catches a real drop, measured on a simulated noisy model at the level of ``TaskResult`` records.

The simulated model: 60 tasks, 3 repeats per side. Each task has a *true* outcome under each
skill (pass or fail); exactly 60% of the tasks (36) truly pass under the base skill. Every rollout
reports the true outcome flipped with probability 0.2 (score 1.0 and ``passed`` True, or 0.0 and
False). A true pass is therefore observed as a pass 80% of the time, a true fail 20%.

The policy is the default one (95% interval, margin 0, 2000 resamples, seed 0, fixed as in
production); the simulated model's seed varies from run to run (run ``i`` uses seed ``i``).
``bench/bench_gate_stats.py`` runs the same simulations with more runs and more drop sizes.
"""

from __future__ import annotations

import random
from statistics import fmean

from skillopt_ci.compare import ComparePolicy, Comparison, compare_results
from skillopt_ci.records import TaskResult

N_TASKS = 60
REPEATS = 3
BASE_PASS_SHARE = 0.6
FLIP = 0.2
RUNS = 100
POLICY = ComparePolicy()  # 95% interval, margin 0, 2000 resamples, seed 0


def rollout(task_id: str, repeat: int, passed: bool) -> TaskResult:
    return TaskResult(task_id, repeat, "prompt", "output", 1.0 if passed else 0.0, passed)


def tasks_for_drop(points: float) -> int:
    """How many true passes must become true fails to lower the expected mean score by ``points``
    (0.15 = 15 points): each costs (1 - FLIP) - FLIP = 0.6 of one task's expected score."""
    return round(points * N_TASKS / ((1 - FLIP) - FLIP))


def simulate(seed: int, drop_tasks: int = 0) -> tuple[list[TaskResult], list[TaskResult], list[str]]:
    """Base and head results for one simulated PR, and the task ids.

    Head's true outcomes are base's with ``drop_tasks`` true passes turned into true fails; with
    ``drop_tasks=0`` both sides share their true outcomes (an A/A comparison) and differ only by
    the rollouts' noise.
    """
    rng = random.Random(seed)
    ids = [f"t{i:02d}" for i in range(N_TASKS)]
    base_truth = [i < round(BASE_PASS_SHARE * N_TASKS) for i in range(N_TASKS)]
    rng.shuffle(base_truth)
    head_truth = list(base_truth)
    for i in rng.sample([i for i, t in enumerate(base_truth) if t], drop_tasks):
        head_truth[i] = False

    def rollouts(truth: list[bool]) -> list[TaskResult]:
        return [rollout(tid, rep, t != (rng.random() < FLIP))
                for tid, t in zip(ids, truth, strict=True) for rep in range(REPEATS)]

    return rollouts(base_truth), rollouts(head_truth), ids


def verdicts(drop_tasks: int, runs: int = RUNS) -> list[Comparison]:
    """The comparisons of ``runs`` simulated PRs (model seeds 0 .. runs-1)."""
    return [compare_results(*simulate(seed, drop_tasks), POLICY) for seed in range(runs)]


def test_a_drop_of_15_points_means_15_tasks_broken():
    assert tasks_for_drop(0.15) == 15
    assert tasks_for_drop(0.10) == 10
    assert tasks_for_drop(0.05) == 5


def test_aa_comparisons_rarely_fail_the_gate():
    """Both sides share the true outcomes: any regression verdict is a false failure."""
    comparisons = verdicts(drop_tasks=0)
    failures = sum(c.verdict == "regressed" for c in comparisons)
    print(f"\nA/A: {failures} of {RUNS} comparisons regressed (false failures)")
    assert abs(fmean(c.delta for c in comparisons)) < 0.02
    assert failures <= 5


def test_a_true_drop_of_15_points_is_caught():
    """A true drop of 15 points: head's true outcomes are base's with 15 of the 36 true passes
    turned into true fails, so head's *expected* mean observed score is 0.15 lower than base's
    (each broken task goes from 0.8 to 0.2 expected score: 15 × 0.6 / 60 = 0.15). The observed
    drop in any one run varies around that with the rollouts' noise."""
    comparisons = verdicts(drop_tasks=tasks_for_drop(0.15))
    caught = sum(c.verdict == "regressed" for c in comparisons)
    mean_delta = fmean(c.delta for c in comparisons)
    print(f"\n15-point drop: caught {caught} of {RUNS} (mean observed Δ {mean_delta:+.3f})")
    assert abs(mean_delta + 0.15) < 0.02
    assert caught >= 80


def test_errored_rollouts_drop_the_task_from_the_pairing():
    base, head, ids = simulate(seed=7, drop_tasks=0)
    full = compare_results(base, head, ids)
    # every repeat of t00 errors on head, one repeat of t01 errors on base
    errored = {"kind": "server", "message": "503"}
    head = [TaskResult(r.task_id, r.repeat, r.prompt, None, None, None, error=errored)
            if r.task_id == "t00" else r for r in head]
    base = [TaskResult(r.task_id, r.repeat, r.prompt, None, None, None, error=errored)
            if (r.task_id, r.repeat) == ("t01", 0) else r for r in base]
    c = compare_results(base, head, ids)
    assert (full.n_paired, full.coverage) == (60, 1.0)
    assert (c.n_paired, c.coverage) == (59, 59 / 60)
    assert (c.base_errors, c.head_errors) == (1, 3)
    t00, t01 = c.tasks[0], c.tasks[1]
    assert t00.head is None and t00.delta is None and t00.base == full.tasks[0].base
    # t01 keeps its two valid base repeats: missing data, not a zero
    valid = [r.score for r in base if r.task_id == "t01" and r.ok]
    assert len(valid) == 2 and t01.base == fmean(valid)
    assert c.base_mean == fmean(t.base for t in c.tasks if t.delta is not None)
    assert c.verdict != "inconclusive"


def test_many_errors_make_the_comparison_inconclusive():
    base, head, ids = simulate(seed=3, drop_tasks=tasks_for_drop(0.15))
    errored = {"kind": "rate_limit", "message": "429"}
    head = [TaskResult(r.task_id, r.repeat, r.prompt, None, None, None, error=errored)
            if int(r.task_id[1:]) % 4 == 0 else r for r in head]  # 15 of 60 tasks lost
    c = compare_results(base, head, ids)
    assert c.verdict == "inconclusive" and c.ci is None
    assert (c.n_paired, c.coverage, c.head_errors) == (45, 0.75, 45)
    assert "45 of 60" in c.reason and "75%" in c.reason and "45 head" in c.reason
    assert compare_results(base, head, ids, ComparePolicy(min_coverage=0.7)).verdict != "inconclusive"
