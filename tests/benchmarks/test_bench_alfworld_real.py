"""The real ALFWorld engine (optional: skipped when the ``alfworld`` package is not installed).

Two tiny games are authored here the way ALFWorld's own are stored: a ``game.tw-pddl`` JSON with
the PDDL domain and the grammar the ``alfworld`` wheel ships (``alfred.pddl``, ``alfred.twl2``,
the goal text put in the grammar as ALFWorld's generator does), a hand-written PDDL problem,
``solvable: true`` and a walkthrough, plus a ``traj_data.json`` with the ``task_type``, under a
temporary ``ALFWORLD_DATA/json_2.1.1/...``. The world runs them through ``AlfredTWEnv``, one child
process per game: the last test imports copies of them as a suite and evaluates its six val games at concurrency 4
through the CLI and the OpenAI SDK (TextWorld's parser is module state: with every game in one
process, all six rollouts errored on reset, ``IndexError: pop from empty list`` and the like)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from helpers.cli import run_cli
from skillopt_ci.benchmarks.packs.alfworld import fixture
from skillopt_ci.core.skill import parse_skill
from skillopt_ci.core.task import Task
from skillopt_ci.envs.alfworld import PROMPT, AlfworldWorld, environment
from skillopt_ci.envs.base import RolloutRequest
from skillopt_ci.envs.registry import build_environment
from skillopt_ci.models.base import Completion, Usage
from skillopt_ci.sim import ScriptedModelServer

alfworld = pytest.importorskip("alfworld", reason="the optional alfworld package is not installed")

APPLE = "Apple_bar__plus_00_dot_10_bar__plus_00_dot_90_bar__plus_00_dot_20"
COUNTER = "CounterTop_bar__plus_00_dot_50_bar__plus_00_dot_90_bar__plus_00_dot_20"
FRIDGE = "Fridge_bar__minus_01_dot_00_bar__plus_00_dot_00_bar__plus_01_dot_00"
SINK = "Sink_bar__plus_01_dot_20_bar__plus_00_dot_90_bar__minus_00_dot_40_bar_SinkBasin"
START, AT_COUNTER, AT_FRIDGE, AT_SINK = ("loc_bar_0_bar_0_bar_0_bar_30", "loc_bar_2_bar_1_bar_1_bar_45",
                                         "loc_bar__minus_4_bar_4_bar_3_bar_60", "loc_bar_5_bar__minus_2_bar_1_bar_45")
CLEAN_GOAL = "(isClean ?o)"
GAMES = {
    "pick_and_place_simple": ("put some apple in fridge", "", [
        "go to countertop 1", "take apple 1 from countertop 1", "go to fridge 1", "open fridge 1",
        "move apple 1 to fridge 1"]),
    "pick_clean_then_place_in_recep": ("put a clean apple in fridge", CLEAN_GOAL, [
        "go to countertop 1", "take apple 1 from countertop 1", "go to sinkbasin 1", "clean apple 1 with sinkbasin 1",
        "go to fridge 1", "open fridge 1", "move apple 1 to fridge 1"]),
}


def problem(extra_goal: str) -> str:
    return f"""(define (problem tiny_apple)
  (:domain alfred)
  (:objects
    agent1 - agent
    {APPLE} - object
    AppleType - otype
    CounterTopType - rtype
    FridgeType - rtype
    SinkBasinType - rtype
    {COUNTER} - receptacle
    {FRIDGE} - receptacle
    {SINK} - receptacle
    {START} - location
    {AT_COUNTER} - location
    {AT_FRIDGE} - location
    {AT_SINK} - location
  )
  (:init
    (atLocation agent1 {START})
    (receptacleType {COUNTER} CounterTopType)
    (receptacleType {FRIDGE} FridgeType)
    (receptacleType {SINK} SinkBasinType)
    (receptacleAtLocation {COUNTER} {AT_COUNTER})
    (receptacleAtLocation {FRIDGE} {AT_FRIDGE})
    (receptacleAtLocation {SINK} {AT_SINK})
    (openable {FRIDGE})
    (objectType {APPLE} AppleType)
    (pickupable {APPLE})
    (cleanable {APPLE})
    (inReceptacle {APPLE} {COUNTER})
    (objectAtLocation {APPLE} {AT_COUNTER})
    (canContain FridgeType AppleType)
    (canContain CounterTopType AppleType)
    (canContain SinkBasinType AppleType)
  )
  (:goal
    (exists (?r - receptacle)
      (exists (?o - object)
        (and (objectType ?o AppleType) (receptacleType ?r FridgeType) (inReceptacle ?o ?r) {extra_goal}))))
)
"""


def write_games(root: Path, trial: str = "T0", split: str = "valid_unseen") -> dict[str, str]:
    data = Path(alfworld.__file__).parent / "data"
    domain = (data / "alfred.pddl").read_text()
    grammar = (data / "alfred.twl2").read_text()
    found = {}
    for task_type, (goal, extra, walkthrough) in GAMES.items():
        rel = f"json_2.1.1/{split}/{task_type}-Apple-None-Fridge-1/trial_{trial}/game.tw-pddl"
        folder = (root / rel).parent
        folder.mkdir(parents=True)
        game = {"pddl_domain": domain, "grammar": grammar.replace("UNKNOWN GOAL", goal),
                "pddl_problem": problem(extra), "solvable": True, "walkthrough": walkthrough}
        (root / rel).write_text(json.dumps(game))
        (folder / "traj_data.json").write_text(json.dumps({"task_type": task_type}))
        found[task_type] = rel
    return found


@pytest.fixture(scope="module")
def games(tmp_path_factory):
    root = tmp_path_factory.mktemp("alfworld_data")
    return root, write_games(root)


def test_the_real_engine_plays_a_hand_written_game_to_a_win(games):
    root, files = games
    world = AlfworldWorld(str(root))
    try:
        first = world.reset({"id": "t", "gamefile": files["pick_clean_then_place_in_recep"]})
        assert first.startswith("-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room.")
        assert world.objective() == "put a clean apple in fridge."
        actions = world.admissible_actions()
        assert "go to countertop 1" in actions and "help" not in actions
        walkthrough = GAMES["pick_clean_then_place_in_recep"][2]
        results = [world.step(action) for action in walkthrough]
    finally:
        world.close()
    assert results[1][0] == "You pick up the apple 1 from the countertop 1."
    assert results[3][0] == "You clean the apple 1 using the sinkbasin 1."
    assert [r[1:] for r in results] == [(0.0, False)] * 6 + [(1.0, True)]


def test_an_episode_in_the_real_engine_is_won_within_the_steps(games):
    root, files = games
    walkthrough = list(GAMES["pick_and_place_simple"][2])

    class Caller:
        async def complete(self, role, messages, sample_index=0, *, tools=(), context=None):
            action = walkthrough.pop(0) if walkthrough else "look"
            return Completion(f"<think>plan</think><action>{action}</action>", usage=Usage(1, 1), latency_s=0.0)

    env = build_environment({**environment(), "world_options": {"data_root": str(root)}}, root)
    task = Task("t", "g", fields={"id": "t", "gamefile": files["pick_and_place_simple"]})
    request = RolloutRequest(skill=parse_skill("---\nname: a\ndescription: b\n---\nbody\n"), task=task,
                             prompt=PROMPT, suite_dir=root)
    rollout = asyncio.run(env.run(request, Caller()))
    assert rollout.done and rollout.reward == 1.0 and rollout.error is None
    assert rollout.steps[-1].text == "You move the apple 1 to the fridge 1."


def test_real_games_evaluated_at_concurrency_4_all_finish_without_error(tmp_path):
    data = tmp_path / "alfworld_data"
    splits: dict[str, list[dict]] = {"train": [], "val": [], "test": []}
    for split, folder, trials in (("train", "train", 1), ("val", "valid_seen", 3), ("test", "valid_unseen", 1)):
        for trial in range(trials):
            for task_type, rel in write_games(data, f"T{trial}", folder).items():
                splits[split].append({"id": f"{split}:{len(splits[split]):04d}", "gamefile": rel,
                                      "task_type": task_type})
    manifest = tmp_path / "manifest"
    for split, items in splits.items():
        (manifest / split).mkdir(parents=True)
        (manifest / split / "items.json").write_text(json.dumps(items))
    (manifest / "split_manifest.json").write_text(json.dumps({"benchmark": "ALFWorld", "manifest_type": "path_split"}))
    root = tmp_path / "proj"
    imported = run_cli("bench", "import", "alfworld", "--from", str(data), "--manifest", str(manifest),
                       "--out", str(root / "eval_suites" / "alfworld"))
    assert imported.code == 0, imported.err
    (root / "skills" / "household").mkdir(parents=True)
    (root / "skills" / "household" / "SKILL.md").write_text(
        f"---\nname: household\ndescription: Does household tasks.\n---\n{fixture.SKILL_RULE}\n")
    with ScriptedModelServer(fixture.policy) as server:
        config = {"version": 1, "models": {"target": {"provider": "openai-compatible", "model": "sim-household-1",
                                                      "base_url": server.openai_base_url}},
                  "skills": [{"path": "skills/household/SKILL.md", "suite": "eval_suites/alfworld"}],
                  "cache": {"mode": "off"}}
        (root / "skillopt.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        result = run_cli("eval", "household", "--split", "val", "--concurrency", "4", "--out", str(root / "run"),
                         "--quiet", cwd=root)
    rows = [json.loads(line) for line in (root / "run" / "results.jsonl").read_text().splitlines()]
    assert [(r.get("error"), r["passed"]) for r in rows] == [(None, True)] * 6, result.err
    assert result.code == 0, result.err

