"""The scorer contract: ``Score`` (one measurement) and ``Scorer`` (one-method protocol).

A scorer turns a model output for one task into a ``Score``. A score is a *measurement*: a
failed answer is ``value=0`` with feedback, never an exception. Exceptions mean something else:

- :class:`~skillopt_ci.core.errors.InputError` — the suite is wrong (missing ``expected``, bad option);
- :class:`~skillopt_ci.core.errors.ScorerCrash` — user scorer code raised (a bug in the suite);
- :class:`~skillopt_ci.core.errors.ScoringError` — no measurement could be made for this output
  (e.g. every judge verdict was unparseable); recorded as missing data, never as a zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from skillopt_ci.core.codec import Record
from skillopt_ci.core.errors import InputError
from skillopt_ci.core.options import NoOptions, options_to_dict
from skillopt_ci.core.task import Task
from skillopt_ci.core.text import clip, quote
from skillopt_ci.core.trajectory import Rollout
from skillopt_ci.models.base import ModelCaller, Usage

FEEDBACK_LIMIT = 300


@dataclass(frozen=True)
class Score(Record):
    """One measurement of one output.

    ``value`` is in [0, 1]; ``passed`` is the scorer's pass/fail call (``value >= threshold``);
    ``feedback`` is one short, specific sentence for the optimizer model (cut to
    ``FEEDBACK_LIMIT`` characters); ``usage`` counts judge tokens; ``errors`` counts judge
    samples whose verdict could not be parsed.
    """

    value: float
    passed: bool
    feedback: str = ""
    usage: Usage = field(default_factory=Usage)
    errors: int = 0

    def __post_init__(self) -> None:
        value = float(self.value)
        if math.isnan(value) or not 0.0 <= value <= 1.0:
            raise ValueError(f"score value must be in [0, 1], got {self.value!r}")
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "passed", bool(self.passed))
        if len(self.feedback) > FEEDBACK_LIMIT:
            object.__setattr__(self, "feedback", self.feedback[: FEEDBACK_LIMIT - 1] + "…")

    @classmethod
    def graded(cls, value: float, threshold: float, feedback: str, **kw: Any) -> Score:
        return cls(value=value, passed=value >= threshold, feedback=feedback, **kw)

    @classmethod
    def binary(cls, ok: bool, feedback: str) -> Score:
        return cls(value=1.0 if ok else 0.0, passed=ok, feedback=feedback)


class Scorer:
    """Base class. Subclasses set ``name`` and ``Options`` (a frozen dataclass whose fields are
    the allowed option keys) and implement ``score``; model-backed scorers set
    ``needs_model = True`` and override ``ascore`` instead.

    ``__init__`` checks the options' *meaning* (the registry has already checked keys and types)
    and raises ``InputError``; subclasses extend it via ``setup``.
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type] = NoOptions
    needs_model: ClassVar[bool] = False

    def __init__(self, options: Any = None, suite_dir: Path | str = ".") -> None:
        self.options = options if options is not None else self.Options()
        self.suite_dir = Path(suite_dir)
        self.setup()

    def setup(self) -> None:
        """Validate and prepare options (compile patterns, load files). Raise ``InputError``."""

    @property
    def spec(self) -> dict[str, Any]:
        """The spec this scorer was built from, defaults filled in (for run logs)."""
        return {"type": self.name, **options_to_dict(self.options)}

    def score(self, output: str, task: Task) -> Score:
        raise NotImplementedError

    async def ascore(self, output: str, task: Task, models: ModelCaller | None = None) -> Score:
        return self.score(output, task)

    async def ascore_rollout(self, rollout: Rollout, task: Task, models: ModelCaller | None = None) -> Score:
        """Score a whole rollout. The default scores its final output (every text scorer); a
        scorer of the trajectory, the environment's reward or the workspace overrides this."""
        return await self.ascore(rollout.output, task, models)

    def error(self, message: str, **kw: Any) -> InputError:
        return InputError(f'scorer "{self.name}": {message}', **kw)


def require_expected(task: Task, scorer: str) -> Any:
    """``task.expected``, or ``InputError`` naming the task's file and line when it is missing."""
    if task.expected is None:
        raise InputError(
            f'task "{task.id}" has no "expected" but scorer "{scorer}" needs one',
            where=task.source or None,
        )
    return task.expected


def expected_strings(task: Task, scorer: str) -> list[str]:
    """``task.expected`` as a non-empty list of acceptable strings (a scalar becomes one)."""
    expected = require_expected(task, scorer)
    items = expected if isinstance(expected, list) else [expected]
    if not items or any(isinstance(x, (dict, list)) or x is None for x in items):
        raise InputError(
            f'task "{task.id}": scorer "{scorer}" needs "expected" to be a string or a list of '
            f"strings, got {clip(repr(expected))}",
            where=task.source or None,
        )
    return [str(x) for x in items]


def describe_expected(options: list[str]) -> str:
    if len(options) == 1:
        return f"expected {quote(options[0])}"
    shown = ", ".join(quote(x, 30) for x in options[:3])
    more = f" (+{len(options) - 3} more)" if len(options) > 3 else ""
    return f"expected one of {shown}{more}"
