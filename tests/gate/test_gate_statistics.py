"""The gate's acceptance criterion: how often it fails a PR that changed nothing, and how often it
catches a real drop, measured on a simulated noisy model at the level of ``TaskResult`` records.

The simulated model: 60 tasks, 3 repeats per side. Each task has a *true* outcome under each
skill (pass or fail); exactly 60% of the tasks (36) truly pass under the base skill. Every rollout
reports the true outcome flipped with probability 0.2 (score 1.0 and ``passed`` True, or 0.0 and
False). A true pass is therefore observed as a pass 80% of the time, a true fail 20%.

The policy is the default one (95% interval and the exact paired test, margin 0, 2000
resamples, seed 0, fixed as in production); the simulated model's seed varies from run to run (run ``i`` uses seed ``i``).
``bench/bench_gate_stats.py`` runs the same simulations with more runs and more drop sizes.
"""

from __future__ import annotations

import json
import random
from statistics import fmean, stdev

import pytest

from skillopt_ci.core.compare import ComparePolicy, Comparison, compare_results, decide_verdict
from skillopt_ci.core.records import TaskResult
from skillopt_ci.core.stats import detectable_drop
from skillopt_ci.gate.report import render_gate, terminal_table
from skillopt_ci.gate.verdict import GateReport, SkillChange, SkillVerdict
from skillopt_ci.inputs.config import GatePolicy
from skillopt_ci.inputs.yamlfile import schema_validator

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


def simulate_drop(seed: int, n_tasks: int, repeats: int, drop: float = 0.0
                  ) -> tuple[list[TaskResult], list[TaskResult], list[str]]:
    """Base and head results for one simulated PR on ``n_tasks`` tasks, and the task ids.

    ``BASE_PASS_SHARE`` of the tasks truly pass under base. Head's true outcomes are base's with
    true passes turned into true fails until head's *expected* mean score is ``drop`` lower (each
    broken task costs 0.6; a fractional remainder breaks one more task partly, so any drop can be
    simulated exactly). With ``drop=0`` both sides share their true outcomes (an A/A comparison)
    and differ only by the rollouts' noise. Raises ``ValueError`` when too few tasks pass to drop.
    """
    rng = random.Random(seed)
    ids = [f"t{i:02d}" for i in range(n_tasks)]
    base_truth = [i < round(BASE_PASS_SHARE * n_tasks) for i in range(n_tasks)]
    rng.shuffle(base_truth)
    cost = (1 - FLIP) - FLIP
    base_p = [1 - FLIP if t else FLIP for t in base_truth]
    head_p = list(base_p)
    broken = drop * n_tasks / cost
    whole = int(broken + 1e-9)
    part = broken - whole if broken - whole > 1e-9 else 0.0
    passing = [i for i, t in enumerate(base_truth) if t]
    if whole + (part > 0) > len(passing):
        raise ValueError(f"a drop of {drop:.3f} needs more than the {len(passing)} truly passing tasks")
    chosen = rng.sample(passing, whole + (part > 0))
    for i in chosen[:whole]:
        head_p[i] = FLIP
    if part:
        head_p[chosen[-1]] = 1 - FLIP - cost * part

    def rollouts(probs: list[float]) -> list[TaskResult]:
        return [rollout(tid, rep, rng.random() < p) for tid, p in zip(ids, probs, strict=True)
                for rep in range(repeats)]

    return rollouts(base_p), rollouts(head_p), ids


def simulate(seed: int, drop_tasks: int = 0) -> tuple[list[TaskResult], list[TaskResult], list[str]]:
    """One simulated PR of the acceptance scenario (60 tasks, 3 repeats, ``drop_tasks`` broken)."""
    return simulate_drop(seed, N_TASKS, REPEATS, drop_tasks * ((1 - FLIP) - FLIP) / N_TASKS)


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


# --- small suites: the exact paired test must agree (issue: 4 down, 0 up was "regressed") -----

def pass_fail_pair(n: int, down: int, up: int = 0) -> tuple[list[TaskResult], list[TaskResult], list[str]]:
    """One repeat per task: ``down`` tasks pass → fail, ``up`` fail → pass, the rest unchanged."""
    ids = [f"t{i:02d}" for i in range(n)]
    base = [rollout(t, 0, i < down or (down + up <= i and i % 2 == 0)) for i, t in enumerate(ids)]
    head = [rollout(t, 0, (down <= i < down + up) or (down + up <= i and i % 2 == 0)) for i, t in enumerate(ids)]
    return base, head, ids


def test_four_down_none_up_on_24_tasks_is_not_a_regression():
    c = compare_results(*pass_fail_pair(24, down=4), POLICY)
    assert (c.regressed, c.improved) == (4, 0)
    assert c.ci[1] < 0  # the percentile interval alone lies below 0 (the old verdict: regressed)…
    assert c.p_sign == c.p_exact == 0.125  # …but the exact test does not reject "no change"
    assert c.verdict == "unchanged"
    assert "4 tasks down and 0 up" in c.reason and "p = 0.125" in c.reason
    up = compare_results(*pass_fail_pair(24, down=0, up=4), POLICY)
    assert up.ci[0] > 0 and up.verdict == "unchanged"  # symmetric: not "improved" either


def test_six_down_none_up_is_a_regression():
    c = compare_results(*pass_fail_pair(24, down=6), POLICY)
    assert c.p_exact == 2 / 64 and c.verdict == "regressed"
    assert compare_results(*pass_fail_pair(24, down=0, up=6), POLICY).verdict == "improved"


# --- rounding dust never decides a verdict -----------------------------------------------------

def test_a_bound_of_rounding_dust_is_zero():
    policy = ComparePolicy()
    # Upper bound -4.6e-18 is 0 in real arithmetic: the interval touches 0, so no regression.
    assert decide_verdict((-0.3, -4.6e-18), 0.001, -0.1, (0, 9, 12), policy)[0] == "unchanged"
    assert decide_verdict((4.6e-18, 0.3), 0.001, 0.1, (9, 0, 12), policy)[0] == "unchanged"
    assert decide_verdict((-0.3, -1e-6), 0.001, -0.1, (0, 9, 12), policy)[0] == "regressed"
    margin = ComparePolicy(margin=0.1)
    assert decide_verdict((-0.2, -0.1 - 4.6e-18), 0.001, -0.15, (0, 9, 12), margin)[0] == "unchanged"
    assert decide_verdict((-0.2, -0.1 - 1e-6), 0.001, -0.15, (0, 9, 12), margin)[0] == "regressed"


def test_a_drop_of_exactly_the_margin_is_tolerated_despite_float_rounding():
    # 0.7 - 0.8 is -0.10000000000000009 in floats: exactly the tolerated drop of 0.1 in real numbers.
    ids = [f"t{i}" for i in range(10)]
    base = [TaskResult(t, 0, "p", "o", 0.8, True) for t in ids]
    head = [TaskResult(t, 0, "p", "o", 0.7, True) for t in ids]
    c = compare_results(base, head, ids, ComparePolicy(margin=0.1))
    assert c.ci[1] < -0.1 and c.p_exact < 0.01  # the float bound is below the margin, the test significant
    assert c.verdict == "unchanged" and "not below -0.100" in c.reason
    assert compare_results(base, head, ids, ComparePolicy(margin=0.09)).verdict == "regressed"


# --- what the gate could have caught ---------------------------------------------------------

def test_every_comparison_states_its_detectable_drop():
    c = compare_results(*simulate(0), POLICY)
    spread = stdev(t.delta for t in c.tasks)
    assert c.repeats == REPEATS and c.detectable_drop_basis == "observed spread"
    assert c.detectable_drop == pytest.approx(detectable_drop(N_TASKS, REPEATS, spread, 0.05, 0.8))
    assert 0.10 < c.detectable_drop < 0.18  # the bench: about 14 points, caught ~80% of the time there
    small = compare_results(*simulate_drop(0, 24, 1), POLICY)
    assert small.detectable_drop > 0.3 and small.repeats == 1
    # nothing moved: no spread observed, so the binomial worst case stands in
    same = compare_results(simulate(0)[0], simulate(0)[0], simulate(0)[2], POLICY)
    assert same.detectable_drop_basis == "worst case"
    assert same.detectable_drop == pytest.approx(detectable_drop(N_TASKS, REPEATS))
    # the gate fails only beyond the margin, so the drop it catches includes it
    assert compare_results(*simulate(0), ComparePolicy(margin=0.05)).detectable_drop > c.detectable_drop + 0.04


def gate_report(comparisons: list[Comparison]) -> GateReport:
    skills = [SkillVerdict(SkillChange(f"skill-{i}", f"skills/s{i}.md", "suite", "modified"), c.verdict,
                           False, c.reason, comparison=c) for i, c in enumerate(comparisons)]
    return GateReport("main", "pr", "a" * 40, "b" * 40, "c" * 40, GatePolicy(), skills)


def test_reports_say_what_the_gate_could_detect():
    c = compare_results(*simulate(0), POLICY)
    points = f"{c.detectable_drop * 100:.0f}"
    line = f"This gate can detect drops of about {points} points or more (80% power)."
    report = gate_report([c])
    assert line in render_gate(report) and line in terminal_table(report)
    data = json.loads(json.dumps(report.to_dict()))
    schema_validator("gate.schema.json").validate(data)
    assert data["skills"][0]["comparison"]["detectable_drop"] == c.detectable_drop
    two = gate_report([c, compare_results(*simulate_drop(0, 24, 1), POLICY)])
    assert "This gate can detect (80% power): skill-0: drops of about" in render_gate(two)


def test_a_gate_record_without_the_figure_still_loads():
    data = json.loads(json.dumps(gate_report([compare_results(*simulate(0), POLICY)]).to_dict()))
    for key in ("detectable_drop", "detectable_drop_basis", "p_exact", "repeats"):
        del data["skills"][0]["comparison"][key]
    old = GateReport.from_dict(data)
    assert old.skills[0].comparison.detectable_drop is None
    assert "can detect" not in render_gate(old) and "can detect" not in terminal_table(old)
