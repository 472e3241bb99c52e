"""The discordant-pair tests: the exact sign test, the sequential test's verdicts, and its
operating characteristics by dynamic programming checked against brute-force enumeration."""

from __future__ import annotations

import itertools
import math

import pytest

from skillopt_ci.core.signtest import (
    CONFIRM,
    CONTINUE,
    REJECT,
    Sprt,
    error_rates,
    operating,
    sign_test,
)


def test_sign_test_is_the_exact_one_sided_binomial_tail():
    assert sign_test(5, 0) == 1 / 32
    assert sign_test(7, 1) == pytest.approx(9 / 256)
    assert sign_test(0, 3) == 1.0 and sign_test(0, 0) == 1.0
    assert sign_test(3, 3) == pytest.approx(42 / 64)
    with pytest.raises(ValueError):
        sign_test(-1, 2)


def test_the_sequential_test_confirms_at_tests_over_alpha_and_rejects_at_a_tenth():
    test = Sprt(theta=0.9, alpha=0.05, tests=1)
    assert test.wins_needed() == 6 and test.verdict(6, 0) == CONFIRM and test.verdict(5, 0) == CONTINUE
    assert test.verdict(0, 2) == REJECT and test.verdict(0, 1) == CONTINUE  # one loss: ratio 0.2
    assert test.verdict(8, 1) == CONFIRM and test.verdict(7, 1) == CONTINUE
    three = Sprt(theta=0.9, tests=3)  # three edits in the step: the ratio must reach 60
    assert three.wins_needed() == 7 and three.verdict(6, 0) == CONTINUE
    capped = Sprt(max_pairs=4)
    assert capped.verdict(3, 1) == REJECT  # the cap ends the test unconfirmed


def brute_force(test: Sprt, q: float) -> float:
    """P(confirm) by walking every sequence of ``max_pairs`` pairs until the test stops."""
    total = 0.0
    for seq in itertools.product((True, False), repeat=test.max_pairs):
        wins = losses = 0
        for won in seq:
            wins, losses = wins + won, losses + (not won)
            verdict = test.verdict(wins, losses)
            if verdict != CONTINUE:
                break
        if verdict == CONFIRM:
            total += math.prod(q if won else 1 - q for won in seq)
    return total


@pytest.mark.parametrize("test", [Sprt(max_pairs=12), Sprt(theta=0.8, tests=2, max_pairs=12),
                                  Sprt(theta=0.95, tests=3, max_pairs=10)])
@pytest.mark.parametrize("q", [0.5, 0.7, 0.95])
def test_the_dynamic_programme_equals_brute_force_enumeration(test, q):
    assert operating(test, q)[0] == pytest.approx(brute_force(test, q), abs=1e-12)


@pytest.mark.parametrize("tests", [1, 2, 3, 4, 6])
def test_the_false_confirm_rate_stays_under_alpha_over_the_edits_tested(tests):
    test = Sprt(tests=tests)
    false_confirm, power = error_rates(test)
    assert false_confirm <= 0.05 / tests
    assert power > 0.85  # an edit that wins 9 discordant pairs in 10 is confirmed
    assert operating(test, 0.3)[0] < false_confirm  # a harmful edit even less often
