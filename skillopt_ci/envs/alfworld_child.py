"""The child process of one real ALFWorld game: ``python -B -m skillopt_ci.envs.alfworld_child``.

TextWorld's PDDL engine keeps module-level state (one shared grammar parser), so two games
loaded at once in one process corrupt each other; each game therefore runs in a process of its
own (:mod:`skillopt_ci.envs.alfworld_process` starts and talks to it).

Contract: a line protocol over the child's stdin and stdout, one JSON object per line, one
answer per request, in order:

- ``{"op": "open", "path": P}``: build ``alfworld``'s ``AlfredTWEnv`` pinned to the one game
  file ``P`` (no walk over the data folder) -> ``{"ok": null}``;
- ``{"op": "reset"}`` -> ``{"ok": first observation}``;
- ``{"op": "step", "command": C}`` -> ``{"ok": [observation, won]}``;
- ``{"op": "admissible"}`` -> ``{"ok": [command, ...]}`` (``help`` included, as the game gives them);
- ``{"op": "close"}`` -> ``{"ok": null}``, then the child exits 0 (so it does at the end of stdin).

A request the engine fails is answered ``{"error": "Type: message"}`` and the child keeps
serving; a missing ``alfworld`` package (or one of its dependencies) is ``{"error": ...,
"missing": true}``. What the engine prints goes to stderr, never into the protocol. On Linux the
child is killed when the thread that started it ends (``PR_SET_PDEATHSIG``), so a game never
outlives the run that started it, even one stuck in a step when the run is killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import IO, Any

MAX_STEPS = 50
SPLITS = {"valid_seen": "eval_in_distribution", "valid_unseen": "eval_out_of_distribution"}
ENGINE_MODULE = "alfworld.agents.environment.alfred_tw_env"


class Game:
    """One real ALFWorld game through ``alfworld``'s AlfredTWEnv, pinned to ``path``."""

    def __init__(self, path: Path):
        module = importlib.import_module(ENGINE_MODULE)
        split = next((v for k, v in SPLITS.items() if k in path.parts), "train")
        env = module.AlfredTWEnv.__new__(module.AlfredTWEnv)  # skip the walk over every game of the split
        env.config = {"env": {"domain_randomization": False, "expert_type": "handcoded",
                              "goal_desc_human_anns_prob": 0},
                      "general": {"training_method": "dqn"},
                      "rl": {"training": {"max_nb_steps_per_episode": MAX_STEPS}}}
        env.train_eval, env.game_files, env.num_games = split, [str(path)], 1
        self.env = env.init_env(batch_size=1)
        self.infos: dict[str, Any] = {}

    def reset(self) -> str:
        observations, self.infos = self.env.reset()
        return str(observations[0])

    def step(self, command: str) -> list[Any]:
        observations, _scores, _dones, self.infos = self.env.step([command])
        return [str(observations[0]), bool(self.infos["won"][0])]

    def admissible(self) -> list[str]:
        return [str(c) for c in self.infos.get("admissible_commands", [[]])[0]]

    def close(self) -> None:
        self.env.close()


def answer(game: Game | None, request: Any) -> tuple[Game | None, dict[str, Any]]:
    """The game after ``request`` and the answer to send (see the module doc)."""
    op = request.get("op") if isinstance(request, dict) else None
    try:
        if op == "open":
            return Game(Path(str(request["path"]))), {"ok": None}
        if op == "close":
            if game is not None:
                game.close()
            return None, {"ok": None}
        if game is None:
            return None, {"error": f"no game is open for {op!r}"}
        if op == "reset":
            return game, {"ok": game.reset()}
        if op == "step":
            return game, {"ok": game.step(str(request["command"]))}
        if op == "admissible":
            return game, {"ok": game.admissible()}
        return game, {"error": f"unknown request {op!r}"}
    except ImportError as exc:
        return game, {"error": f"{type(exc).__name__}: {exc}", "missing": True}
    except Exception as exc:  # the engine's failure is the answer; the child keeps serving
        return game, {"error": f"{type(exc).__name__}: {exc}"}


def serve(requests: IO[str], answers: IO[str]) -> None:
    game: Game | None = None
    for line in requests:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except json.JSONDecodeError as exc:
            request, game_answer = None, {"error": f"not a JSON request: {exc}"}
        else:
            game, game_answer = answer(game, request)
        answers.write(json.dumps(game_answer, ensure_ascii=False) + "\n")
        answers.flush()
        if isinstance(request, dict) and request.get("op") == "close":
            return
    if game is not None:
        game.close()


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        # PR_SET_PDEATHSIG; a parent gone before it is armed closed our stdin, which ends us too
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def main() -> None:
    _die_with_parent()
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # what the engine prints lands on stderr
    sys.stdout = sys.stderr
    serve(sys.stdin, answers)


if __name__ == "__main__":
    main()
