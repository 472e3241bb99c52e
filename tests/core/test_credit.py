"""Credit assignment: an accepted step keeps only the edits that pull their weight."""

from __future__ import annotations

import json

from helpers.cli import run_cli
from helpers.project import LEGACY_TRAIN
from helpers.repo import SKILL
from helpers.training import train_project
from skillopt_ci.core.credit import (
    attribute_credit,
    attribute_credit_confident,
    changed_tasks,
    credit_verdict,
    one_sided_bounds,
)
from skillopt_ci.core.edits import Edit, EditCaps
from skillopt_ci.core.records import TaskResult
from skillopt_ci.sim import ScriptedModelServer
from skillopt_ci.sim.sim_models import SIM_OPTIMIZER
from skillopt_ci.sim.triage import TriagePolicy
from skillopt_ci.train.history import Decision
from skillopt_ci.train.state import TrainState

BASE = "# Skill\n\n- rule one\n"
GOOD = Edit("append", "- good rule")
ALSO_GOOD = Edit("append", "- also good")
USELESS = Edit("append", "- useless rule")


def results(scores: dict[str, float]) -> list[TaskResult]:
    return [TaskResult(t, 0, "p", "o", s, s >= 1) for t, s in scores.items()]


def scorer(table):
    """score(text) by which rules the text holds: ``table`` maps a frozenset of rules to scores."""
    def score_for(text: str) -> dict[str, float]:
        present = frozenset(rule for rule in ("good rule", "also good", "useless rule") if rule in text)
        return table[present]

    calls = []

    def score_tasks(text, task_ids, label):
        calls.append(label)
        full = score_for(text)
        return {t: full[t] for t in task_ids}

    def score_all(text, label):
        calls.append(label)
        return results(score_for(text))

    return score_tasks, score_all, calls


IDS = ["a", "b", "c"]
INCUMBENT = {"a": 0.0, "b": 0.0, "c": 1.0}


def test_a_useless_edit_is_dropped():
    table = {frozenset({"good rule", "useless rule"}): {"a": 1.0, "b": 0.0, "c": 1.0},
             frozenset({"good rule"}): {"a": 1.0, "b": 0.0, "c": 1.0}}
    score_tasks, score_all, calls = scorer(table)
    result = attribute_credit(BASE, [GOOD, USELESS], results(INCUMBENT), results({"a": 1.0, "b": 0.0, "c": 1.0}),
                              IDS, EditCaps(), score_tasks=score_tasks, score_all=score_all)
    assert result.used == "pruned" and result.kept == [GOOD]
    assert "useless rule" not in result.text and "good rule" in result.text
    assert result.tasks == ["a"] and calls == ["without-1", "pruned"]


def test_of_two_edits_fixing_the_same_task_one_is_kept():
    both = {"a": 1.0, "b": 0.0, "c": 1.0}
    table = {frozenset({"good rule", "also good"}): both, frozenset({"good rule"}): both,
             frozenset({"also good"}): both, frozenset(): INCUMBENT}
    score_tasks, score_all, _ = scorer(table)
    result = attribute_credit(BASE, [GOOD, ALSO_GOOD], results(INCUMBENT), results(both), IDS, EditCaps(),
                              score_tasks=score_tasks, score_all=score_all)
    assert result.used == "pruned" and result.kept == [GOOD]


def test_the_candidate_stands_when_the_smaller_skill_does_worse_overall():
    # Leaving "useless" out keeps task a, but it silently held task c: the full check catches it.
    full = {"a": 1.0, "b": 0.0, "c": 1.0}
    table = {frozenset({"good rule", "useless rule"}): full,
             frozenset({"good rule"}): {"a": 1.0, "b": 0.0, "c": 0.0}}
    score_tasks, score_all, _ = scorer(table)
    result = attribute_credit(BASE, [GOOD, USELESS], results(INCUMBENT), results(full), IDS, EditCaps(),
                              score_tasks=score_tasks, score_all=score_all)
    assert result.used == "full" and result.kept == [GOOD, USELESS] and result.pruned_val is not None


def test_a_single_edit_is_not_examined():
    score_tasks, score_all, calls = scorer({})
    result = attribute_credit(BASE, [GOOD], results(INCUMBENT), results(INCUMBENT), IDS, EditCaps(),
                              score_tasks=score_tasks, score_all=score_all)
    assert result.kept == [GOOD] and calls == []


def test_changed_tasks_in_suite_order():
    assert changed_tasks(results({"a": 0, "b": 1, "c": 0.5}), results({"a": 1, "b": 1, "c": 0}), IDS) == ["a", "c"]


BUG_RULE = '- If the ticket mentions "crash", "error", "broken" or "freezes", the category is bug.'


def two_edits(request):
    """An optimizer that always proposes one rule that helps and one the target ignores."""
    if request.model != SIM_OPTIMIZER:
        return TriagePolicy()(request)
    edits = [{"op": "replace", "anchor": '- If the ticket mentions "crash" or "error", the category is bug.',
              "text": BUG_RULE, "rationale": "freezes and broken tickets are bugs"},
             {"op": "append", "text": "- Always greet the customer warmly.", "rationale": "tone"}]
    if BUG_RULE in request.last_user:
        edits = []
    return json.dumps({"analysis": "fixed plan", "edits": edits})


def test_training_keeps_only_the_edit_that_helps(tmp_path):
    with ScriptedModelServer(two_edits) as server:
        project = train_project(tmp_path / "p", server.openai_base_url, train={"epochs": 1, "slow_update": False,
                                                                            **LEGACY_TRAIN})
        res = run_cli("train", "--skill", "ticket-triage", "--out", str(tmp_path / "run"), "--quiet", cwd=project)
        assert res.code == 0, res.err
    state = TrainState.load(tmp_path / "run")
    accepted = next(r for r in state.history if r.decision is Decision.ACCEPTED)
    assert accepted.credit is not None and accepted.credit.used == "pruned"
    assert [r.edit.text for r in accepted.credit.removed] == ["- Always greet the customer warmly."]
    best = (tmp_path / "run/best_skill.md").read_text()
    assert BUG_RULE in best and "greet the customer" not in best
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    assert [e["edit"]["text"] for e in summary["accepted_edits"]] == [BUG_RULE]
    assert "kept 1 of 2 edits" in accepted.reason
    assert (project / SKILL).read_text() != best


# ---- credit with confidence (train.credit_confidence) ----------------------------------------

def test_credit_verdict_drops_only_with_confidence():
    assert credit_verdict([0.0, 0.0, 0.0], 0.8) is True  # no task shows any effect
    assert credit_verdict([-0.5, -0.5, -1.0, -0.5], 0.8) is True  # without it is clearly better
    assert credit_verdict([0.5, 1.0, 0.5, 0.5], 0.8) is False  # leaving it out clearly loses
    assert credit_verdict([1.0, -1.0, 0.0, 0.0], 0.8) is None  # one noisy pass decides nothing
    assert credit_verdict([0.5], 0.8) is None and credit_verdict([], 0.8) is None
    mean, lower, upper = one_sided_bounds([1.0, 0.0, 0.0, 0.0], 0.8)
    assert mean == 0.25 and 0 < lower < mean < upper


FOUR = ["a", "b", "c", "d"]


def noisy_scores(text, task_ids, label, round_):
    """The good rule holds tasks a and b. Round 0 is noisy (b fails with the rule and passes
    without it), so the two come out level; the next round shows the loss."""
    calls.append((label, round_, tuple(task_ids)))
    if "good rule" in text:
        full = {"a": 1.0, "b": 0.0 if round_ == 0 else 1.0, "c": 1.0, "d": 1.0}
    else:
        full = {"a": 0.0, "b": 1.0, "c": 1.0, "d": 1.0} if round_ == 0 else {"a": 0.0, "b": 0.0, "c": 1.0, "d": 1.0}
    return {t: full[t] for t in task_ids}


calls: list = []


def test_confident_credit_keeps_a_good_edit_that_one_noisy_pass_would_drop():
    calls.clear()
    incumbent = results({"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.0})
    candidate = results({"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0})
    score_all = lambda text, label: results({"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0})  # noqa: E731
    # Today's rule: one lucky pass without the good rule scores as well as the candidate, so it goes.
    once = attribute_credit(BASE, [USELESS, GOOD], incumbent, candidate, FOUR, EditCaps(),
                            score_tasks=lambda text, ids, label: dict.fromkeys(ids, 1.0), score_all=score_all)
    assert once.kept == [USELESS]
    result = attribute_credit_confident(BASE, [USELESS, GOOD], incumbent, candidate, FOUR, EditCaps(),
                                        confidence=0.8, max_rounds=3, score=noisy_scores, score_all=score_all)
    assert result.kept == [GOOD] and result.used == "pruned"
    good_trial, useless_trial = result.trials
    assert good_trial["rounds"] == 2 and not good_trial["dropped"]
    assert good_trial["reason"].startswith("leaving it out loses (mean difference +0.250")
    assert useless_trial["dropped"] and useless_trial["reason"].startswith("without it validation is not worse")
    # The second round repeats only the tasks where the two disagreed.
    assert ("without-1-r1", 1, ("a", "b")) in calls


def test_confident_credit_keeps_an_undecided_edit_after_the_last_round():
    def mixed(text, task_ids, label, round_):  # with more rules a and c pass, with fewer b does
        more = "good rule" in text and "also good" in text
        return {t: float((t != "b") == more) for t in task_ids}

    result = attribute_credit_confident(BASE, [GOOD, ALSO_GOOD], results({"a": 0.0, "b": 0.0, "c": 0.0}),
                                        results({"a": 1.0, "b": 1.0, "c": 1.0}), IDS, EditCaps(), confidence=0.8,
                                        max_rounds=1, score=mixed, score_all=lambda text, label: [])
    assert result.kept == [GOOD, ALSO_GOOD] and not result.removed and result.used == "full"
    assert all(t["rounds"] == 1 and t["reason"].startswith("not shown useless") for t in result.trials)
