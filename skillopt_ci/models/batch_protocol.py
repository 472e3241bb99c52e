"""What a provider's batch API offers the batch machinery (:mod:`skillopt_ci.models.batch`):
:class:`BatchClient`. The clients (``batch_openai``, ``batch_anthropic``) subclass it and import
this module, never the dispatcher; a provider's record names its client
(:class:`skillopt_ci.models.registry.Provider`), which :func:`skillopt_ci.models.batch.batch_client` builds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from skillopt_ci.core.errors import ProviderError
from skillopt_ci.models.base import Completion, Message, ToolSpec


class BatchClient:
    """One provider's batch API, on the SDK client of the role's backend. Its lines are the
    backend's own requests and responses: the same body a synchronous call sends, read the same
    way. A client gives ``submit`` (the lines by ``custom_id``; the batch id), ``ended`` (whether
    the batch is done) and ``results`` (``custom_id`` → response body or error; ``"*"``: every
    line's)."""

    submit: Callable[[list[tuple[str, dict[str, Any]]]], Awaitable[str]]
    ended: Callable[[str], Awaitable[bool]]
    results: Callable[[str], Awaitable[dict[str, bytes | ProviderError]]]

    def __init__(self, backend: Any):
        self.backend, self.provider = backend, backend.provider
        self._client: Any = backend._client
        self._sdk: Any = backend._sdk

    def request_body(self, messages: list[Message], params: dict[str, Any], tools: Sequence[ToolSpec],
                     reply: Any) -> dict[str, Any]:
        return self.backend.request_body(messages, params, tools, reply)

    def read(self, content: bytes, latency: float, reply: Any) -> Completion:
        return self.backend.read(content, latency, reply)
