"""ALFWorld: the importer (published path manifest + an ALFWORLD_DATA folder), the world over the
game files, the reference system's per-step prompt, and the score (won within 50 steps).

These tests run the bundled ALFWorld-format world on the fixture's games (written by
``skillopt_ci.sim.benchdata.alfworld``); ``test_bench_alfworld_real.py`` runs the real
``alfworld`` package on small hand-written PDDL games when it is installed."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
import yaml

from helpers.cli import run_cli
from skillopt_ci.benchmarks.manifest import load_manifest
from skillopt_ci.benchmarks.packs.alfworld import fixture
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.skill import parse_skill
from skillopt_ci.core.task import Task
from skillopt_ci.envs.alfworld import PROMPT, AlfworldWorld, environment
from skillopt_ci.envs.alfworld_text import WELCOME, AlfredTextWorld
from skillopt_ci.envs.base import RolloutRequest
from skillopt_ci.envs.registry import build_environment
from skillopt_ci.models.base import Completion, Usage
from skillopt_ci.scorers import build_scorer
from skillopt_ci.sim import ScriptedModelServer

SKILL = "---\nname: household\ndescription: Does household tasks.\n---\nLook in closed places too.\n"
TRAINED = SKILL + fixture.SKILL_RULE + "\n"
# The first game of three task types in each split of the published manifest.
SMALL = {"train": [0, 5, 12], "val": [0, 3, 6], "test": [0, 18, 42]}


def small_manifest(folder: Path) -> Path:
    """A manifest folder holding a few published entries, byte for byte the same fields."""
    published = load_manifest("alfworld")
    (folder).mkdir(parents=True)
    (folder / "split_manifest.json").write_text(json.dumps(dict(published.meta)))
    for split, picks in SMALL.items():
        (folder / split).mkdir()
        items = [dict(published.splits[split][i].fields) for i in picks]
        (folder / split / "items.json").write_text(json.dumps(items, indent=1))
    return folder


def task_of(gamefile: str, task_id: str = "val:0000") -> Task:
    record = {"id": task_id, "input": gamefile, "gamefile": gamefile}
    return Task(task_id, gamefile, fields=record)


class Caller:
    """A ModelCaller answering from ``replies`` (then with the fixture's player)."""

    def __init__(self, replies: list[str] | None = None):
        self.replies = list(replies or [])
        self.calls: list[list] = []

    async def complete(self, role, messages, sample_index=0, *, tools=(), context=None):
        self.calls.append(messages)
        user = messages[-1].text
        text = self.replies.pop(0) if self.replies else fixture.reply(user, user.partition("## Skill Knowledge")[2])
        return Completion(text, usage=Usage(10, 2), latency_s=0.1)


@pytest.fixture
def data(tmp_path, monkeypatch):
    folder = fixture.write_fixture(tmp_path / "alfworld_data")
    monkeypatch.setenv("ALFWORLD_DATA", str(folder))
    return folder


def run_episode(data: Path, gamefile: str, caller: Caller, skill: str = SKILL, **options):
    env = build_environment({**environment(), **options}, data)
    request = RolloutRequest(skill=parse_skill(skill), task=task_of(gamefile), prompt=PROMPT, suite_dir=data)
    rollout = asyncio.run(env.run(request, caller))
    scored = asyncio.run(build_scorer({"type": "reward", "threshold": 1.0}, data).ascore_rollout(
        rollout, task_of(gamefile), None))
    return rollout, scored


def gamefile(split: str, index: int) -> str:
    return load_manifest("alfworld").splits[split][index].fields["gamefile"]


# --- import ------------------------------------------------------------------------------------------


def test_import_covers_the_published_manifest_and_validates_with_its_sizes(tmp_path, data):
    root = tmp_path / "proj"
    result = run_cli("bench", "import", "alfworld", "--from", str(data), "--out", str(root / "eval_suites" / "alfworld"))
    assert result.code == 0, result.err
    assert "39 train / 18 val / 134 test" in result.out and "191 file(s) referenced" in result.out
    suite_dir = root / "eval_suites" / "alfworld"
    doc = yaml.safe_load((suite_dir / "suite.yaml").read_text())
    assert doc["assets"] == {"alfworld": "${ALFWORLD_DATA}"}  # --from is the folder the variable names
    assert doc["environment"]["max_steps"] == 50 and doc["scorer"] == {"type": "reward", "threshold": 1.0}
    first = json.loads((suite_dir / "train.jsonl").read_text().splitlines()[0])
    published = load_manifest("alfworld").splits["train"][0]
    assert first["id"] == "train:0000" and first["gamefile"] == published.fields["gamefile"]
    assert first["task_type"] == "look_at_obj_in_light" and first["files"] == ["@alfworld/" + first["gamefile"]]
    (root / "skills" / "household").mkdir(parents=True)
    (root / "skills" / "household" / "SKILL.md").write_text(SKILL)
    config = {"version": 1, "models": {"target": {"provider": "openai-compatible", "model": "m",
                                                  "base_url": "http://127.0.0.1:9/v1"}},
              "skills": [{"path": "skills/household/SKILL.md", "suite": "eval_suites/alfworld"}]}
    (root / "skillopt.yml").write_text(yaml.safe_dump(config))
    checked = run_cli("validate", cwd=root)
    assert checked.code == 0, checked.out + checked.err


def test_the_suite_names_an_absolute_root_when_from_is_another_folder(tmp_path, data, monkeypatch):
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "elsewhere"))
    out = tmp_path / "suite"
    assert run_cli("bench", "import", "alfworld", "--from", str(data), "--out", str(out)).code == 0
    assert yaml.safe_load((out / "suite.yaml").read_text())["assets"] == {"alfworld": str(data.resolve())}


def test_a_missing_game_file_is_exit_2_naming_the_id_and_path(tmp_path, data):
    missing = data / gamefile("val", 3)
    missing.unlink()
    out = tmp_path / "suite"
    result = run_cli("bench", "import", "alfworld", "--from", str(data), "--out", str(out))
    assert result.code == 2
    assert f"game file of 'val:0003' (val split) not found: {missing}" in result.err
    assert not out.exists()


# --- the world -----------------------------------------------------------------------------------------


def test_the_bundled_world_speaks_alfworld_format():
    layout = fixture.layout_for("pick_clean_then_place_in_recep-Apple-None-Fridge-3", "")
    world = AlfredTextWorld(layout)
    first = world.reset()
    assert first.startswith(WELCOME + "\n\nYou are in the middle of a room. Looking quickly around you, you see a ")
    assert first.endswith("\n\nYour task is to: put a clean apple in fridge.")
    assert world.step("go to cabinet 1") == ("You arrive at cabinet 1. The cabinet 1 is closed.", False)
    assert world.step("open cabinet 1")[0] == "You open the cabinet 1. The cabinet 1 is open. In it, you see nothing."
    assert world.step("take apple 1 from cabinet 1")[0] == "Nothing happens."
    assert "help" in world.admissible_commands() and "close cabinet 1" in world.admissible_commands()


def test_the_world_pins_the_task_game_and_drops_help(data):
    world = AlfworldWorld()
    first = world.reset(task_of(gamefile("val", 0)).fields)
    assert first.startswith(WELCOME) and world.objective() == "look at alarmclock under the desklamp."
    assert "help" not in world.admissible_actions() and "look" in world.admissible_actions()
    observation, reward, done = world.step("go to sidetable 1")
    assert observation.startswith("You arrive at sidetable 1. On the sidetable 1, you see a ") and reward == 0.0
    assert not done


def test_an_unset_data_folder_or_a_missing_game_is_one_clear_error(data, monkeypatch):
    monkeypatch.delenv("ALFWORLD_DATA")
    with pytest.raises(InputError, match="environment variable ALFWORLD_DATA is not set"):
        AlfworldWorld().reset(task_of(gamefile("val", 0)).fields)
    with pytest.raises(InputError, match="game file json_2.1.1/valid_seen/nope/game.tw-pddl not found under"):
        AlfworldWorld(str(data)).reset(task_of("json_2.1.1/valid_seen/nope/game.tw-pddl").fields)


def test_a_real_game_without_the_alfworld_package_names_the_extra(tmp_path, monkeypatch):
    game = tmp_path / "json_2.1.1" / "train" / "t" / "game.tw-pddl"
    game.parent.mkdir(parents=True)
    game.write_text(json.dumps({"pddl_domain": "", "grammar": "", "pddl_problem": "", "solvable": True}))
    monkeypatch.setitem(sys.modules, "alfworld", None)  # as if not installed
    with pytest.raises(InputError) as err:
        AlfworldWorld(str(tmp_path)).reset(task_of("json_2.1.1/train/t/game.tw-pddl").fields)
    assert "needs the alfworld package" in err.value.message and "skillopt-ci[alfworld]" in err.value.hint


# --- the per-step prompt and the action rules ---------------------------------------------------------------


def test_a_cjk_reply_or_a_missing_think_tag_is_not_an_action(data):
    caller = Caller(["<think>先去柜台</think><action>go to countertop 1</action>",
                     "<action>go to countertop 1</action>",
                     "<think>Look on the counter.</think>\n<action>Go To Countertop 1</action>"])
    rollout, _ = run_episode(data, gamefile("val", 0), caller, max_steps=3)
    assert [s.text for s in rollout.steps if s.kind == "action"] == ["go to countertop 1"]  # lowercased
    second, third = caller.calls[1][-1].text, caller.calls[2][-1].text
    assert "Current observation: Your reply contains CJK characters. Write <think></think> first" in second
    assert "Current observation: Your reply has no <think></think> part." in third
    assert "Action 1: (no valid action)" in third and "Action 2: (no valid action)" in third
    assert rollout.steps[-1].text.startswith("You arrive at countertop 1.")


def test_won_within_the_steps_scores_1_and_running_out_scores_0(data):
    clean = gamefile("val", 6)  # pick_clean_then_place_in_recep
    won, score = run_episode(data, clean, Caller(), skill=TRAINED)
    assert won.done and won.reward == 1.0 and score.value == 1.0 and score.passed
    assert won.steps[-1].text.startswith("You move the ")
    lost, score = run_episode(data, clean, Caller())  # without the rule the apple is never cleaned
    assert not lost.done and lost.finish_reason == "max_steps"
    assert sum(s.kind == "model" for s in lost.steps) == 50
    assert score.value == 0.0 and not score.passed and "goal not reached" in score.feedback


def test_an_episode_through_the_openai_sdk_shows_the_reference_prompt(tmp_path, data):
    root = tmp_path / "proj"
    manifest = small_manifest(tmp_path / "manifest")
    imported = run_cli("bench", "import", "alfworld", "--from", str(data), "--manifest", str(manifest),
                       "--out", str(root / "eval_suites" / "alfworld"))
    assert imported.code == 0, imported.err
    (root / "skills" / "household").mkdir(parents=True)
    (root / "skills" / "household" / "SKILL.md").write_text(SKILL)
    with ScriptedModelServer(fixture.policy) as server:
        config = {"version": 1,
                  "models": {"target": {"provider": "openai-compatible", "model": "sim-household-1",
                                        "base_url": server.openai_base_url, "params": {"temperature": 0}}},
                  "skills": [{"path": "skills/household/SKILL.md", "suite": "eval_suites/alfworld"}],
                  "cache": {"mode": "off"}}
        (root / "skillopt.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        out = root / "run"
        result = run_cli("eval", "household", "--split", "val", "--out", str(out), "--quiet", cwd=root)
        assert result.code == 0, result.err
        calls = server.calls
    results = {r["task_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    # The light and the simple game are won; the clean one runs out of steps without the rule.
    assert {k: r["passed"] for k, r in results.items()} == {"val:0000": True, "val:0003": True, "val:0006": False}
    first = next(c.request for c in calls if "look at alarmclock" in c.request.last_user)
    assert first.system == "" and [m["role"] for m in first.messages] == ["user"]
    text = first.last_user
    assert text.startswith(PROMPT + "\nYour task is to: look at alarmclock under the desklamp.\n"
                                    "You have taken 0 step(s) so far (at most 50).")
    assert "\nnone\n\nCurrent observation: -= Welcome to TextWorld, ALFRED! =-" in text
    admissible = text.split("Admissible actions now:\n")[1].split("\n\n")[0].splitlines()
    assert "look" in admissible and "go to countertop 1" in admissible and "help" not in admissible
    assert "Write <think></think> first, then reply with your next action inside <action></action>." in text
    assert text.endswith("\n\n## Skill Knowledge\nLook in closed places too.")
    later = [c.request.last_user for c in calls if "look at alarmclock" in c.request.last_user][3]
    assert "You have taken 3 step(s)" in later and "Observation 2: " in later and "Action 3: " in later
    assert "Observation 1: " not in later


def _imported_project(tmp_path: Path, data: Path, base_url: str) -> Path:
    root = tmp_path / "proj"
    imported = run_cli("bench", "import", "alfworld", "--from", str(data), "--manifest",
                       str(small_manifest(tmp_path / "manifest")), "--out", str(root / "eval_suites" / "alfworld"))
    assert imported.code == 0, imported.err
    (root / "skills" / "household").mkdir(parents=True)
    (root / "skills" / "household" / "SKILL.md").write_text(SKILL)
    config = {"version": 1, "models": {"target": {"provider": "openai-compatible", "model": "sim-household-1",
                                                  "base_url": base_url}},
              "skills": [{"path": "skills/household/SKILL.md", "suite": "eval_suites/alfworld"}],
              "cache": {"mode": "off"}}
    (root / "skillopt.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root


def test_eval_without_the_data_or_the_package_is_exit_2_with_one_line(tmp_path, data, monkeypatch):
    with ScriptedModelServer(fixture.policy) as server:
        root = _imported_project(tmp_path, data, server.openai_base_url)
        monkeypatch.delenv("ALFWORLD_DATA")
        unset = run_cli("eval", "household", "--split", "val", "--out", str(root / "r1"), "--quiet", cwd=root)
        assert unset.code == 2 and "environment variable ALFWORLD_DATA is not set" in unset.err
        monkeypatch.setenv("ALFWORLD_DATA", str(data))
        # A real game (a PDDL problem, not a fixture layout) of the same size, without the package.
        game = data / gamefile("val", 3)
        size = game.stat().st_size
        real = json.dumps({"pddl_domain": "", "grammar": "", "pddl_problem": "", "solvable": True})
        game.write_text(real + " " * (size - len(real)))
        changed = run_cli("eval", "household", "--split", "val", "--out", str(root / "r2"), "--quiet", cwd=root)
        assert changed.code == 2 and "has changed since the import (sha256 differs)" in changed.err
        assert run_cli("bench", "import", "alfworld", "--from", str(data), "--manifest", str(tmp_path / "manifest"),
                       "--out", str(root / "eval_suites" / "alfworld"), "--force").code == 0
        monkeypatch.setitem(sys.modules, "alfworld", None)  # as if not installed
        missing = run_cli("eval", "household", "--split", "val", "--out", str(root / "r3"), "--quiet", cwd=root)
        assert missing.code == 2, missing.err
        assert "needs the alfworld package" in missing.err and 'pip install "skillopt-ci[alfworld]"' in missing.err
        assert "Traceback" not in missing.err
