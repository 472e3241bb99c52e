"""A rollout is a trajectory: what the agent did (steps), what it ended with (output, files,
reward), what it cost, and a bounded text rendering the optimizer reads.

Pure records. Environments (``skillopt_ci.envs``) build them; the engine turns one into a
:class:`~skillopt_ci.core.records.TaskResult` after the scorer has seen it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from skillopt_ci.core import codec
from skillopt_ci.core.records import Consult, Usage

STEP_KINDS = ("model", "tool_call", "tool_result", "observation", "action", "error")
STEP_TEXT_LIMIT = 8_000  # characters of one step kept in results.jsonl (the rendering has its own budget)


@dataclass(frozen=True)
class Step(codec.Record):
    """One thing that happened in a rollout.

    ``kind``:
    - ``model``: the model's text of one turn (``text``), with ``usage`` of that call;
    - ``tool_call``: the model asked for tool ``name`` with ``arguments`` (the raw JSON text), ``call_id``;
    - ``tool_result``: what tool ``name`` returned for ``call_id`` (``is_error`` when it failed);
    - ``observation``: what an interactive environment showed (``reward``, ``done`` after a step);
    - ``action``: the action parsed from the model's turn in an interactive environment;
    - ``error``: something went wrong that ended or disturbed the rollout (``text`` says what).

    ``images`` names images shown at this step (paths relative to the suite directory or the
    workspace) so viewers can show thumbnails; ``elapsed_s`` is the time since the rollout began.
    """

    kind: str
    # In results.jsonl only the fields that say something (it stays small); text is cut at
    # STEP_TEXT_LIMIT characters with a note of how much was dropped.
    text: Annotated[str, codec.OMIT_EMPTY, codec.written_as(lambda s: _cut(s, STEP_TEXT_LIMIT))] = ""
    name: Annotated[str | None, codec.OMIT_NONE] = None
    arguments: Annotated[str | None, codec.OMIT_NONE, codec.written_as(lambda s: _cut(s, STEP_TEXT_LIMIT))] = None
    call_id: Annotated[str | None, codec.OMIT_NONE] = None
    reward: Annotated[float | None, codec.OMIT_NONE] = None
    done: Annotated[bool | None, codec.OMIT_NONE] = None
    is_error: Annotated[bool, codec.OMIT_EMPTY] = False
    images: Annotated[tuple[str, ...], codec.OMIT_EMPTY] = ()
    usage: Annotated[Usage | None, codec.OMIT_NONE] = None
    elapsed_s: Annotated[float, codec.written_as(lambda s: round(s, 4))] = 0.0


@dataclass(frozen=True)
class Rollout:
    """What one environment run of one task produced.

    ``output`` is the final answer text ("" when there is none). ``error`` (``{"kind",
    "message"}``) marks a rollout that did not finish (max turns, time limit, a provider failure,
    an environment that raised): its steps are kept, and it is recorded as missing data.
    ``workspace`` is the rollout's directory while the scorer runs (``None`` for environments
    without one); ``files`` lists the workspace files the rollout wrote (relative paths).
    ``transcript`` is the environment's bounded rendering for the optimizer (``None``: the
    optimizer reads prompt and output, as for ``chat``). ``release`` removes the workspace; the
    engine calls it after scoring, always.
    """

    output: str
    steps: tuple[Step, ...] = ()
    reward: float | None = None
    done: bool | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    latency_s: float = 0.0
    wall_s: float = 0.0
    cached: bool = False
    finish_reason: str | None = None
    error: dict[str, str] | None = None
    transcript: str | None = None
    workspace: Path | None = None
    files: tuple[str, ...] = ()
    consult: Consult | None = None  # agent environments: whether the agent read the skill
    release: Callable[[], None] | None = field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.error is None

    def close(self) -> None:
        if self.release is not None:
            self.release()


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… [{len(text) - limit} more characters cut]"
