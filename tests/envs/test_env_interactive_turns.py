"""The ``interactive`` options added for benchmark prompts (``turn_prompt``, ``skill_heading``,
``require_tags``, ``reject_cjk``, ``lowercase``), the optional world methods
``admissible_actions()`` and ``objective()``, and the task files a world gets: the defaults keep
the original layout and run identity."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.skill import parse_skill
from skillopt_ci.core.task import Task
from skillopt_ci.envs.base import RolloutRequest
from skillopt_ci.envs.registry import build_environment
from skillopt_ci.envs.turn_prompt import reply_problem
from skillopt_ci.models.base import Completion, Usage

SKILL = parse_skill("---\nname: s\ndescription: d\n---\nAlways look first.\n")

WORLD = '''
class Counter:
    """Counts to 2: "add" adds one; admits "add" and "help"; states its goal."""
    def reset(self, task):
        self.n = 0
        self.task = task
        return "The count is 0."
    def step(self, action):
        if action == "add":
            self.n += 1
        return f"The count is {self.n}.", float(self.n == 2), self.n == 2
    def admissible_actions(self):
        return ["add", "help"]
    def objective(self):
        return "reach two"

class Reader(Counter):
    """Says what its task file holds."""
    def reset(self, task):
        super().reset(task)
        return open(task["file_paths"]["notes.txt"]).read()

class Missing(Counter):
    def reset(self, task):
        from skillopt_ci.core.errors import InputError
        raise InputError("the data folder is not set")
'''


class Caller:
    def __init__(self, replies):
        self.replies = list(replies)
        self.calls = []

    async def complete(self, role, messages, sample_index=0, *, tools=(), context=None):
        self.calls.append(messages)
        return Completion(self.replies.pop(0) if self.replies else "<action>look</action>", usage=Usage(1, 1))


@pytest.fixture
def suite(tmp_path) -> Path:
    (tmp_path / "world.py").write_text(WORLD)
    (tmp_path / "notes.txt").write_text("The notes say hello.")
    return tmp_path


def env(suite: Path, world: str = "Counter", **options):
    return build_environment({"type": "interactive", "world": f"world:{world}", **options}, suite,
                             where=str(suite / "suite.yaml"))


def run(environment, suite: Path, replies, fields=None):
    task = Task("t1", "count", fields=fields or {"id": "t1", "input": "count"})
    request = RolloutRequest(skill=SKILL, task=task, prompt="Count to two.", suite_dir=suite)
    caller = Caller(replies)
    return asyncio.run(environment.run(request, caller)), caller


def test_defaults_keep_the_identity_and_the_layout_and_add_the_admissible_actions(suite):
    environment = env(suite)
    assert set(environment.identity()) == {"type", "world", "world_options", "max_steps", "history", "action",
                                           "action_tag"}
    rollout, caller = run(environment, suite, ["<action>add</action>", "<action>add</action>"])
    assert rollout.done and rollout.reward == 1.0
    system, user = caller.calls[0]
    assert system.text == "Always look first."
    assert user.text == ("Count to two.\n\nCurrent observation:\nThe count is 0.\n\nAdmissible actions:\nadd\nhelp"
                         "\n\nReply with your next action inside <action></action>.")
    assert env(suite, lowercase=True).identity()["lowercase"] is True  # a set option is part of the identity


def test_a_turn_prompt_and_a_skill_heading_make_the_whole_message(suite):
    template = ("{{ prompt }} Goal: {{ objective }}. Step {{ step }} of {{ max_steps }}.\n{{ history }}\n"
                "Now: {{ observation }}\nChoose from:\n{{ admissible }}\n{{ instruction }}")
    environment = env(suite, turn_prompt=template, skill_heading="## Skill Knowledge", history=1)
    _, caller = run(environment, suite, ["<action>add</action>", "<action>ADD</action>", "<action>add</action>"])
    first = caller.calls[0]
    assert [m.role for m in first] == ["user"]
    assert first[0].text == ("Count to two. Goal: reach two. Step 0 of 30.\nnone\nNow: The count is 0.\n"
                             "Choose from:\nadd\nhelp\nReply with your next action inside <action></action>."
                             "\n\n## Skill Knowledge\nAlways look first.")
    third = caller.calls[2][0].text
    # history 1: only the last (observation, action) pair; without lowercase "ADD" reached the world as is
    assert "Step 2 of 30.\nObservation 2: The count is 1.\nAction 2: ADD\nNow: The count is 1." in third
    assert "Observation 1" not in third


def test_required_tags_cjk_and_lowercase_decide_what_reaches_the_world(suite):
    environment = env(suite, require_tags=["think"], reject_cjk=True, lowercase=True)
    rollout, caller = run(environment, suite, ["<action>add</action>", "<think>加一</think><action>add</action>",
                                               "<think>one</think><action>ADD</action>",
                                               "<THINK>two</THINK><action>Add</action>"])
    assert [s.text for s in rollout.steps if s.kind == "action"] == ["add", "add"] and rollout.done
    second = caller.calls[1][-1].text
    assert ("Current observation:\nYour reply has no <think></think> part. Write <think></think> first, then reply "
            "with your next action inside <action></action>. Use no Chinese, Japanese or Korean characters.") in second
    assert "Your reply contains CJK characters." in caller.calls[2][-1].text


@pytest.mark.parametrize(("text", "problem"), [
    ("<think>x</think><action>a</action>", None),
    ("<think></think><action>a</action>", None),
    ("<action>a</action>", "no <think></think> part"),
    ("<think>x</think><action>ｇｏ</action>", "CJK"),  # full-width forms
    ("<think>x</think><action>가</action>", "CJK"),
    ("<think>x</think><action>カ</action>", "CJK"),
])
def test_reply_problem(text, problem):
    found = reply_problem(text, ("think",), True)
    assert (found is None) if problem is None else (problem in found)


def test_bad_options_are_input_errors_naming_the_option(suite):
    with pytest.raises(InputError, match='option "turn_prompt" .* unknown placeholder.*input'):
        env(suite, turn_prompt="{{ input }} {{ observation }}")
    with pytest.raises(InputError, match='option "require_tags" .* got \'<think>\''):
        env(suite, require_tags=["<think>"])


def test_a_world_gets_its_task_files_and_its_input_error_stops_the_run(suite):
    rollout, _ = run(env(suite, "Reader", max_steps=1), suite, [],
                     fields={"id": "t1", "input": "count", "files": ["notes.txt"]})
    assert rollout.steps[0].text == "The notes say hello."
    with pytest.raises(InputError, match="the data folder is not set"):
        run(env(suite, "Missing"), suite, [])
