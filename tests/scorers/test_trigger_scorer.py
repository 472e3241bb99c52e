"""The trigger scorer and the checks that keep trigger tasks from running where they cannot."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.records import Consult
from skillopt_ci.core.task import Task
from skillopt_ci.core.trajectory import Rollout
from skillopt_ci.scorers import build_scorer
from skillopt_ci.scorers.trigger import trigger_problem


def task(should: object = None, tid: str = "t1") -> Task:
    fields = {"id": tid, "input": "x"} | ({} if should is None else {"should_trigger": should})
    return Task(tid, "x", fields=fields, source="val.jsonl:3")


@pytest.mark.parametrize("should, consulted, passed, says", [
    (True, True, True, "used the skill"),
    (False, False, True, "left the skill alone"),
    (True, False, False, "did not use the skill"),
    (False, True, False, "not for"),
])
def test_a_rollout_passes_when_it_consulted_the_skill_exactly_when_it_should(should, consulted, passed, says):
    scorer = build_scorer("trigger", ".")
    score = asyncio.run(scorer.ascore_rollout(Rollout(output="", consult=Consult(consulted)), task(should)))
    assert score.passed is passed and score.value == float(passed) and says in score.feedback


def test_a_rollout_that_cannot_say_or_a_task_without_the_field_is_a_suite_error():
    scorer = build_scorer("trigger", ".")
    with pytest.raises(InputError, match="codex, claude-code") as info:
        asyncio.run(scorer.ascore_rollout(Rollout(output=""), task(True)))
    assert info.value.where == "val.jsonl:3"
    with pytest.raises(InputError, match='has no "should_trigger"'):
        asyncio.run(scorer.ascore_rollout(Rollout(output="", consult=Consult(True)), task()))


def suite(tasks: list[Task], scorer: str) -> SimpleNamespace:  # the Suite fields trigger_problem reads
    return SimpleNamespace(splits={"val": tuple(tasks)}, scorer={"type": scorer})


def test_trigger_problems_are_found_before_anything_runs():
    both = [task(True, "a"), task(False, "b")]
    assert trigger_problem(suite(both, "exact"), "claude-code", True) is None
    assert "environment 'chat' does not" in trigger_problem(suite(both, "exact"), "chat", False)
    assert "environment 'chat' does not" in trigger_problem(suite([task()], "trigger"), "chat", False)
    missing = trigger_problem(suite([*both, task(None, "c")], "trigger"), "codex", True)
    assert missing == ('scorer "trigger" needs "should_trigger": true or false on every task; 1 have none '
                       "(first: 'c' at val.jsonl:3)")
    assert trigger_problem(suite([task()], "exact"), "chat", False) is None  # no trigger task: nothing to say
