"""The one small model interface every provider implements: messages in, text and usage out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


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
class Usage:
    """Token counts. ``None`` means the server did not say (some servers omit usage)."""

    input_tokens: int | None = None
    output_tokens: int | None = None

    def to_dict(self) -> dict[str, int | None]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Usage:
        data = data or {}
        return cls(input_tokens=data.get("input_tokens"), output_tokens=data.get("output_tokens"))

    def __add__(self, other: Usage) -> Usage:
        def add(a: int | None, b: int | None) -> int | None:
            if a is None and b is None:
                return None
            return (a or 0) + (b or 0)

        return Usage(add(self.input_tokens, other.input_tokens), add(self.output_tokens, other.output_tokens))


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
