"""One optimizer call with a JSON answer: ask, and on an unusable reply ask once more.

Where the provider can constrain its reply to a schema, it is asked to (:mod:`models.structured`).
The retry shows the model its own bad reply and the validation error, so it can fix exactly that.
A provider failure (after the pool's own retries) or a second unusable reply becomes an
:class:`Answer` with ``error`` set: reflection, slow update and meta skill never raise for a
misbehaving optimizer, and never let a malformed reply reach the skill. A ``RuntimeFailure``
(e.g. a replay-only cache miss) is a run-level problem and propagates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from skillopt_ci.core.errors import ProviderError
from skillopt_ci.models.base import Message, ModelCaller, Usage
from skillopt_ci.models.structured import ReplyFormat
from skillopt_ci.train.optimizer.proposals import ProposalError

ROLE = "optimizer"
T = TypeVar("T")


@dataclass(frozen=True)
class Answer(Generic[T]):
    """``value`` is the parsed reply, or ``None`` with ``error`` saying why; ``attempts`` counts
    model calls made (1 or 2; a provider failure counts as an attempt)."""

    value: T | None
    error: str | None
    attempts: int
    usage: Usage = field(default_factory=Usage)


def retry_message(error: str) -> str:
    return f"Your reply could not be used: {error.rstrip('.')}. Answer again with only the JSON object."


def text_reply(name: str, *fields: str) -> ReplyFormat:
    """The reply format of an object with the given string fields, all required."""
    return ReplyFormat(name, {"type": "object", "required": list(fields),
                              "properties": {f: {"type": "string"} for f in fields}})


async def ask_json(models: ModelCaller, messages: list[Message], parse: Callable[[str], T],
                   reply: ReplyFormat | None = None) -> Answer[T]:
    """Call the optimizer role (``sample_index`` 0) with ``messages``; ``parse`` turns the reply
    text into a value or raises :class:`ProposalError`. At most two calls. ``reply`` is the
    reply's schema, asked for through the provider's own mechanism where the optimizer model's
    ``structured_output`` setting allows (``parse`` still checks every reply)."""
    usage = Usage()
    turns = list(messages)
    error = ""
    for attempt in (1, 2):
        try:
            completion = await (models.complete(ROLE, turns, sample_index=0, reply=reply) if reply is not None
                                else models.complete(ROLE, turns, sample_index=0))
        except ProviderError as exc:
            return Answer(None, f"optimizer call failed: {exc}", attempt, usage)
        usage = usage + completion.usage
        try:
            return Answer(parse(completion.text), None, attempt, usage)
        except ProposalError as exc:
            error = exc.message
        turns = [*messages, Message("assistant", completion.text), Message("user", retry_message(error))]
    return Answer(None, f"unusable optimizer reply after a retry: {error}", 2, usage)
