"""ALFWorld's ``variant: reference``: the action read from a reply as the method reads it.

The expected actions below were derived by hand from the method's source: its rollout loop
(``skillopt/envs/alfworld/rollout.py``: the reply is stripped; an empty one, or one where
``re.search(r"<action>(.*?)</action>", reply, re.DOTALL)`` finds nothing, becomes
``<think>…</think><action>look</action>``) and then ``alfworld_projection`` (the reply is
lowercased; the action is ``reply[find("<action>") + 8 : find("</action>")].strip()``; a missing
``<think>`` or a character in U+4E00–U+9FFF only clears ``is_action_valid``, which nothing
reads). ``None`` in the ``strict`` column: our default refuses the reply (not sent to the game)."""

from __future__ import annotations

import asyncio

import pytest

from skillopt_ci.benchmarks.packs.alfworld import fixture
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.skill import parse_skill
from skillopt_ci.core.task import Task
from skillopt_ci.envs.alfworld import PROMPT, environment
from skillopt_ci.envs.base import RolloutRequest
from skillopt_ci.envs.registry import build_environment
from skillopt_ci.envs.reply_action import read_action, reference_action
from skillopt_ci.models.base import Completion, Usage

# (reply, the method's action, ours by default)
CASES = [
    ("<think>Counter first.</think><action>Go To Countertop 1</action>", "go to countertop 1", "go to countertop 1"),
    ("<action>go to fridge 1</action>", "go to fridge 1", None),  # no <think>: only flagged by the method
    ("<think>先去柜台</think><action>go to countertop 1</action>", "go to countertop 1", None),  # CJK: flagged
    ("<think>안녕</think><action>look</action>", "look", None),  # Hangul: outside the method's CJK range
    ("I will go to the fridge.", "look", None),  # no tags at all: the rollout's fallback, not the last 30 chars
    ("", "look", None),
    ("   \n ", "look", None),
    ("<think>t</think><action>open fridge 1</action> then <action>go to desk 1</action>",
     "open fridge 1", "go to desk 1"),  # the method takes the first, ours the last
    ("<think>t</think><ACTION>take apple 1</ACTION> <action>look</action>",
     "take apple 1", "look"),  # the lower-case pair passes the check; the lowered reply's first tag wins
    ("<think>t</think><ACTION>take apple 1 from desk 1</ACTION>",
     "look", "take apple 1 from desk 1"),  # the method's check is case-sensitive
    ("<think>t</think></action><action>go to desk 1</action>", "", "go to desk 1"),  # first </action> first
    ("<think>t</think><action>\n  Go to Desk 1 \n</action>", "go to desk 1", "go to desk 1"),
    ("<THINK>t</THINK><action>look</action>", "look", "look"),
    ("<think>t</think><action></action>", "", None),  # an empty action is still sent by the method
]
STRICT = {"rule": "tag", "tag": "action", "require_tags": ("think",), "reject_cjk": True, "lowercase": True}


@pytest.mark.parametrize(("reply", "method", "ours"), CASES)
def test_reference_reads_the_action_as_the_method_and_strict_as_before(reply, method, ours):
    assert reference_action(reply) == method
    assert read_action(reply, variant="reference", **STRICT) == (method, "")
    action, problem = read_action(reply, variant="strict", **STRICT)
    assert action == ours and (problem == "") == (ours is not None)


class Replies:
    def __init__(self, replies: list[str]):
        self.replies = replies
        self.seen: list[str] = []

    async def complete(self, role, messages, sample_index=0, *, tools=(), context=None):
        self.seen.append(messages[-1].text)
        return Completion(self.replies.pop(0) if self.replies else "<think>t</think><action>look</action>",
                          usage=Usage(1, 1), latency_s=0.0)


def episode(tmp_path, monkeypatch, replies: list[str], variant: str):
    data = fixture.write_fixture(tmp_path / "alfworld_data")
    monkeypatch.setenv("ALFWORLD_DATA", str(data))
    gamefile = fixture.load_manifest("alfworld").splits["val"][0].fields["gamefile"]
    env = build_environment({**environment(variant=variant), "max_steps": len(replies)}, data)
    task = Task("val:0000", gamefile, fields={"id": "val:0000", "gamefile": gamefile})
    request = RolloutRequest(skill=parse_skill("---\nname: a\ndescription: b\n---\nbody\n"), task=task,
                             prompt=PROMPT, suite_dir=data)
    caller = Replies(list(replies))
    return asyncio.run(env.run(request, caller)), caller, env


REPLIES = ["<think>先去柜台</think><action>go to countertop 1</action>",  # sent by reference only
           "<action>Examine Countertop 1</action>",  # sent by reference only
           "Nothing to say."]  # reference sends look


def test_an_episode_with_reference_sends_every_reply_to_the_game(tmp_path, monkeypatch):
    rollout, caller, env = episode(tmp_path, monkeypatch, REPLIES, "reference")
    assert [s.text for s in rollout.steps if s.kind == "action"] == [
        "go to countertop 1", "examine countertop 1", "look"]
    observations = [s.text for s in rollout.steps if s.kind == "observation"]
    assert observations[1].startswith("You arrive at countertop 1.")
    assert "Action 1: go to countertop 1" in caller.seen[2] and "Action 2: examine countertop 1" in caller.seen[2]
    assert env.identity()["variant"] == "reference"  # its own run identity and cache entries


def test_an_episode_with_the_default_refuses_them(tmp_path, monkeypatch):
    rollout, caller, env = episode(tmp_path, monkeypatch, REPLIES, "strict")
    assert [s.text for s in rollout.steps if s.kind == "action"] == []
    assert "Current observation: Your reply contains CJK characters." in caller.seen[1]
    assert "Current observation: Your reply has no <think></think> part." in caller.seen[2]
    assert "variant" not in env.identity()  # the default leaves the run identity of existing suites as it was


@pytest.mark.parametrize(("options", "message"), [
    ({"variant": "official"}, 'option "variant" of environment interactive must be one of strict, reference'),
    ({"variant": "reference", "action": "last_line"}, 'option "variant" reference reads <action> as the method'),
    ({"variant": "reference", "action_tag": "act"}, "(got 'tag' and 'act')"),
])
def test_a_bad_variant_is_exit_2_naming_the_option(tmp_path, options, message):
    with pytest.raises(InputError) as caught:
        build_environment({**environment(), **options}, tmp_path)
    assert message in str(caught.value) and str(caught.value.where).endswith("suite.yaml")
