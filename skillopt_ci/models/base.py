"""The one small model interface every provider implements: messages in, text and usage out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

# Usage is a record of the core (results carry it); the model interface returns it.
from skillopt_ci.core.records import Usage


@dataclass(frozen=True)
class Message:
    role: str  # "system" | "user" | "assistant"
    content: str

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        return cls(role=str(data["role"]), content=str(data["content"]))


@dataclass(frozen=True)
class Completion:
    """What one model call returned."""

    text: str
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    latency_s: float = 0.0
    cached: bool = False
    cost_usd: float | None = None


class Backend(Protocol):
    """A provider adapter. ``complete`` makes exactly one attempt; retries live in one place above.

    It raises :class:`skillopt_ci.core.errors.ProviderError` (with ``retryable`` set) on failure and
    never returns partial text as success.
    """

    provider: str

    async def complete(self, messages: list[Message], params: dict[str, Any]) -> Completion: ...

    async def aclose(self) -> None: ...


class ModelCaller(Protocol):
    """What scorers and the engine use to call a model by role, through cache and retries.

    ``sample_index`` distinguishes repeats, so that repeated samples are real samples and not
    cache hits of the first one.
    """

    async def complete(self, role: str, messages: list[Message], sample_index: int = 0) -> Completion: ...
