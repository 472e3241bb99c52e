"""Environments: what turns (skill, task, model caller, sample index) into a rollout, and the
plug-in API for a team's own environment.

A plug-in imports everything it needs from this package alone::

    from skillopt_ci.envs import BaseEnvironment, Message, ProviderError, Rollout, Step

    class Echo(BaseEnvironment):
        name = "echo"

        async def run(self, request, models):
            try:
                reply = await models.complete("target", [Message("user", request.prompt)],
                                              sample_index=request.sample_index)
            except ProviderError as exc:
                return Rollout(output="", error={"kind": exc.kind, "message": exc.message})
            return Rollout(output=reply.text, steps=(Step("model", text=reply.text),), usage=reply.usage)

and declares it in the ``skillopt_ci.environments`` entry-point group (``echo =
"my_pkg.env:Echo"``). The names below are the stable surface; the modules behind them may move.

The names are loaded on first use (PEP 562), so importing one environment module, or the
package itself, does not load the sandbox and the model interface behind ``BaseEnvironment``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the names are, for type checkers; at run time ``__getattr__`` loads them
    from skillopt_ci.core.errors import InputError, ProviderError
    from skillopt_ci.core.messages import ImagePart, Message, Part, ToolCall, ToolSpec
    from skillopt_ci.core.options import NoOptions
    from skillopt_ci.core.records import Usage
    from skillopt_ci.core.skill import Skill
    from skillopt_ci.core.task import Task
    from skillopt_ci.core.trajectory import STEP_KINDS, Rollout, Step
    from skillopt_ci.envs.base import (
        BaseEnvironment,
        Environment,
        RolloutRequest,
        keep_image,
        task_images,
        task_workspace,
    )
    from skillopt_ci.envs.registry import ENTRY_POINT_GROUP
    from skillopt_ci.models.base import Completion, ModelCaller

#: Each public name and the module that defines it.
_HOMES: dict[str, str] = {
    **dict.fromkeys(("BaseEnvironment", "Environment", "RolloutRequest", "keep_image", "task_images",
                     "task_workspace"), "skillopt_ci.envs.base"),
    "ENTRY_POINT_GROUP": "skillopt_ci.envs.registry",
    **dict.fromkeys(("Rollout", "Step", "STEP_KINDS"), "skillopt_ci.core.trajectory"),
    **dict.fromkeys(("Message", "Part", "ImagePart", "ToolCall", "ToolSpec"), "skillopt_ci.core.messages"),
    **dict.fromkeys(("InputError", "ProviderError"), "skillopt_ci.core.errors"),
    "NoOptions": "skillopt_ci.core.options",
    "Usage": "skillopt_ci.core.records",
    "Skill": "skillopt_ci.core.skill",
    "Task": "skillopt_ci.core.task",
    **dict.fromkeys(("Completion", "ModelCaller"), "skillopt_ci.models.base"),
}

__all__ = [
    "BaseEnvironment",
    "Completion",
    "ENTRY_POINT_GROUP",
    "Environment",
    "ImagePart",
    "InputError",
    "Message",
    "ModelCaller",
    "NoOptions",
    "Part",
    "ProviderError",
    "Rollout",
    "RolloutRequest",
    "STEP_KINDS",
    "Skill",
    "Step",
    "Task",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "keep_image",
    "task_images",
    "task_workspace",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'skillopt_ci.envs' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # the next look-up is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
