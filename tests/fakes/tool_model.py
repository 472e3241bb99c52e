"""A scripted ModelCaller for environment tests: it returns queued Completions (or what a
function of the messages returns, or raises a queued exception) and records every call it got.

    model = ScriptedCaller(turn(call("read_file", path="a.csv")), reply("42"))
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skillopt_ci.core.messages import Message, ToolCall, ToolSpec
from skillopt_ci.models.base import Completion, Usage

_ids = itertools.count(1)


def call(name: str, arguments: dict[str, Any] | str | None = None, **kwargs: Any) -> ToolCall:
    """A tool call; ``arguments`` as given when it is a string (to send bad JSON)."""
    args = arguments if isinstance(arguments, str) else json.dumps({**(arguments or {}), **kwargs})
    return ToolCall(id=f"call_{next(_ids)}", name=name, arguments=args)


def turn(*calls: ToolCall, text: str = "") -> Completion:
    return Completion(text, Usage(100, 10), "tool_calls", latency_s=0.5, cost_usd=0.001, tool_calls=calls)


def reply(text: str) -> Completion:
    return Completion(text, Usage(120, 5), "stop", latency_s=0.25, cost_usd=0.002)


@dataclass
class Received:
    role: str
    messages: list[Message]
    sample_index: int
    tools: tuple[ToolSpec, ...]
    context: Any


@dataclass
class ScriptedCaller:
    script: list[Completion | Exception | Callable[[list[Message]], Completion]] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    default: Completion | None = None

    def __init__(self, *script: Any, default: Completion | None = None):
        self.script = list(script)
        self.received = []
        self.default = default

    async def complete(self, role: str, messages: list[Message], sample_index: int = 0, *,
                       tools: Any = (), context: Any = None) -> Completion:
        self.received.append(Received(role, list(messages), sample_index, tuple(tools), context))
        if not self.script:
            if self.default is None:
                raise AssertionError("the model was called more often than scripted")
            return self.default
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return step(messages) if callable(step) else step
