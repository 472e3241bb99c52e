"""ALFWorld as a world of the ``interactive`` environment, and the suite settings of the benchmark.

:class:`AlfworldWorld` plays one ALFWorld game per rollout, pinned to the task's game file
(``gamefile``, relative to the ALFWorld data folder, as the published manifest gives it). It
finds the file through the task's ``file_paths`` (the suite lists the game as an asset
``@alfworld/<gamefile>``, hash-checked) or, for a hand-written suite, under ``data_root``
(``${ALFWORLD_DATA}`` by default). Which engine runs the game depends on the file, never on what
is installed:

- a real ALFWorld game (``game.tw-pddl`` with ``pddl_domain``, ``grammar``, ``pddl_problem``)
  runs in the ``alfworld`` package (>= 0.4): its ``AlfredTWEnv`` environment (TextWorld's PDDL
  engine with the ``alfred.pddl`` domain and ``alfred.twl2`` grammar) pinned to that one file
  instead of walking the whole data folder, in a child process of the rollout's own
  (:mod:`skillopt_ci.envs.alfworld_process`: the engine is not thread-safe, so games run
  concurrently only one per process). The package is imported only there; its absence is one
  line and exit 2 (``pip install "skillopt-ci[alfworld]"``). A child that dies is an errored
  rollout naming its last stderr line; ``kill()`` (which the interactive environment calls at
  its time limits) ends it at once;
- a game holding a bundled layout (:data:`~skillopt_ci.envs.alfworld_text.LAYOUT_KEY`, written
  by the test fixture) runs in :mod:`skillopt_ci.envs.alfworld_text`, which speaks the same
  format.

An unset ``ALFWORLD_DATA``, a missing game file, or a task without ``gamefile`` is an
:class:`InputError` (exit 2). ``step`` returns reward 1 and ``done`` when the game is won, else
0; the episode's 50-step limit is the environment's ``max_steps``. ``admissible_actions()``
gives the game's admissible commands without ``help``; ``objective()`` the goal after ``Your
task is to:`` in the first observation.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError
from skillopt_ci.envs.alfworld_process import INSTALL_HINT, GameProcess
from skillopt_ci.envs.alfworld_text import LAYOUT_KEY, AlfredTextWorld

DATA_HINT = "export ALFWORLD_DATA=<the folder alfworld-download filled, holding json_2.1.1>"
VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
TASK_RE = re.compile(r"Your task is to:\s*(.+)", re.S)
MAX_STEPS = 50

PROMPT = "You are an expert agent operating in the ALFRED embodied environment, a household described in text."
TURN_PROMPT = """{{ prompt }}
Your task is to: {{ objective }}
You have taken {{ step }} step(s) so far (at most {{ max_steps }}). Your last {{ history_count }} observation(s) and the action you took after each:
{{ history }}

Current observation: {{ observation }}

Admissible actions now:
{{ admissible }}

Reason about the situation step by step, then choose one admissible action. {{ instruction }}"""


def environment(max_steps: int = MAX_STEPS, variant: str = "strict") -> dict[str, Any]:
    """The ``environment:`` mapping of an ALFWorld suite (the reference system's prompt layout:
    the last 2 steps, the skill under "## Skill Knowledge", <think> then <action>). ``variant``:
    ``strict`` refuses a reply without ``<think>`` or with CJK text; ``reference`` sends the
    action as the method does (:mod:`skillopt_ci.envs.reply_action`)."""
    return {"type": "interactive", "world": "skillopt_ci.envs.alfworld:AlfworldWorld", "max_steps": max_steps,
            "history": 2, "action": "tag", "action_tag": "action", "turn_prompt": TURN_PROMPT,
            "skill_heading": "## Skill Knowledge", "require_tags": ["think"], "reject_cjk": True,
            "lowercase": True, "variant": variant}


class AlfworldWorld:
    def __init__(self, data_root: str = "${ALFWORLD_DATA}"):
        self.data_root = data_root
        self.game: Any = None
        self.first = ""
        self._killed = False

    def reset(self, task: dict[str, Any]) -> str:
        self.close()
        path = game_path(task, self.data_root)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"task {task.get('id')!r}: cannot read the game file: {exc}", where=str(path)) from None
        if isinstance(data, dict) and LAYOUT_KEY in data:
            self.game = _BundledGame(data[LAYOUT_KEY])
        else:
            _require_alfworld()
            self.game = GameProcess(path)
            if self._killed:  # killed while the process started
                self.game.kill()
            self.game.open()
        self.first = self.game.reset()
        return self.first

    def step(self, action: str) -> tuple[str, float, bool]:
        observation, won = self.game.step(action)
        return observation, 1.0 if won else 0.0, bool(won)

    def admissible_actions(self) -> list[str]:
        return [a for a in self.game.admissible_commands() if a != "help"]

    def objective(self) -> str:
        found = TASK_RE.search(self.first)
        return found.group(1).strip() if found else ""

    def close(self) -> None:
        game, self.game = self.game, None
        if game is not None:
            game.close()

    def kill(self) -> None:
        """End a real game's process at once (from any thread): the interactive environment calls
        it when a call passes its time limit or the rollout is cancelled."""
        self._killed = True
        game = self.game
        if game is not None:
            game.kill()


def game_path(task: dict[str, Any], data_root: str) -> Path:
    """The task's game file: from ``file_paths`` when the suite lists it, else under ``data_root``."""
    gamefile = task.get("gamefile")
    if not isinstance(gamefile, str) or not gamefile:
        raise InputError(f"task {task.get('id')!r} has no \"gamefile\" (a path relative to ALFWORLD_DATA)")
    for listed, path in (task.get("file_paths") or {}).items():
        if listed == gamefile:
            return Path(path)
    root = Path(expand_root(data_root))
    path = root / gamefile
    if not path.is_file():
        raise InputError(f"task {task.get('id')!r}: game file {gamefile} not found under {root}",
                         hint="download the games with alfworld-download and point ALFWORLD_DATA at them")
    return path


def expand_root(data_root: str) -> str:
    def var(match: re.Match[str]) -> str:
        value = os.environ.get(match.group(1))
        if not value:
            raise InputError(f"environment variable {match.group(1)} is not set: the ALFWorld world cannot find "
                             "its game files", hint=DATA_HINT)
        return value

    return VAR_RE.sub(var, data_root)


class _BundledGame:
    def __init__(self, layout: Any):
        if not isinstance(layout, dict):
            raise ValueError(f"{LAYOUT_KEY} must be a mapping")
        self.world = AlfredTextWorld(layout)

    def reset(self) -> str:
        return self.world.reset()

    def step(self, command: str) -> tuple[str, bool]:
        return self.world.step(command)

    def admissible_commands(self) -> list[str]:
        return self.world.admissible_commands()

    def close(self) -> None:
        pass

    def kill(self) -> None:
        pass


def _require_alfworld() -> None:
    """The package's absence is one line and exit 2 before any process starts."""
    if importlib.util.find_spec("alfworld") is None:
        raise InputError("the ALFWorld world needs the alfworld package (>= 0.4), which is not installed",
                         hint=INSTALL_HINT)
