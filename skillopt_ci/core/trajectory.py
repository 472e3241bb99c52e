"""A rollout is a trajectory: what the agent did (steps), what it ended with (output, files,
reward), what it cost, and a bounded text rendering the optimizer reads.

Pure records. Environments (``skillopt_ci.envs``) build them; the engine turns one into a
:class:`~skillopt_ci.core.records.TaskResult` after the scorer has seen it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillopt_ci.core.records import Usage

STEP_KINDS = ("model", "tool_call", "tool_result", "observation", "action", "error")
STEP_TEXT_LIMIT = 8_000  # characters of one step kept in results.jsonl (the rendering has its own budget)


@dataclass(frozen=True)
class Step:
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
    text: str = ""
    name: str | None = None
    arguments: str | None = None
    call_id: str | None = None
    is_error: bool = False
    reward: float | None = None
    done: bool | None = None
    images: tuple[str, ...] = ()
    usage: Usage | None = None
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Only the fields that say something (results.jsonl stays small); text is cut at
        ``STEP_TEXT_LIMIT`` characters with a note of how much was dropped."""
        data: dict[str, Any] = {"kind": self.kind}
        if self.text:
            data["text"] = _cut(self.text, STEP_TEXT_LIMIT)
        for key in ("name", "arguments", "call_id", "reward", "done"):
            value = getattr(self, key)
            if value is not None:
                data[key] = _cut(value, STEP_TEXT_LIMIT) if key == "arguments" else value
        if self.is_error:
            data["is_error"] = True
        if self.images:
            data["images"] = list(self.images)
        if self.usage is not None:
            data["usage"] = self.usage.to_dict()
        data["elapsed_s"] = round(self.elapsed_s, 4)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Step:
        return cls(
            kind=str(data["kind"]),
            text=str(data.get("text", "")),
            name=data.get("name"),
            arguments=data.get("arguments"),
            call_id=data.get("call_id"),
            is_error=bool(data.get("is_error", False)),
            reward=data.get("reward"),
            done=data.get("done"),
            images=tuple(data.get("images") or ()),
            usage=Usage.from_dict(data["usage"]) if data.get("usage") else None,
            elapsed_s=float(data.get("elapsed_s", 0.0)),
        )


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
