"""A real ALFWorld game runs in a child process of its own (envs/alfworld_process.py).

These tests need no ``alfworld`` install: they put a small engine on the import path in its
place, at ``alfworld.agents.environment.alfred_tw_env`` as the real package has it, and the
world reaches it through the same child process as the real one (the child gets this process's
import path). Like TextWorld's PDDL engine it is not reentrant: it holds the game it plays in
module state and refuses a second one in the same process. Its games are JSON files in the real
format (``pddl_domain``, ``grammar``, ``pddl_problem``) plus what the engine plays: the command
that wins, one that makes the engine crash (it writes a line to stderr and exits 70) and one
that never returns. ``test_bench_alfworld_real.py`` runs the real engine concurrently."""

from __future__ import annotations

import asyncio
import json
import os
import textwrap
from pathlib import Path

import pytest

from skillopt_ci.core.errors import InputError
from skillopt_ci.core.skill import parse_skill
from skillopt_ci.core.task import Task
from skillopt_ci.envs.alfworld import PROMPT, AlfworldWorld, environment
from skillopt_ci.envs.base import RolloutRequest
from skillopt_ci.envs.registry import build_environment
from skillopt_ci.models.base import Completion, Usage

ENGINE = '''
import json, os, sys, time

LOADED = []  # the game this process plays: module state, as TextWorld's parser is


class _Env:
    def __init__(self, path):
        self.path = path
        self.game = json.loads(open(path).read())["engine"]

    def reset(self):
        if LOADED:
            raise RuntimeError(f"engine state in use by another game ({len(LOADED)} loaded)")
        LOADED.append(self.path)
        open(self.game["pidfile"], "w").write(str(os.getpid()))
        return ["-= Welcome to TextWorld, ALFRED! =-\\n\\nYour task is to: open the box."], self._infos(False)

    def step(self, commands):
        command = commands[0]
        if command == "explode":
            print("engine: corrupted state after explode", file=sys.stderr, flush=True)
            os._exit(70)
        if command == "wait":
            open(self.game["pidfile"] + ".step", "w").close()
            time.sleep(3600)
        if LOADED != [self.path]:
            raise RuntimeError("engine state belongs to another game")
        won = command == self.game["win"]
        print("noise the engine prints")  # must not break the protocol
        return ["You open the box." if won else "Nothing happens."], [0], [won], self._infos(won)

    def _infos(self, won):
        return {"won": [won], "admissible_commands": [["help", "look", self.game["win"]]]}

    def close(self):
        LOADED.clear()


class AlfredTWEnv:
    def init_env(self, batch_size):
        return _Env(self.game_files[0])
'''


@pytest.fixture
def engine(tmp_path, monkeypatch):
    """The stand-in engine on the import path (of this process, so of the child too)."""
    root = tmp_path / "engine"
    package = root / "alfworld" / "agents" / "environment"
    package.mkdir(parents=True)
    for folder in (root / "alfworld", root / "alfworld" / "agents", package):
        (folder / "__init__.py").write_text("")
    (package / "alfred_tw_env.py").write_text(textwrap.dedent(ENGINE))
    monkeypatch.syspath_prepend(str(root))
    return root


def write_game(data: Path, name: str, win: str = "open box 1") -> str:
    rel = f"json_2.1.1/valid_seen/{name}/trial_T0/game.tw-pddl"
    (data / rel).parent.mkdir(parents=True)
    game = {"pddl_domain": "(define (domain alfred))", "grammar": "", "pddl_problem": "(define (problem p))",
            "solvable": True, "engine": {"win": win, "pidfile": str(data / f"{name}.pid")}}
    (data / rel).write_text(json.dumps(game))
    return rel


def pid_of(data: Path, name: str) -> int:
    return int((data / f"{name}.pid").read_text())


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class Player:
    """Acts from a script per task; every rollout's first call waits until each of the ``n``
    rollouts has either asked or ended, so all games are loaded at the same time."""

    def __init__(self, n: int, actions: list[str]):
        self.n, self.actions, self.waiting = n, actions, set()
        self.gate = asyncio.Event()
        self.turns: dict[str, int] = {}

    def arrive(self, key: str) -> None:
        self.waiting.add(key)
        if len(self.waiting) >= self.n:
            self.gate.set()

    async def complete(self, role, messages, sample_index=0, *, tools=(), context=None):
        text = messages[-1].text
        key = text.splitlines()[0]  # the task's prompt: the same for every turn of one task
        turn = self.turns[key] = self.turns.get(key, -1) + 1
        if turn == 0:
            self.arrive(key)
            await self.gate.wait()
        action = self.actions[min(turn, len(self.actions) - 1)]
        return Completion(f"<think>go</think><action>{action}</action>", usage=Usage(1, 1), latency_s=0.0)


def request(data: Path, gamefile: str, task_id: str) -> RolloutRequest:
    task = Task(task_id, f"open the box ({task_id})", fields={"id": task_id, "gamefile": gamefile})
    skill = parse_skill("---\nname: a\ndescription: b\n---\nbody\n")
    return RolloutRequest(skill=skill, task=task, prompt=f"{PROMPT} ({task_id})", suite_dir=data)


def run_all(data: Path, gamefiles: list[str], player: Player, concurrency: int, **options):
    env = build_environment({**environment(), "world_options": {"data_root": str(data)}, **options}, data)
    limit = asyncio.Semaphore(concurrency)

    async def one(i: int, gamefile: str):
        async with limit:
            rollout = await env.run(request(data, gamefile, f"t{i}"), player)
        player.arrive(f"ended {i}")  # one that ended without asking does not hold the others
        return rollout

    async def main():
        return await asyncio.gather(*(one(i, g) for i, g in enumerate(gamefiles)))

    return asyncio.run(main())


def test_games_with_non_reentrant_engine_state_run_concurrently(tmp_path, engine):
    data = tmp_path / "data"
    games = [write_game(data, f"game{i}") for i in range(5)]
    rollouts = run_all(data, games, Player(4, ["look", "open box 1"]), concurrency=4)
    # In one process the 2nd to 4th game to load would fail ("engine state in use by another game").
    assert [(r.error, r.done, r.reward) for r in rollouts] == [(None, True, 1.0)] * 5
    assert [s.text for s in rollouts[0].steps if s.kind == "observation"][-1] == "You open the box."
    pids = {pid_of(data, f"game{i}") for i in range(5)}
    assert len(pids) == 5 and os.getpid() not in pids and not any(alive(p) for p in pids)


def test_a_crashed_game_process_is_an_errored_rollout_naming_its_last_stderr_line(tmp_path, engine):
    data = tmp_path / "data"
    rollout = run_all(data, [write_game(data, "boom")], Player(1, ["look", "explode"]), concurrency=1)[0]
    assert rollout.error is not None and rollout.error["kind"] == "environment"
    message = rollout.error["message"]
    assert message.startswith("task 't0': the world's step raised GameProcessEnded: the ALFWorld game process "
                              "ended during step (exit code 70); its last stderr line: engine: corrupted state")
    # the turn before the crash was played, and the rollout kept it
    assert [s.text for s in rollout.steps if s.kind == "action"] == ["look", "explode"]


@pytest.mark.slow
@pytest.mark.parametrize(("limits", "message"), [
    ({"step_timeout_s": 1}, "the world's step did not return within 1 s"),
    ({"time_limit_s": 1}, "the episode did not finish within time_limit_s = 1 s"),
])
def test_a_step_past_its_time_limit_ends_the_game_process(tmp_path, engine, limits, message):
    data = tmp_path / "data"
    rollout = run_all(data, [write_game(data, "stuck")], Player(1, ["wait"]), concurrency=1, **limits)[0]
    assert rollout.error is not None and rollout.error["kind"] == "time_limit"
    assert message in rollout.error["message"]
    assert not alive(pid_of(data, "stuck"))  # killed and reaped before the rollout returned


def test_a_rollout_cancelled_in_a_step_ends_the_game_process(tmp_path, engine):
    data = tmp_path / "data"
    gamefile = write_game(data, "cancelled")
    env = build_environment({**environment(), "world_options": {"data_root": str(data)}}, data)

    async def main():
        rollout = asyncio.ensure_future(env.run(request(data, gamefile, "t0"), Player(1, ["wait"])))
        while not (data / "cancelled.pid.step").exists():  # until the game is inside its step
            await asyncio.sleep(0.02)
        rollout.cancel()
        with pytest.raises(asyncio.CancelledError):
            await rollout

    asyncio.run(main())
    assert not alive(pid_of(data, "cancelled"))


def test_the_world_forwards_reset_step_admissible_and_close(tmp_path, engine):
    data = tmp_path / "data"
    gamefile = write_game(data, "plain")
    world = AlfworldWorld(str(data))
    try:
        assert world.reset({"id": "t", "gamefile": gamefile}).endswith("Your task is to: open the box.")
        assert world.objective() == "open the box."
        assert world.admissible_actions() == ["look", "open box 1"]  # without help
        assert world.step("look") == ("Nothing happens.", 0.0, False)
        pid = pid_of(data, "plain")
        assert alive(pid)
        assert world.step("open box 1") == ("You open the box.", 1.0, True)
    finally:
        world.close()
    assert not alive(pid)


def test_an_engine_the_game_process_cannot_import_is_exit_2_naming_the_extra(tmp_path, monkeypatch):
    root = tmp_path / "engine"
    (root / "alfworld").mkdir(parents=True)
    (root / "alfworld" / "__init__.py").write_text("")  # a package without its engine
    monkeypatch.syspath_prepend(str(root))
    data = tmp_path / "data"
    world = AlfworldWorld(str(data))
    with pytest.raises(InputError) as caught:
        world.reset({"id": "t", "gamefile": write_game(data, "g")})
    assert "the game process cannot import" in str(caught.value) and "alfworld.agents" in str(caught.value)
    assert caught.value.hint == 'pip install "skillopt-ci[alfworld]"'
