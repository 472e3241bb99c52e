"""The paired comparison of two skills on the same tasks: the statistics behind the gate.

Repeats are averaged per task and side; a task is *paired* when both sides have at least one
valid (non-errored) repeat, and only paired tasks enter any statistic. Errored rollouts are
missing data: they lower ``coverage``, never a score.

The decision needs two things to agree. The first is a seeded paired-bootstrap percentile
interval of the mean per-task delta (head − base), resampling tasks with replacement, *expanded*
for small samples (see :func:`expanded_tail`); it carries the margin. The second is the exact
paired sign-flip test of "no change" (:func:`skillopt_ci.core.stats.signflip_test`: exact at every
suite size, and with pass/fail scores and one repeat it is the exact sign/McNemar test). The
percentile interval alone is too narrow when few tasks are discordant (4 down and 0 up lay below
0, where the exact test gives p = 0.125); the exact test keeps the false-failure rate of an A/A
comparison at or below its nominal (1 - confidence) / 2 at every size:

- ``regressed`` iff the interval's upper bound is below ``-margin`` *and* the exact test rejects
  "no change" at ``1 - confidence`` (two-sided) with the mean delta below 0;
- ``improved`` iff the interval's lower bound is above 0 *and* the exact test rejects, mean above 0;
- ``unchanged`` otherwise;
- ``inconclusive`` when fewer than ``min_coverage`` of the tasks, or fewer than two, are paired.

Every comparison with 0 or the margin goes through :func:`skillopt_ci.core.stats.below` / ``above``
(one tolerance), so rounding dust such as a bound of -4.6e-18 never decides a verdict. The exact
sign test on the deltas and the exact McNemar test on per-task pass/fail are reported beside it
(``tests/gate/test_gate_statistics.py``, ``bench/bench_gate_stats.py`` show the rates). Each comparison
also states ``detectable_drop``: the true drop this gate would catch with 80% probability, from
the paired tasks, the repeats and the observed spread of the deltas
(:func:`skillopt_ci.core.stats.detectable_drop`).

Everything here is pure and deterministic: the same inputs and seed give the same comparison,
whatever the order of the result lists (tasks are visited in ``task_ids`` order).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist, fmean, stdev
from typing import Any, ClassVar

from skillopt_ci.core import codec
from skillopt_ci.core.records import TaskResult, task_scores
from skillopt_ci.core.stats import (
    TOLERANCE,
    above,
    below,
    detectable_drop,
    signflip_test,
    t_quantile,
)

COMPARISON_SCHEMA_VERSION = 1
EPSILON = TOLERANCE  # deltas closer to 0 than this count as unchanged (averaging leaves rounding dust)
POWER = 0.8  # the detection probability ``detectable_drop`` is stated at


@dataclass(frozen=True)
class ComparePolicy:
    """How a comparison decides. ``margin`` is the largest drop tolerated, in score units."""

    confidence: float = 0.95
    margin: float = 0.0
    min_coverage: float = 0.8
    resamples: int = 2000
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence!r}")
        if not 0.0 <= self.margin <= 1.0:
            raise ValueError(f"margin must be in [0, 1], got {self.margin!r}")
        if not 0.0 <= self.min_coverage <= 1.0:
            raise ValueError(f"min_coverage must be in [0, 1], got {self.min_coverage!r}")
        if self.resamples < 1:
            raise ValueError(f"resamples must be >= 1, got {self.resamples!r}")

    @classmethod
    def from_gate(cls, gate: Any, margin: float | None = None) -> ComparePolicy:
        """The comparison a ``gate:`` policy asks for (``margin`` overrides the gate's)."""
        return cls(confidence=gate.confidence, margin=gate.margin if margin is None else margin,
                   min_coverage=gate.min_coverage, resamples=gate.resamples, seed=gate.seed)


@dataclass(frozen=True)
class TaskDelta(codec.Record):
    """One task, repeats averaged per side. ``None`` means no valid repeat on that side."""

    task_id: str
    base: float | None
    head: float | None
    delta: float | None
    base_pass: float | None
    head_pass: float | None
    base_flaky: bool
    head_flaky: bool


@dataclass(frozen=True)
class Comparison(codec.Record):
    """The outcome of :func:`compare_results`. Means, delta and interval are over paired tasks.

    ``base_errors``/``head_errors`` count errored rollouts of the compared tasks.
    """

    JSON_HEAD: ClassVar = {"schema_version": COMPARISON_SCHEMA_VERSION, "kind": "comparison"}

    n_tasks: int
    n_paired: int
    coverage: float
    base_mean: float | None
    head_mean: float | None
    delta: float | None
    ci: tuple[float, float] | None
    confidence: float
    p_sign: float | None
    p_mcnemar: float | None
    improved: int
    regressed: int
    unchanged: int
    verdict: str
    reason: str
    flaky_base: tuple[str, ...]
    flaky_head: tuple[str, ...]
    tasks: tuple[TaskDelta, ...]
    margin: float = 0.0
    base_errors: int = 0
    head_errors: int = 0
    p_exact: float | None = None
    detectable_drop: float | None = None
    detectable_drop_basis: str | None = None  # "observed spread" | "worst case"
    repeats: int | None = None


def sign_test(n_pos: int, n_neg: int) -> float:
    """Exact two-sided binomial test of ``n_pos`` vs ``n_neg`` under p = 1/2 (ties excluded by the
    caller). 1.0 when there is nothing to test. Exact integer arithmetic, any ``n``."""
    n = n_pos + n_neg
    if n == 0:
        return 1.0
    term = tail = 1  # C(n, 0); each next binomial coefficient from the last, exactly
    for i in range(min(n_pos, n_neg)):
        term = term * (n - i) // (i + 1)
        tail += term
    return min(1.0, 2 * tail / 2**n)


def expanded_tail(confidence: float, n: int) -> float:
    """The tail probability for an *expanded* percentile interval (Hesterberg 2015).

    The plain percentile bootstrap is too narrow for small samples (it behaves like a z-interval
    with the biased variance). Widening it so that its normal-theory width matches the t-interval,
    z' = sqrt(n / (n - 1)) · t_{n-1}, restores the nominal coverage for small n and converges to
    the plain interval as n grows.
    """
    if n < 2:
        return (1.0 - confidence) / 2
    t = t_quantile(0.5 + confidence / 2, n - 1)
    return 1.0 - NormalDist().cdf(math.sqrt(n / (n - 1)) * t)


def paired_bootstrap_ci(deltas: Sequence[float], confidence: float, resamples: int,
                        rng: random.Random) -> tuple[float, float]:
    """Percentile interval of the mean of ``deltas``, resampling them with replacement.

    Deterministic for the same ``deltas`` (in the same order) and ``rng`` state. When every delta
    is equal the interval is that point. Raises ``ValueError`` on an empty sequence.
    """
    values = list(deltas)
    n = len(values)
    if n == 0:
        raise ValueError("no deltas to resample")
    low, high = min(values), max(values)
    if low == high:
        return low, high
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    k = min(resamples - 1, int(expanded_tail(confidence, n) * resamples + 1e-9))
    # A mean of values lies within their range; clamp the rounding of the sum back into it.
    return max(low, means[k]), min(high, means[resamples - 1 - k])


def _crossed(before: float | None, after: float | None) -> bool:
    """A pass rate that went from below one half to at least one half (``None``: not measured)."""
    return before is not None and after is not None and after >= 0.5 > before


def _pct(x: float) -> str:
    return f"{x * 100:.3g}%"


def _too_few_paired(n_paired: int, n_tasks: int, coverage: float, base_errors: int, head_errors: int,
                    policy: ComparePolicy) -> str:
    return (f"only {n_paired} of {n_tasks} tasks ({_pct(coverage)}) were measured on both sides "
            f"({base_errors} base and {head_errors} head rollouts errored); "
            + (f"at least {_pct(policy.min_coverage)} are needed" if coverage < policy.min_coverage
               else "at least 2 are needed for an interval"))


def _detectable_drop(deltas: Sequence[float], repeats: int, policy: ComparePolicy) -> tuple[float | None, str | None]:
    """The smallest drop this comparison would likely catch, and what its spread is based on."""
    spread = stdev(deltas) if len(deltas) >= 2 else None
    mde = detectable_drop(len(deltas), repeats, spread, 1.0 - policy.confidence, POWER, policy.margin)
    return mde, None if mde is None else ("observed spread" if spread and spread > TOLERANCE else "worst case")


def decide_verdict(ci: tuple[float, float], p_exact: float, delta: float, counts: tuple[int, int, int],
                   policy: ComparePolicy) -> tuple[str, str]:
    """(verdict, reason) from the interval, the exact test's p-value and the mean delta. Pure.

    ``counts`` is (tasks up, tasks down, paired tasks), for the reason. Both the interval and the exact test
    must agree before a change is called (see the module docstring); every comparison with 0 or
    the margin uses the one tolerance of :func:`below` / :func:`above`.
    """
    n_up, n_down, n_paired = counts
    shown = f"{_pct(policy.confidence)} CI of Δ [{ci[0]:+.3f}, {ci[1]:+.3f}]"
    exact = f"exact paired test p = {p_exact:.3g}"
    significant = p_exact < 1.0 - policy.confidence
    if not below(ci[0], 0.0) and not above(ci[1], 0.0):  # the interval is the point 0
        return "unchanged", f"every one of the {n_paired} paired tasks scored the same on both sides"
    if below(ci[1], -policy.margin):
        bound = f"the tolerated drop of {policy.margin:.3f}" if policy.margin else "0"
        if significant and below(delta, 0.0):
            return "regressed", f"{shown} lies entirely below {bound}: the head is worse ({exact})"
        return "unchanged", (f"{shown} lies below {bound}, but with {n_down} tasks down and {n_up} up the "
                             f"{exact}: not a significant change")
    if above(ci[0], 0.0):
        if significant and above(delta, 0.0):
            return "improved", f"{shown} lies entirely above 0: the head is better ({exact})"
        return "unchanged", (f"{shown} lies above 0, but with {n_up} tasks up and {n_down} down the "
                             f"{exact}: not a significant change")
    if below(ci[1], 0.0):
        return "unchanged", f"{shown} lies below 0 but not below {-policy.margin:+.3f}, the tolerated drop"
    return "unchanged", f"{shown} includes 0: no significant change"


def compare_results(base: Sequence[TaskResult], head: Sequence[TaskResult], task_ids: Sequence[str],
                    policy: ComparePolicy = ComparePolicy()) -> Comparison:
    """Compare head with base on ``task_ids``. Pure; deterministic for the same inputs and seed.

    Results for tasks not in ``task_ids`` are ignored. Raises ``ValueError`` on duplicate ids.
    """
    if len(set(task_ids)) != len(task_ids):
        raise ValueError("task_ids contains duplicates")
    base_sides, head_sides = task_scores(base, task_ids), task_scores(head, task_ids)
    base_errors, head_errors = sum(s.n_errors for s in base_sides), sum(s.n_errors for s in head_sides)
    tasks = []
    for tid, b, h in zip(task_ids, base_sides, head_sides, strict=True):
        delta = h.mean - b.mean if b.mean is not None and h.mean is not None else None
        tasks.append(TaskDelta(tid, b.mean, h.mean, delta, b.pass_rate, h.pass_rate, b.flaky, h.flaky))
    paired = [t for t in tasks if t.delta is not None]
    deltas = [t.delta for t in paired if t.delta is not None]  # every paired one; the filter only narrows
    n_tasks, n_paired = len(tasks), len(paired)
    coverage = n_paired / n_tasks if n_tasks else 0.0
    improved = sum(1 for d in deltas if above(d, 0.0))
    regressed = sum(1 for d in deltas if below(d, 0.0))
    moved_up = sum(1 for t in paired if _crossed(t.base_pass, t.head_pass))
    moved_down = sum(1 for t in paired if _crossed(t.head_pass, t.base_pass))
    p_exact = signflip_test(deltas, policy.resamples, policy.seed) if paired else None
    repeats = min((min(b.n_valid, h.n_valid) for t, b, h in zip(tasks, base_sides, head_sides, strict=True)
                   if t.delta is not None), default=None)
    mde, basis = _detectable_drop(deltas, repeats or 1, policy)

    ci: tuple[float, float] | None = None
    if coverage < policy.min_coverage or n_paired < 2 or p_exact is None:
        verdict, reason = "inconclusive", _too_few_paired(n_paired, n_tasks, coverage, base_errors, head_errors, policy)
    else:
        ci = paired_bootstrap_ci(deltas, policy.confidence, policy.resamples, random.Random(policy.seed))
        verdict, reason = decide_verdict(ci, p_exact, fmean(deltas), (improved, regressed, n_paired), policy)
    return Comparison(
        n_tasks=n_tasks,
        n_paired=n_paired,
        coverage=coverage,
        base_mean=fmean(t.base for t in paired if t.base is not None) if paired else None,
        head_mean=fmean(t.head for t in paired if t.head is not None) if paired else None,
        delta=fmean(deltas) if deltas else None,
        ci=ci,
        confidence=policy.confidence,
        p_sign=sign_test(improved, regressed) if paired else None,
        p_mcnemar=sign_test(moved_up, moved_down) if paired else None,
        improved=improved,
        regressed=regressed,
        unchanged=n_paired - improved - regressed,
        verdict=verdict,
        reason=reason,
        flaky_base=tuple(t.task_id for t in tasks if t.base_flaky),
        flaky_head=tuple(t.task_id for t in tasks if t.head_flaky),
        tasks=tuple(tasks),
        margin=policy.margin,
        base_errors=base_errors,
        head_errors=head_errors,
        p_exact=p_exact,
        detectable_drop=mde,
        detectable_drop_basis=basis,
        repeats=repeats,
    )
