"""The ``chat`` environment: one model call. The skill body is the system message, the prompt the
user turn (with the task's images as image parts, when it has any).

The messages of a text-only task are exactly what every version before environments sent, and
``chat`` passes no tools and no context to the pool, so the response cache keys of existing runs
still hit. A chat rollout records no steps (its trajectory is the prompt and the output, which
the result already holds) unless it showed images: then one observation step names them, so
viewers can show them.
"""

from __future__ import annotations

import time
from typing import ClassVar

from skillopt_ci.core.errors import ProviderError
from skillopt_ci.core.messages import Message, Part
from skillopt_ci.core.skill import Skill
from skillopt_ci.core.trajectory import Rollout, Step
from skillopt_ci.envs.base import BaseEnvironment, RolloutRequest, keep_image, task_images
from skillopt_ci.models.base import ModelCaller, call_totals


def chat_messages(skill: Skill, prompt: str | tuple[Part, ...]) -> list[Message]:
    """The skill body as the system message (left out when empty), the prompt as the user turn."""
    system = skill.body.strip()
    user = Message("user", prompt)
    return [Message("system", system), user] if system else [user]


class ChatEnvironment(BaseEnvironment):
    name: ClassVar[str] = "chat"

    @property
    def is_default(self) -> bool:
        return True

    async def run(self, request: RolloutRequest, models: ModelCaller) -> Rollout:
        started = time.perf_counter()
        images = task_images(request.task, request.suite_dir)
        prompt: str | tuple[Part, ...] = (request.prompt, *images) if images else request.prompt
        steps: tuple[Step, ...] = ()
        if images:
            names = tuple(keep_image(image, request.image_dir) for image in images)
            steps = (Step("observation", text=request.prompt, images=names),)
        try:
            completion = await models.complete("target", chat_messages(request.skill, prompt),
                                               sample_index=request.sample_index)
        except ProviderError as exc:
            return Rollout(output="", steps=steps, error={"kind": exc.kind, "message": exc.message},
                           wall_s=time.perf_counter() - started)
        return Rollout(
            output=completion.text,
            steps=steps,
            **call_totals([completion]),
            wall_s=time.perf_counter() - started,
            finish_reason=completion.finish_reason,
        )
