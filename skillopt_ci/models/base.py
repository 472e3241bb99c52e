"""The one small model interface every provider implements: messages (and tools) in; text, tool
calls and usage out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

# Messages and Usage are records of the core (rollouts carry them); the model interface uses them.
from skillopt_ci.core.messages import ImagePart, Message, ToolCall, ToolSpec
from skillopt_ci.core.records import Usage

__all__ = ["Backend", "Completion", "ImagePart", "Message", "ModelCaller", "ToolCall", "ToolSpec", "Usage", "call_totals"]


@dataclass(frozen=True)
class Completion:
    """What one model call returned: its text (may be empty when it only calls tools), the tool
    calls it asked for, and why it stopped (``finish_reason`` as the provider said it)."""

    text: str
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    latency_s: float = 0.0
    cached: bool = False
    cost_usd: float | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    rate: Any = None  # the provider's rate-limit counters on this response (limiter.RateInfo), never cached


class CallTotals(TypedDict):
    """What a rollout's model calls add up to, as :class:`~skillopt_ci.core.trajectory.Rollout` fields."""

    usage: Usage
    cost_usd: float | None
    latency_s: float
    cached: bool


def call_totals(calls: Sequence[Completion], latency: float = 0) -> CallTotals:
    """``calls`` summed: usage and latency (from ``latency``: the tools environment counts from
    0.0), the cost (``None`` without calls or when one's is unknown), cached when every call was."""
    usage = Usage()
    for c in calls:
        usage = usage + c.usage
    costs = [c.cost_usd for c in calls if c.cost_usd is not None]
    return CallTotals(usage=usage, cost_usd=sum(costs) if calls and len(costs) == len(calls) else None,
                      latency_s=sum((c.latency_s for c in calls), latency),
                      cached=bool(calls) and all(c.cached for c in calls))

class Backend(Protocol):
    """A provider adapter. ``complete`` makes exactly one attempt; retries live in one place above.

    It raises :class:`skillopt_ci.core.errors.ProviderError` (with ``retryable`` set) on failure and
    never returns partial text as success.
    """

    provider: str

    async def complete(
        self, messages: list[Message], params: dict[str, Any], tools: Sequence[ToolSpec] = (),
        reply: Any = None,
    ) -> Completion: ...

    async def aclose(self) -> None: ...


class ModelCaller(Protocol):
    """What scorers and the engine use to call a model by role, through cache and retries.

    ``sample_index`` distinguishes repeats, so that repeated samples are real samples and not
    cache hits of the first one. ``tools`` are offered to the model (they are part of the cache
    key); ``context`` (an environment's identity) joins the cache key when given; ``reply`` (a
    :class:`~skillopt_ci.models.structured.ReplyFormat`) asks for a JSON reply of its schema through
    the provider's own mechanism, as the model's ``structured_output`` setting says.
    """

    async def complete(
        self,
        role: str,
        messages: list[Message],
        sample_index: int = 0,
        *,
        tools: Sequence[ToolSpec] = (),
        context: Mapping[str, Any] | None = None,
        reply: Any = None,
    ) -> Completion: ...
