"""User scorer code: ``function: "scorer:score"`` calls ``score(output, task)`` from
``scorer.py`` in the suite directory.

The module path stays inside the suite folder and the file is loaded from its source text
(:mod:`~skillopt_ci.inputs.usercode`: no ``..``, no symlink out, never a ``__pycache__``), under a
unique module name, so two suites may each have a ``scorer.py``; ``sys.path`` is not touched, so
the file cannot import its neighbours (it may import installed packages). The function receives the output string and the
:class:`~skillopt_ci.core.task.Task` (and, when it has a parameter named ``rollout``, the whole
:class:`~skillopt_ci.core.trajectory.Rollout`: steps, reward, the workspace while scoring), and
returns one of:

- ``bool`` — value 1 or 0;
- a number in [0, 1] — passed when ``>= pass_threshold``;
- ``(value, feedback)`` — value a bool or a number as above, feedback a string;
- ``{"score" | "value": number, "passed": bool (optional), "feedback": str (optional)}``;
- a :class:`~skillopt_ci.scorers.base.Score`.

Raising :class:`~skillopt_ci.core.errors.ScoringError` means "cannot measure this output" (missing
data). Any other exception (``SystemExit`` and a ``KeyboardInterrupt`` it raised included: suite code never
picks the exit code), or a return value of another shape, is a bug in the suite:
:class:`~skillopt_ci.core.errors.ScorerCrash` naming the file, the line and the task. The scorer
runs in this process, so an ``os._exit`` in it still ends the process (function tools, which run
in the sandbox, do not have that hole).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillopt_ci.core.errors import InputError, ScorerCrash, ScoringError
from skillopt_ci.core.task import Task
from skillopt_ci.core.text import clip
from skillopt_ci.core.trajectory import Rollout
from skillopt_ci.inputs.usercode import describe, line_in, load_function, module_path, user_code
from skillopt_ci.models.base import ModelCaller
from skillopt_ci.scorers.base import Score, Scorer


@dataclass(frozen=True)
class PythonOptions:
    function: str = "scorer:score"  # "module:function"; module is a .py file in the suite dir
    pass_threshold: float = 0.5


def _check_signature(fn: Callable[..., Any], name: str, path: Path) -> None:
    try:
        signature = inspect.signature(fn)
        if "rollout" in signature.parameters:
            signature.bind("output", "task", rollout=None)
        else:
            signature.bind("output", "task")
    except TypeError:
        raise InputError(
            f'python scorer function "{name}" must accept (output, task) or (output, task, rollout)', where=str(path)
        ) from None
    except ValueError:  # no signature available (some builtins): find out at call time
        pass


def _takes_rollout(fn: Callable[..., Any]) -> bool:
    try:
        return "rollout" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


class PythonScorer(Scorer):
    name = "python"
    Options = PythonOptions

    def setup(self) -> None:
        module, _, function = self.options.function.partition(":")
        if not module:
            raise self.error(f'function must be "module:function", got "{self.options.function}"')
        self.path = module_path(self.suite_dir, module, key="scorer.function")
        self.function = function or "score"
        self.fn = load_function(self.path, self.function)
        _check_signature(self.fn, self.function, self.path)
        if not 0.0 <= self.options.pass_threshold <= 1.0:
            raise self.error(f"pass_threshold must be in [0, 1], got {self.options.pass_threshold}")

    def score(self, output: str, task: Task, rollout: Rollout | None = None) -> Score:
        try:
            with user_code():
                result = self.fn(output, task, rollout=rollout) if rollout is not None else self.fn(output, task)
        except ScoringError:
            raise
        except Exception as exc:
            line = line_in(exc, self.path)
            at = f" at line {line} of {self.path.name}" if line else f" in {self.path.name}"
            raise ScorerCrash(
                f"{self.function}() raised {describe(exc)}{at} "
                f'(task "{task.id}")',
                where=f"{self.path}:{line}" if line else str(self.path),
            ) from exc
        return self._convert(result, task)

    async def ascore_rollout(self, rollout: Rollout, task: Task, models: ModelCaller | None = None) -> Score:
        """A function with a ``rollout`` parameter also gets the rollout (its steps, reward and
        workspace, e.g. to check a file the agent wrote)."""
        if _takes_rollout(self.fn):
            return self.score(rollout.output, task, rollout)
        return self.score(rollout.output, task)

    def _convert(self, result: Any, task: Task) -> Score:
        threshold = self.options.pass_threshold
        if isinstance(result, Score):
            return result
        original = result
        feedback = ""
        passed = None
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], str):
            result, feedback = result
        elif isinstance(result, dict) and self._dict_ok(result):
            passed = result.get("passed")
            feedback = result.get("feedback", "")
            result = result["score"] if "score" in result else result["value"]
        if isinstance(result, bool):
            value = 1.0 if result else 0.0
        elif isinstance(result, (int, float)) and math.isfinite(result) and 0 <= result <= 1:
            value = float(result)
        else:
            raise self._bad_return(original, task)
        if not feedback:
            feedback = f"{self.path.name}:{self.function} returned {clip(repr(result), 40)}"
        return Score(value, value >= threshold if passed is None else passed, feedback)

    def _dict_ok(self, result: dict[str, Any]) -> bool:
        allowed = {"score", "value", "passed", "feedback"}
        return (
            set(result) <= allowed
            and ("score" in result) != ("value" in result)
            and isinstance(result.get("passed", False), bool)
            and isinstance(result.get("feedback", ""), str)
        )

    def _bad_return(self, result: Any, task: Task) -> ScorerCrash:
        return ScorerCrash(
            f"{self.function}() returned {type(result).__name__} {clip(repr(result), 80)} on task "
            f'"{task.id}"; expected a bool, a number in [0, 1], (value, feedback), '
            '{"score": value, "passed"?: bool, "feedback"?: str} or a Score',
            where=str(self.path),
        )
