"""The paired sequential test of core/sequential.py: its looks, its rounds, and its error rate."""

from __future__ import annotations

import random

import pytest

from skillopt_ci.core.sequential import (
    disagreeing,
    fresh_offset,
    look,
    look_alpha,
    look_noninferior,
    paired_deltas,
    reason,
    validate,
)

IDS = [f"t{i:02d}" for i in range(24)]


def sides(up: int, down: int = 0, n: int = 24) -> tuple[dict, dict]:
    """Incumbent fails every task; the candidate passes ``up`` of them and ... ``down`` go the
    other way (the incumbent passes, the candidate fails)."""
    inc = {t: [0.0] for t in IDS[:n]}
    cand = {t: [0.0] for t in IDS[:n]}
    for t in IDS[:up]:
        cand[t] = [1.0]
    for t in IDS[up:up + down]:
        inc[t] = [1.0]
    return cand, inc


def test_a_clear_win_is_accepted_and_its_reason_names_delta_interval_tasks_rounds_rule():
    cand, inc = sides(8)
    result = look(cand, inc, IDS, alpha=0.05, rounds=1, round_no=1)
    assert result.verdict == "accept" and result.delta == pytest.approx(8 / 24) and result.lower > 0
    line = reason(result, rounds_used=1, mode="paired", alpha=0.05)
    assert line.startswith("accepted: +0.333 [+") and "paired over 24 tasks, 1 round (lower bound above +0.000; " \
                                                     "paired, alpha 0.05)" in line


def test_three_tasks_up_of_24_is_not_enough_for_the_exact_test():
    # The t bound alone would accept (+0.125, 3 up none down); the exact sign-flip p is 1/8.
    cand, inc = sides(3)
    result = look(cand, inc, IDS, alpha=0.05, rounds=1, round_no=1)
    assert result.lower > 0 and result.p_one_sided == pytest.approx(0.125)
    assert result.verdict == "reject" and "exact test not significant" in result.rule


def test_a_candidate_behind_or_level_is_rejected_at_once():
    assert look(*sides(0, 6), IDS, alpha=0.05, rounds=4, round_no=1).rule == "upper bound not above +0.000"
    level = look(*sides(2, 2), IDS, alpha=0.05, rounds=4, round_no=1)
    assert level.verdict == "reject" and level.rule == "mean delta not above +0.000"
    same = look(*sides(0), IDS, alpha=0.05, rounds=4, round_no=1)
    assert same.verdict == "reject" and same.delta == 0.0


def test_min_gain_raises_the_bar():
    cand, inc = sides(8)
    assert look(cand, inc, IDS, alpha=0.05, rounds=1, round_no=1, min_gain=0.3).verdict == "reject"


def test_an_undecided_look_continues_until_the_last_round():
    cand, inc = sides(4, 1)
    assert look(cand, inc, IDS, alpha=0.05, rounds=4, round_no=1).verdict == "continue"
    last = look(cand, inc, IDS, alpha=0.05, rounds=4, round_no=4)
    assert last.verdict == "reject" and last.rule.endswith("after the last round")


def test_bonferroni_splits_alpha_over_the_rounds():
    assert look_alpha(0.05, 4) == pytest.approx(0.0125) and look_alpha(0.05, 1) == 0.05


def test_later_rounds_sample_both_sides_only_where_they_disagree():
    cand, inc = sides(4, 1)
    asked: list[tuple[str, tuple[str, ...], int]] = []

    def sample(side, tasks, round_no):
        asked.append((side, tuple(tasks), round_no))
        return {t: [1.0 if side == "candidate" else 0.0] for t in tasks}

    done = validate(sample, cand, inc, IDS, alpha=0.05, rounds=4)
    assert asked[0] == ("candidate", tuple(IDS[:5]), 2) and asked[1] == ("incumbent", tuple(IDS[:5]), 2)
    assert done.rounds == len(asked) // 2 + 1 and done.extra_samples == sum(len(a[1]) for a in asked)
    assert done.candidate["t00"][0] == 1.0 and len(done.candidate["t00"]) == done.rounds
    assert len(done.candidate["t10"]) == 1  # never disagreed: never re-sampled


def test_per_task_means_pool_every_sample():
    cand = {"a": [1.0], "b": [0.0]}
    inc = {"a": [1.0, 0.0, 1.0, 0.0], "b": [0.0, 0.0]}
    assert paired_deltas(cand, inc, ["a", "b"]) == [0.5, 0.0]
    assert disagreeing(cand, inc, ["a", "b"]) == ["a"]


def test_fresh_offsets_are_deterministic_distinct_and_away_from_the_first_pass():
    a, b = fresh_offset("e0-s01", "incumbent", 1), fresh_offset("e0-s02", "incumbent", 1)
    assert a == fresh_offset("e0-s01", "incumbent", 1) and a != b
    assert fresh_offset("e0-s01", "candidate", 2) != fresh_offset("e0-s01", "incumbent", 2)
    assert min(a, b) >= 1000


def accept_rate(runs: int, rounds: int, gain_tasks: int, seed: str) -> float:
    """Accept rate in a simulated world (half the tasks pass with 0.9, half with 0.1; the
    incumbent carries two samples per task, as an honest incumbent does after one comparison)."""
    rng = random.Random(seed)
    p_inc = {t: 0.9 if i % 2 == 0 else 0.1 for i, t in enumerate(IDS)}
    p_cand = dict(p_inc)
    for t in IDS[1:2 * gain_tasks:2]:
        p_cand[t] = 0.9
    p = {"incumbent": p_inc, "candidate": p_cand}

    def draw(side, tasks, _round):
        return {t: [float(rng.random() < p[side][t])] for t in tasks}

    accepted = 0
    for _ in range(runs):
        inc = {t: [float(rng.random() < p_inc[t]) for _ in range(2)] for t in IDS}
        done = validate(draw, draw("candidate", IDS, 1), inc, IDS, alpha=0.05, rounds=rounds)
        accepted += done.look.verdict == "accept"
    return accepted / runs


@pytest.mark.parametrize("rounds", [1, 4])
def test_an_aa_candidate_is_accepted_at_most_alpha_of_the_time_and_a_real_gain_mostly(rounds):
    assert accept_rate(400, rounds, 0, f"aa:{rounds}") <= 0.05
    assert accept_rate(200, rounds, 9, f"ab:{rounds}") >= 0.7  # +0.30


# ---- non-inferiority (a candidate whose every edit was confirmed in screening) -------------------

def test_noninferiority_accepts_level_or_slightly_behind_and_rejects_a_clear_loss():
    cand, inc = sides(0, 0)  # level on every task
    level = look_noninferior(cand, inc, IDS, alpha=0.05)
    assert level.verdict == "accept" and level.delta == 0.0 and level.rule == "no significant loss"
    behind = look_noninferior(*reversed(sides(2)), IDS, alpha=0.05)  # 2 tasks of 24 lost: noise
    assert behind.verdict == "accept" and behind.delta < 0
    lost = look_noninferior(*reversed(sides(8)), IDS, alpha=0.05)  # 8 of 24 lost, none won
    assert lost.verdict == "reject" and lost.rule == "significantly worse" and lost.upper < 0
    assert reason(lost, rounds_used=1, mode="non-inferiority", alpha=0.05).startswith("rejected: -0.333 [")
    assert look_noninferior({IDS[0]: [1.0]}, {IDS[0]: [0.0]}, IDS, alpha=0.05).verdict == "reject"  # 1 task


def test_noninferiority_rejects_an_equal_candidate_at_most_alpha_of_the_time():
    """A/A: both sides pass each task with its own probability; the candidate is rejected (a false
    alarm of harm) at most alpha of the time. A candidate that lost a kind (4 tasks from 0.9 to
    0.1) is caught several times as often, but only about one time in five: 24 tasks give little
    power against a one-kind loss, which is why screening, not validation, is the guard against a
    harmful edit."""
    rng = random.Random("noninferior")
    p = {t: 0.9 if i % 2 == 0 else 0.1 for i, t in enumerate(IDS)}
    harmed = dict(p)
    for t in IDS[0:8:2]:
        harmed[t] = 0.1

    def reject_rate(candidate: dict, runs: int) -> float:
        rejected = 0
        for _ in range(runs):
            cand = {t: [float(rng.random() < candidate[t])] for t in IDS}
            inc = {t: [float(rng.random() < p[t])] for t in IDS}
            rejected += look_noninferior(cand, inc, IDS, alpha=0.05).verdict == "reject"
        return rejected / runs

    assert reject_rate(p, 400) <= 0.05
    assert reject_rate(harmed, 200) >= 0.12
