"""The paired comparison: small examples with known answers, determinism, serialisation."""

from __future__ import annotations

import json
import random
from statistics import fmean, stdev

import pytest

from skillopt_ci.core.compare import (
    ComparePolicy,
    Comparison,
    TaskDelta,
    compare_results,
    expanded_tail,
    paired_bootstrap_ci,
    sign_test,
)
from skillopt_ci.core.records import TaskResult
from skillopt_ci.core.stats import signflip_test

ERROR = {"kind": "server", "message": "503"}


def rollouts(task_id: str, *scores: float | None, passed_at: float = 1.0) -> list[TaskResult]:
    """One result per repeat; ``None`` is an errored rollout; passed iff score >= ``passed_at``."""
    return [TaskResult(task_id, rep, "p", None, None, None, error=ERROR) if s is None
            else TaskResult(task_id, rep, "p", "out", s, s >= passed_at)
            for rep, s in enumerate(scores)]


def side(table: dict[str, tuple[float | None, ...]], passed_at: float = 1.0) -> list[TaskResult]:
    return [r for tid, scores in table.items() for r in rollouts(tid, *scores, passed_at=passed_at)]


def shifted(deltas: list[float], base_score: float = 0.5):
    """One repeat per task: base scores ``base_score``, head ``base_score + delta``."""
    ids = [f"t{i}" for i in range(len(deltas))]
    base = [r for tid in ids for r in rollouts(tid, base_score)]
    head = [r for tid, d in zip(ids, deltas, strict=True) for r in rollouts(tid, base_score + d)]
    return base, head, ids


# --- known answers ---------------------------------------------------------------------------

def test_small_example_by_hand():
    base = side({"a": (1, 1), "b": (0, 1), "c": (0, 0), "d": (1, 1)})
    head = side({"a": (1, 1), "b": (1, 1), "c": (1, 0), "d": (0, 0)})
    c = compare_results(base, head, ["a", "b", "c", "d"])
    # deltas 0, +0.5, +0.5, -1.0
    assert [t.delta for t in c.tasks] == [0.0, 0.5, 0.5, -1.0]
    assert (c.delta, c.base_mean, c.head_mean) == (0.0, 0.625, 0.625)
    assert (c.improved, c.regressed, c.unchanged) == (2, 1, 1)
    assert (c.n_tasks, c.n_paired, c.coverage) == (4, 4, 1.0)
    assert c.p_sign == 1.0  # 2 vs 1: 2 × (1 + 3) / 8, capped at 1
    # pass (rate >= 0.5): base T T F T, head T T T F → one discordant pair each way
    assert c.p_mcnemar == 1.0
    assert c.flaky_base == ("b",) and c.flaky_head == ("c",)
    assert c.tasks[1] == TaskDelta("b", 0.5, 1.0, 0.5, 0.5, 1.0, True, False)
    assert c.verdict == "unchanged" and "includes 0" in c.reason


def test_sign_test_exact_values():
    assert sign_test(9, 1) == pytest.approx(0.021484375, abs=1e-12)  # 2 × (1 + 10) / 1024
    assert sign_test(1, 9) == sign_test(9, 1)
    assert sign_test(10, 0) == 2 / 1024
    assert sign_test(0, 0) == 1.0 and sign_test(5, 5) == 1.0
    assert sign_test(3, 4) == 1.0
    assert 0.0 < sign_test(5300, 4700) < 1e-8  # large n stays exact, no float overflow


def test_sign_and_mcnemar_p_values():
    # 9 tasks pass → fail, 1 fail → pass, 5 unchanged passes (concordant: ignored by McNemar)
    base = side({**{f"r{i}": (1, 1, 0) for i in range(9)}, "u": (0, 0, 1),
                 **{f"s{i}": (1, 1, 1) for i in range(5)}})
    head = side({**{f"r{i}": (0, 0, 1) for i in range(9)}, "u": (1, 1, 0),
                 **{f"s{i}": (1, 1, 1) for i in range(5)}})
    ids = [*(f"r{i}" for i in range(9)), "u", *(f"s{i}" for i in range(5))]
    c = compare_results(base, head, ids)
    assert (c.improved, c.regressed, c.unchanged) == (1, 9, 5)
    assert c.p_sign == pytest.approx(0.021484375)
    assert c.p_mcnemar == pytest.approx(0.021484375)
    assert c.delta == pytest.approx((9 * -1 / 3 + 1 / 3) / 15)


def test_bootstrap_interval():
    # mean of two resampled values of {0, 1}: 0, 0.5 or 1 with chance 1/4, 1/2, 1/4
    assert paired_bootstrap_ci([0.0, 1.0], 0.95, 2000, random.Random(0)) == (0.0, 1.0)
    # Two values are a tiny sample: the expanded interval widens 40% to the full range.
    assert paired_bootstrap_ci([0.0, 1.0], 0.40, 2000, random.Random(0)) == (0.0, 1.0)
    assert paired_bootstrap_ci([0.2] * 7, 0.95, 2000, random.Random(0)) == (0.2, 0.2)
    with pytest.raises(ValueError):
        paired_bootstrap_ci([], 0.95, 100, random.Random(0))
    # close to the normal interval on a large sample
    rng = random.Random(5)
    deltas = [rng.gauss(-0.05, 0.3) for _ in range(400)]
    lo, hi = paired_bootstrap_ci(deltas, 0.95, 4000, random.Random(1))
    half = 1.96 * stdev(deltas) / len(deltas) ** 0.5
    assert lo == pytest.approx(fmean(deltas) - half, abs=0.006)
    assert hi == pytest.approx(fmean(deltas) + half, abs=0.006)


def test_expanded_percentile_tail():
    # Large samples: the plain 2.5% tail. Small ones: widened so the width matches a t-interval.
    assert expanded_tail(0.95, 100_000) == pytest.approx(0.025, abs=1e-4)
    assert expanded_tail(0.95, 12) == pytest.approx(0.0108, abs=5e-4)
    assert expanded_tail(0.95, 60) == pytest.approx(0.0218, abs=5e-4)


# --- decisions -------------------------------------------------------------------------------

def test_regression_beyond_the_margin():
    deltas = [-0.03 + (0.01 if i % 2 else -0.01) for i in range(40)]
    c = compare_results(*shifted(deltas))
    assert c.verdict == "regressed" and c.ci[1] < 0
    assert c.reason.startswith("95% CI of Δ [") and "lies entirely below 0: the head is worse" in c.reason
    assert c.delta == pytest.approx(-0.03)
    assert c.p_sign == sign_test(0, 40)


def test_a_drop_within_the_margin_is_not_a_regression():
    deltas = [-0.03 + (0.01 if i % 2 else -0.01) for i in range(40)]
    c = compare_results(*shifted(deltas), ComparePolicy(margin=0.05))
    assert c.ci[1] < 0 and c.p_sign < 1e-10  # significant…
    assert c.verdict == "unchanged"  # …but within the tolerated drop
    assert "not below -0.050" in c.reason and c.margin == 0.05
    assert compare_results(*shifted(deltas), ComparePolicy(margin=0.02)).verdict == "regressed"


def test_improved():
    rng = random.Random(2)
    deltas = [0.1 + rng.uniform(-0.2, 0.2) for _ in range(50)]
    c = compare_results(*shifted(deltas, base_score=0.4))
    assert c.verdict == "improved" and c.ci[0] > 0 and "lies entirely above 0" in c.reason
    assert c.head_mean > c.base_mean


def test_all_equal_deltas():
    same = side({f"t{i}": (i % 2, 1, 0.5) for i in range(10)}, passed_at=0.5)
    c = compare_results(same, same, [f"t{i}" for i in range(10)])
    assert (c.ci, c.delta, c.verdict) == ((0.0, 0.0), 0.0, "unchanged")
    assert (c.improved, c.regressed, c.unchanged) == (0, 0, 10)
    assert (c.p_sign, c.p_mcnemar) == (1.0, 1.0)
    assert "scored the same" in c.reason
    worse = compare_results(*shifted([-0.2] * 10))
    assert worse.ci == (pytest.approx(-0.2), pytest.approx(-0.2)) and worse.verdict == "regressed"


def test_rounding_dust_is_not_a_change():
    base = side({"a": (0.1, 0.2, 0.3), "b": (0.2,)}, passed_at=0.5)
    head = side({"a": (0.2,), "b": (0.2,)}, passed_at=0.5)
    c = compare_results(base, head, ["a", "b"])
    assert (c.improved, c.regressed, c.unchanged, c.verdict) == (0, 0, 2, "unchanged")


def test_too_few_paired_tasks_is_inconclusive():
    one = side({"a": (1, 0)})
    c = compare_results(one, one, ["a"])
    assert c.verdict == "inconclusive" and c.ci is None and "at least 2" in c.reason
    empty = compare_results([], [], [])
    assert (empty.verdict, empty.coverage, empty.delta, empty.p_sign) == ("inconclusive", 0.0, None, None)
    # tasks never run at all count as missing too
    base = side({"a": (1,), "b": (0,)})
    c = compare_results(base, base, ["a", "b", "c"])
    assert (c.n_paired, c.verdict) == (2, "inconclusive") and "66.7%" in c.reason


def test_missing_data_is_not_zero():
    base = side({"a": (1, None, 1), "b": (0, 0), "c": (None, None)})
    head = side({"a": (1, 1, 1), "b": (1, 1), "c": (1, 1)})
    c = compare_results(base, head, ["a", "b", "c"], ComparePolicy(min_coverage=0.5))
    assert [t.delta for t in c.tasks] == [0.0, 1.0, None]
    assert c.tasks[2] == TaskDelta("c", None, 1.0, None, None, 1.0, False, False)
    assert (c.base_mean, c.head_mean, c.base_errors, c.head_errors) == (0.5, 1.0, 3, 0)


def test_flaky_tasks():
    base = side({"a": (1, 0, 1), "b": (1, 1, None), "c": (0.5, 0.5), "d": (1, None, 0)}, passed_at=1)
    head = side({"a": (1, 1, 1), "b": (0, 1, 0), "c": (0.5, 0.5), "d": (0, 0, None)}, passed_at=1)
    c = compare_results(base, head, ["a", "b", "c", "d"])
    assert c.flaky_base == ("a", "d")  # an errored repeat never makes a task flaky
    assert c.flaky_head == ("b",)
    assert [(t.base_flaky, t.head_flaky) for t in c.tasks] == [(True, False), (False, True),
                                                                  (False, False), (True, False)]


# --- contracts -------------------------------------------------------------------------------

def noisy_pair(seed: int = 11, n: int = 30):
    rng = random.Random(seed)
    ids = [f"t{i}" for i in range(n)]
    base = side({tid: tuple(float(rng.random() < 0.6) for _ in range(3)) for tid in ids})
    head = side({tid: tuple(float(rng.random() < 0.5) for _ in range(3)) for tid in ids})
    return base, head, ids


def test_deterministic_for_a_seed():
    base, head, ids = noisy_pair()
    first = compare_results(base, head, ids, ComparePolicy(seed=3))
    assert compare_results(base, head, ids, ComparePolicy(seed=3)) == first
    other = compare_results(base, head, ids, ComparePolicy(seed=4))
    assert other.ci != first.ci and other.delta == first.delta


def test_independent_of_result_order():
    base, head, ids = noisy_pair()
    expected = compare_results(base, head, ids)
    rng = random.Random(0)
    for _ in range(3):
        b, h = base[:], head[:]
        rng.shuffle(b)
        rng.shuffle(h)
        assert compare_results(b, h, ids) == expected
    # task order is the report's order, the statistics do not depend on it
    assert compare_results(base, head, ids[::-1]).tasks == expected.tasks[::-1]


def test_results_outside_the_task_list_are_ignored():
    base, head, ids = noisy_pair()
    extra = rollouts("zzz", 0, 0)
    assert compare_results(base + extra, head, ids) == compare_results(base, head, ids)


@pytest.mark.parametrize("policy", [ComparePolicy(), ComparePolicy(min_coverage=1.0, margin=0.1)])
def test_round_trip_through_json(policy):
    base, head, ids = noisy_pair()
    head = [r for r in head if r.task_id != "t3"]
    c = compare_results(base, head, ids, policy)
    data = json.loads(json.dumps(c.to_dict()))
    assert data["schema_version"] == 1 and data["kind"] == "comparison"
    assert Comparison.from_dict(data) == c


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="duplicates"):
        compare_results([], [], ["a", "a"])
    for bad in ({"confidence": 1.0}, {"margin": -0.1}, {"min_coverage": 1.5}, {"resamples": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            ComparePolicy(**bad)


def test_large_suites_with_continuous_scores():
    """500 tasks of continuous scores: the exact test's distribution is too large, so it samples
    sign patterns, seeded. (Speed is measured in bench/bench_gate_stats.py, not asserted here.)"""
    rng = random.Random(0)
    ids = [f"t{i}" for i in range(500)]
    base = side({tid: (rng.random(),) for tid in ids})
    head = side({tid: (rng.random(),) for tid in ids})
    c = compare_results(base, head, ids)
    assert c == compare_results(base, head, ids)
    assert 1 / 2001 <= c.p_exact <= 1.0 and c.verdict == "unchanged" and c.detectable_drop < 0.1


# --- the exact paired test -------------------------------------------------------------------

def test_signflip_test_exact_values():
    assert signflip_test([-1.0] * 4) == 0.125 == sign_test(0, 4)  # the 4 down, 0 up case
    assert signflip_test([-1.0] * 4 + [0.0] * 20) == 0.125  # unchanged tasks do not count
    assert signflip_test([]) == signflip_test([0.0, 0.0]) == 1.0
    # with pass/fail deltas it is the exact sign test, at any size
    rng = random.Random(1)
    deltas = [rng.choice([-1.0, 0.0, 0.0, 1.0]) for _ in range(300)]
    assert signflip_test(deltas) == pytest.approx(sign_test(deltas.count(1.0), deltas.count(-1.0)), rel=1e-9)
    # averages of repeats sit on a grid of thirds, which no decimal grain represents: still exact
    assert signflip_test([1 / 3, -1 / 3]) == 1.0
    assert signflip_test([-1 / 3, -2 / 3, -1.0]) == 2 / 8
    # magnitudes 2, 1, 1, 1 thirds with sum -1: 8 of the 16 sign patterns reach |sum| >= 1
    assert signflip_test([-2 / 3, 1 / 3, -1 / 3, -1 / 3]) == 8 / 16


def test_signflip_test_samples_when_the_exact_distribution_is_too_large():
    rng = random.Random(3)
    deltas = [rng.uniform(-0.5, 0.45) for _ in range(400)]
    p = signflip_test(deltas, samples=2000, seed=7)
    assert p == signflip_test(list(reversed(deltas)), samples=2000, seed=7)  # seeded, order-free
    assert p == pytest.approx(sign_flip_normal(deltas), abs=0.03) and (1 + 0) / 2001 <= p <= 1.0


def sign_flip_normal(deltas: list[float]) -> float:
    """The normal approximation of the sign-flip test: sum / sqrt(sum of squares)."""
    from statistics import NormalDist

    z = abs(sum(deltas)) / sum(d * d for d in deltas) ** 0.5
    return 2 * (1 - NormalDist().cdf(z))
