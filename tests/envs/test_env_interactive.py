"""The ``interactive`` environment, the bundled text world and its simulated player, and the
``reward`` scorer.

Unit behaviour runs the environment against a fake model caller (a list of replies, or the text
world's player policy called in-process); one end-to-end test runs ``skillopt-ci eval`` through
the CLI against the scripted server."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from helpers.cli import run_cli
from helpers.interactive import (
    BASE_SKILL,
    SUITE,
    FakeCaller,
    environment,
    request,
    run,
    tasks,
    write_world,
)
from helpers.textworld import TextWorld, play
from helpers.wire import tiny_png
from skillopt_ci.core.errors import InputError, ProviderError
from skillopt_ci.core.task import Task
from skillopt_ci.core.trajectory import Rollout, Step
from skillopt_ci.envs.interactive import parse_action
from skillopt_ci.envs.steps_text import render_transcript
from skillopt_ci.models.base import Usage
from skillopt_ci.scorers import build_scorer
from skillopt_ci.sim import ScriptedModelServer

OPEN_RULE = "Open containers before putting things in them."
MATCHES_RULE = "To light a lamp, carry matches: take them first."
TRAINED_SKILL = BASE_SKILL + f"{OPEN_RULE}\n{MATCHES_RULE}\n"


def score(rollout: Rollout, task: Task, **options):
    scorer = build_scorer({"type": "reward", **options}, SUITE)
    return asyncio.run(scorer.ascore_rollout(rollout, task, None))


# --- parsing rules -------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "rule", "expected"), [
    ("I go.\n<action>go north</action>", "tag", "go north"),
    ("<action>look</action> then <ACTION> take key </ACTION>", "tag", "take key"),
    ("<act>open box</act>", "tag", None),
    ("<action>  </action>", "tag", None),
    ("no tag at all", "tag", None),
    ("I will take it.\n\ntake key\n\n", "last_line", "take key"),
    ("   \n", "last_line", None),
])
def test_parse_action(text, rule, expected):
    assert parse_action(text, rule) == expected


def test_custom_tag_and_last_line_rules_reach_the_world():
    task = tasks("train")[1]  # key and closed box in one room
    tagged = FakeCaller(["<cmd>open box</cmd>", "<cmd>take key</cmd>", "<cmd>put key in box</cmd>"])
    rollout = run(environment(action_tag="cmd"), request(task), tagged)
    assert rollout.done and rollout.reward == 1.0 and rollout.output == "put key in box"
    assert "inside <cmd></cmd>" in tagged.calls[0]["messages"][-1].text
    lines = FakeCaller(["Let me see.\nopen box", "take key", "Now:\nput key in box"])
    rollout = run(environment(action="last_line"), request(task), lines)
    assert rollout.done and [s.text for s in rollout.steps if s.kind == "action"] == [
        "open box", "take key", "put key in box"]


def test_reply_without_an_action_is_told_so_and_counts_as_a_step():
    task = tasks("train")[1]
    caller = FakeCaller(["I am not sure what to do.", "<action>look</action>"])
    rollout = run(environment(max_steps=2), request(task), caller)
    assert not rollout.done and rollout.error is None and rollout.finish_reason == "max_steps"
    second = caller.calls[1]["messages"][-1].text
    assert "Last action: (no action)\nCurrent observation:\nNo action found in your reply. " \
           "Reply with your next action inside <action></action>." in second
    assert [s.text for s in rollout.steps if s.kind == "action"] == ["look"]


# --- the episode -----------------------------------------------------------------------------------


def test_episode_steps_usage_and_transcript():
    task = tasks("train")[1]
    caller = FakeCaller(["<action>open box</action>", "<action>take key</action>", "<action>put key in box</action>"])
    rollout = run(environment(), request(task, sample_index=2), caller)
    assert rollout.ok and rollout.done and rollout.reward == 1.0 and rollout.finish_reason == "done"
    assert [s.kind for s in rollout.steps] == ["observation"] + ["model", "action", "observation"] * 3
    last = rollout.steps[-1]
    assert last.reward == 1.0 and last.done is True and "You put the key in the box." in last.text
    assert rollout.usage == Usage(30, 6) and rollout.cost_usd == pytest.approx(0.003)
    assert rollout.latency_s == pytest.approx(1.5) and not rollout.cached
    env = environment()
    assert all(c["sample_index"] == 2 and c["role"] == "target" and c["context"] == env.identity()
               for c in caller.calls)
    assert env.identity()["type"] == "interactive" and env.identity()["max_steps"] == 30
    assert rollout.transcript.startswith("[task]\n") and "[observation reward=1 done]" in rollout.transcript
    # System message is the skill body; the user message the prompt, the observation, the format.
    system, user = caller.calls[0]["messages"]
    assert system.role == "system" and system.text == "You play text adventures."
    assert user.text.startswith("You are playing a text adventure.") and "Goal: Put the key in the box." in user.text
    assert "Current observation:\nYou are in the hall. You see: a box (closed), a key." in user.text


def test_history_window_shows_the_last_pairs_only():
    task = tasks("train")[1]
    caller = FakeCaller([f"<action>{a}</action>" for a in ("look", "inventory", "dance", "look", "look")])
    run(environment(history=2, max_steps=5), request(task), caller)
    fifth = caller.calls[4]["messages"][-1].text
    view = "You are in the hall. You see: a box (closed), a key. Exits: none. You carry: nothing."
    assert fifth.split("Goal: Put the key in the box.\n\n", 1)[1] == (
        "Earlier steps (the last 2 of 3):\n"
        f"> inventory\nYou carry: nothing.\n{view}\n"
        f"> dance\nNothing happens.\n{view}\n\n"
        f"Last action: look\nCurrent observation:\nYou look around.\n{view}\n\n"
        "Reply with your next action inside <action></action>.")
    none = FakeCaller(["<action>look</action>"] * 3)
    run(environment(history=0, max_steps=3), request(task), none)
    assert "Earlier steps" not in none.calls[2]["messages"][-1].text


def test_messages_are_deterministic_for_the_same_history():
    task = tasks("train")[2]
    first, second = FakeCaller(), FakeCaller()
    run(environment(), request(task, TRAINED_SKILL), first)
    run(environment(), request(task, TRAINED_SKILL), second)
    assert [c["messages"] for c in first.calls] == [c["messages"] for c in second.calls]


def test_max_steps_is_not_an_error():
    task = tasks("train")[1]
    rollout = run(environment(max_steps=3), request(task), FakeCaller(["<action>put key in box</action>"] * 5))
    assert rollout.ok and rollout.done is False and rollout.reward == 0.0 and rollout.finish_reason == "max_steps"
    assert sum(s.kind == "model" for s in rollout.steps) == 3


def test_provider_error_keeps_the_steps():
    task = tasks("train")[1]
    caller = FakeCaller(["<action>open box</action>", ProviderError("server", "HTTP 500 from the model")])
    rollout = run(environment(), request(task), caller)
    assert rollout.error == {"kind": "server", "message": "HTTP 500 from the model"}
    assert [s.kind for s in rollout.steps] == ["observation", "model", "action", "observation", "error"]
    assert rollout.output == "open box" and rollout.usage == Usage(10, 2)


def test_world_raising_in_reset_is_an_errored_rollout_naming_the_task(tmp_path):
    suite = write_world(tmp_path, "class World:\n    closed = 0\n"
                                  "    def reset(self, task):\n        raise RuntimeError('no such map: ' + task['id'])\n"
                                  "    def step(self, action):\n        return 'x', 0.0, False\n")
    env = environment(suite, world="world:World")
    task = tasks("train")[0]
    rollout = run(env, request(task), caller := FakeCaller())
    assert rollout.error == {"kind": "environment", "message":
                             "task 'key-open-box': the world's reset raised RuntimeError: no such map: key-open-box"}
    assert not caller.calls and rollout.reward == 0.0 and rollout.done is False
    assert rollout.steps[-1].kind == "error"


def test_world_raising_in_step_or_returning_garbage_is_an_errored_rollout(tmp_path):
    suite = write_world(tmp_path, "class World:\n    def __init__(self, bad='raise'):\n        self.bad = bad\n"
                                  "    def reset(self, task):\n        return 'start'\n"
                                  "    def step(self, action):\n"
                                  "        if self.bad == 'raise':\n            raise KeyError(action)\n"
                                  "        return 'only two', 1.0\n")
    task = tasks("train")[0]
    rollout = run(environment(suite, world="world:World"), request(task), FakeCaller(["<action>jump</action>"]))
    assert rollout.error["kind"] == "environment"
    assert rollout.error["message"] == "task 'key-open-box': the world's step raised KeyError: 'jump'"
    assert [s.kind for s in rollout.steps] == ["observation", "model", "action", "error"]
    env = environment(suite, world="world:World", world_options={"bad": "shape"})
    rollout = run(env, request(task), FakeCaller(["<action>jump</action>"]))
    assert "step returned ('only two', 1.0); expected (observation: str, reward: number, done: bool)" \
        in rollout.error["message"]


def test_world_close_is_called(tmp_path):
    suite = write_world(tmp_path, "CLOSED = []\nclass World:\n    def reset(self, task):\n        return 'start'\n"
                                  "    def step(self, action):\n        return 'ok', 0.5, True\n"
                                  "    def close(self):\n        CLOSED.append(1)\n        raise OSError('gone')\n")
    env = environment(suite, world="world:World")
    rollout = run(env, request(tasks("train")[0]), FakeCaller(["<action>win</action>"]))
    assert rollout.ok and rollout.done and rollout.reward == 0.5
    assert rollout.steps[-1].text == "the world's close raised OSError: gone"
    assert sys.modules[env.world_class.__module__].CLOSED == [1]


def test_world_constructor_raising_is_an_errored_rollout(tmp_path):
    env = environment(world_options={"colour": "red"})
    rollout = run(env, request(tasks("train")[0]), FakeCaller())
    assert rollout.error["kind"] == "environment"
    assert rollout.error["message"].startswith("task 'key-open-box': the world's constructor raised TypeError: ")
    assert rollout.steps[-1].kind == "error" and rollout.cost_usd is None and rollout.usage == Usage()


def test_cancelled_rollout_closes_the_world_and_lets_the_cancellation_through(tmp_path):
    suite = write_world(tmp_path, "CLOSED = []\nclass World:\n    def reset(self, task):\n        return 'start'\n"
                                  "    def step(self, action):\n        return 'ok', 0.0, False\n"
                                  "    def close(self):\n        CLOSED.append(1)\n")
    env = environment(suite, world="world:World")
    with pytest.raises(asyncio.CancelledError):
        run(env, request(tasks("train")[0]), FakeCaller(["<action>a</action>", asyncio.CancelledError()]))
    assert sys.modules[env.world_class.__module__].CLOSED == [1]


def test_task_images_are_shown_on_every_turn_and_kept_once(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "map.png").write_bytes(tiny_png((0, 128, 0)))  # a real image: its bytes decide the media type
    record = {**tasks("train")[1].fields, "images": ["map.png"]}
    task = Task(id=record["id"], input=record["input"], fields=record)
    req = dataclasses.replace(request(task), suite_dir=suite, image_dir=tmp_path / "run" / "images")
    caller = FakeCaller(["<action>look</action>"] * 2)
    rollout = run(environment(max_steps=2), req, caller)
    for call in caller.calls:
        user = call["messages"][-1]
        assert [i.media_type for i in user.images] == ["image/png"] and "Current observation:" in user.text
    name = rollout.steps[0].images[0]
    assert name.startswith("images/") and (tmp_path / "run" / name).read_bytes().startswith(b"\x89PNG")


def test_transcript_keeps_start_and_end_within_the_limit():
    steps = [Step("observation", f"room {i} " + "x" * 200) for i in range(200)]
    text = render_transcript("Goal: win.", steps, 2_000)
    assert len(text) <= 2_000 and text.startswith("[task]\nGoal: win.\n[observation]\nroom 0 ")
    assert text.rstrip().endswith("x" * 50) and "room 199 " in text
    assert re.search(r"\n… \[\d+ characters of the trajectory cut\] …\n", text)


# --- loading the world -------------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "message"), [
    ({"world": "nowhere:World"}, "option \"world\": no module 'nowhere'"),
    ({"world": "helpers.textworld:Nope"}, "has no class 'Nope' (classes found: "),
    ({"world": "helpers.textworld"}, 'option "world" must be "module:Class"'),
    ({"world": "helpers.textworld:ScriptedRequest"}, "has no reset or step method"),
    ({"max_steps": 0}, '"max_steps" of environment interactive must be at least 1'),
    ({"action": "json"}, "must be one of tag, last_line"),
    ({"action_tag": "<a>"}, "must be a tag name"),
    ({"history": -1}, "must be 0 or more"),
])
def test_bad_options_name_the_suite_file(tmp_path, options, message):
    with pytest.raises(InputError) as info:
        environment(tmp_path, **options)
    assert info.value.where == str(tmp_path / "suite.yaml")
    assert message in info.value.message


def test_world_file_with_an_error_names_the_option(tmp_path):
    suite = write_world(tmp_path, "import json\nraise ValueError('broken world')\n")
    with pytest.raises(InputError, match=r'option "world": importing world.py raised ValueError: broken world'):
        environment(suite, world="world:World")


def test_unknown_option_is_rejected(tmp_path):
    with pytest.raises(InputError, match='unknown option "steps" for environment interactive'):
        environment(tmp_path, steps=3)


# --- the text world and its player ----------------------------------------------------------------


def test_text_world_rules():
    world = TextWorld()
    start = world.reset(tasks("train")[2].fields)
    assert start == "You are in the hall. You see: nothing. Exits: north, east. You carry: nothing."
    assert world.step("dance wildly")[0].startswith("Nothing happens.\n")
    assert world.step("go west")[0].startswith("You cannot go that way.")
    world.step("east")
    assert world.step("take the coin")[0].startswith("You take the coin.")
    world.step("go west")
    world.step("n")
    observation, reward, done = world.step("put coin in chest")
    assert observation.startswith("The chest is closed.") and (reward, done) == (0.0, False)
    assert world.step("put coin in")[0].startswith("Nothing happens.")
    world.step("open chest")
    observation, reward, done = world.step("put the coin into the chest")
    assert (reward, done) == (1.0, True)
    assert observation == ("You put the coin in the chest. You have reached the goal.\n"
                           "You are in the study. You see: a chest (open; holding: coin). Exits: south. "
                           "You carry: nothing.")
    with pytest.raises(ValueError, match="world.rooms must be a non-empty mapping"):
        world.reset({"world": {"rooms": {}}})
    with pytest.raises(ValueError, match="world.goal must be"):
        world.reset({"world": {"rooms": {"hall": {}}, "goal": {"put": "key"}}})


def solved(skill: str, split: str) -> dict[str, bool]:
    env = environment(max_steps=12)
    return {t.id: bool(run(env, request(t, skill), FakeCaller()).done) for t in tasks(split)}


def test_the_player_needs_the_skill_rules():
    for split in ("train", "val", "test"):
        assert all(solved(TRAINED_SKILL, split).values()), split
    base = solved(BASE_SKILL, "val")
    assert base == {"apple-open-basket": True, "ring-closed-box": False, "letter-closed-drawer": False,
                    "lantern-matches-cellar": False, "lamp-matches-carried-room": False, "cup-open-sink": True}
    assert solved(BASE_SKILL + OPEN_RULE + "\n", "val") == {**base, "ring-closed-box": True,
                                                          "letter-closed-drawer": True}


def test_the_player_loops_without_the_rule_and_the_scorer_says_so():
    task = tasks("train")[1]
    rollout = run(environment(max_steps=6), request(task), FakeCaller())
    result = score(rollout, task)
    assert (result.value, result.passed) == (0.0, False)
    assert result.feedback == ('goal not reached: reward 0 after 6 turns; last action "put key in box" '
                               '(repeated 5 times) got "The box is closed."')


# --- the reward scorer -------------------------------------------------------------------------------


def test_reward_scorer_values():
    task = tasks("train")[0]
    done = Rollout("put key in box", steps=(Step("model", "x"),), reward=1.0, done=True)
    assert score(done, task).to_dict() | {"usage": None} == {
        "value": 1.0, "passed": True, "feedback": "goal reached: reward 1 in 1 turn", "usage": None, "errors": 0}
    big = Rollout("x", reward=3.0, done=True)
    assert (score(big, task).value, score(big, task).passed) == (1.0, True)
    half = Rollout("x", reward=0.5, done=True)
    assert (score(half, task).value, score(half, task).passed) == (0.5, False)
    assert score(half, task, threshold=0.5).passed
    negative = Rollout("x", reward=-2.0, done=False)
    assert score(negative, task).value == 0.0


def test_reward_scorer_needs_an_environment_with_a_reward():
    task = tasks("train")[0]
    with pytest.raises(InputError, match='scorer "reward": needs an environment that gives a reward'):
        build_scorer({"type": "reward"}, SUITE).score("an answer", task)
    with pytest.raises(InputError, match="needs an environment that gives a reward"):
        score(Rollout("chat output"), task)


# --- end to end --------------------------------------------------------------------------------------


def test_eval_runs_the_interactive_suite_through_the_cli(tmp_path):
    root = tmp_path / "proj"
    shutil.copytree(SUITE, root / "eval_suites" / "textworld")
    (root / "skills" / "text-adventurer").mkdir(parents=True)
    (root / "skills" / "text-adventurer" / "SKILL.md").write_text(BASE_SKILL + OPEN_RULE + "\n")
    with ScriptedModelServer(play) as server:
        config = {
            "version": 1,
            "models": {"target": {"provider": "openai-compatible", "model": "sim-player-1",
                                  "base_url": server.openai_base_url, "params": {"temperature": 0}}},
            "skills": [{"path": "skills/text-adventurer/SKILL.md", "suite": "eval_suites/textworld"}],
            "cache": {"mode": "read-write", "path": ".skillopt/cache.sqlite"},
        }
        (root / "skillopt.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        out = root / "run"
        res = run_cli("eval", "text-adventurer", "--out", str(out), "--quiet", cwd=root)
        assert res.code == 0, res.err
        calls = server.call_count
        assert calls > 6
        # With the container rule but not the matches rule: the two put-in-closed tasks and the
        # two open ones pass, the two lamps do not.
        results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        assert {r["task_id"]: r["passed"] for r in results} == {
            "apple-open-basket": True, "ring-closed-box": True, "letter-closed-drawer": True,
            "lantern-matches-cellar": False, "lamp-matches-carried-room": False, "cup-open-sink": True}
        lamp = next(r for r in results if r["task_id"] == "lantern-matches-cellar")
        assert lamp["reward"] == 0.0 and "You have nothing to light the lantern with." in lamp["transcript"]
        assert any(s["kind"] == "action" for s in lamp["trajectory"])
        summary = json.loads((out / "summary.json").read_text())
        assert summary["mean"] == pytest.approx(4 / 6, abs=1e-3)
        # The cache replays whole episodes: a second run makes no model call.
        again = run_cli("eval", "text-adventurer", "--out", str(tmp_path / "again"), "--quiet", cwd=root)
        assert again.code == 0, again.err
        assert server.call_count == calls


# --- time limits: a world that never answers ----------------------------------------------------

HANGING_WORLD = """import threading
FOREVER = threading.Event()
CLOSED = []
class World:
    def __init__(self, hang_in='step'):
        self.hang_in = hang_in
    def reset(self, task):
        if self.hang_in == 'reset':
            FOREVER.wait()
        return 'start'
    def step(self, action):
        if self.hang_in == 'step':
            FOREVER.wait()
        return 'nothing happens', 0.0, False
    def close(self):
        CLOSED.append(1)
"""


@pytest.mark.parametrize("hang_in", ["reset", "step"])
def test_a_world_call_that_never_returns_is_abandoned_at_the_step_limit(tmp_path, hang_in):
    suite = write_world(tmp_path, HANGING_WORLD)
    env = environment(suite, world="world:World", world_options={"hang_in": hang_in}, step_timeout_s=0.2)
    rollout = run(env, request(tasks("train")[0]), FakeCaller(["<action>wait</action>"]))
    assert rollout.error == {"kind": "time_limit", "message": f"task 'key-open-box': the world's {hang_in} did not "
                             "return within 0.2 s (step_timeout_s = 0.2 s); the world was abandoned"}
    assert rollout.steps[-1].text == f"the world's close was not called: its {hang_in} had not returned"
    module = sys.modules[env.world_class.__module__]
    assert module.CLOSED == []
    module.FOREVER.set()  # let the abandoned thread end


def test_an_episode_that_outlasts_its_time_limit_is_an_errored_rollout(tmp_path):
    suite = write_world(tmp_path, HANGING_WORLD)
    env = environment(suite, world="world:World", world_options={"hang_in": "none"}, time_limit_s=0.3)

    class SlowCaller(FakeCaller):
        async def complete(self, *args, **kwargs):
            await asyncio.sleep(0.05)
            return await super().complete(*args, **kwargs)

    rollout = run(env, request(tasks("train")[0]), SlowCaller(["<action>wait</action>"] * 1000))
    assert rollout.error == {"kind": "time_limit", "message":
                             "task 'key-open-box': the episode did not finish within time_limit_s = 0.3 s"}
    assert sys.modules[env.world_class.__module__].CLOSED == [1]  # a world that answers is still closed


def test_an_eval_whose_world_never_returns_ends_with_the_rollouts_errored(tmp_path):
    """The whole command, in a process of its own: it exits (the abandoned thread does not keep it
    alive) and says why the rollouts errored."""
    project = tmp_path / "p"
    shutil.copytree(SUITE, project / "eval_suites/textworld")
    suite_yaml = project / "eval_suites/textworld/suite.yaml"
    (project / "eval_suites/textworld/world.py").write_text(HANGING_WORLD)
    data = yaml.safe_load(suite_yaml.read_text())
    data["environment"] = {**data["environment"], "world": "world:World", "step_timeout_s": 0.2}
    suite_yaml.write_text(yaml.safe_dump(data))
    (project / "skills/textworld").mkdir(parents=True)
    (project / "skills/textworld/SKILL.md").write_text(BASE_SKILL)
    with ScriptedModelServer(lambda request: "<action>wait</action>") as server:
        (project / "skillopt.yml").write_text(yaml.safe_dump({
            "version": 1, "skills": [{"path": "skills/textworld/SKILL.md", "suite": "eval_suites/textworld"}],
            "models": {"target": {"provider": "openai-compatible", "model": "m", "base_url": server.openai_base_url}},
            "cache": {"mode": "off"}}))
        done = subprocess.run([sys.executable, "-m", "skillopt_ci", "eval", "text-adventurer", "--out", str(tmp_path / "run"),
                               "--quiet"], cwd=project, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "OPENAI_API_KEY": "k"})
    assert done.returncode == 3, done.stderr
    results = [json.loads(line) for line in (tmp_path / "run/results.jsonl").read_text().splitlines()]
    assert results and all(r["error"]["kind"] == "time_limit" for r in results)
    assert "did not return within 0.2 s" in results[0]["error"]["message"]
