"""What a provider's batch API offers the batch machinery (:mod:`skillopt_ci.models.batch`):
:class:`BatchClient`, and :class:`SpeaksBackend`, the lines of a batch as its backend's own
requests and responses. The clients (``batch_openai``, ``batch_anthropic``) implement it and
import this module, never the dispatcher; a provider's record names its client
(:class:`skillopt_ci.models.registry.Provider`), which :func:`skillopt_ci.models.batch.batch_client` builds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from skillopt_ci.core.errors import ProviderError
from skillopt_ci.models.base import Completion, Message, ToolSpec


class BatchClient(Protocol):
    """One provider's batch API, on the SDK client of the role's backend."""

    provider: str

    def request_body(self, messages: list[Message], params: dict[str, Any], tools: Sequence[ToolSpec],
                     reply: Any) -> dict[str, Any]: ...

    def read(self, content: bytes, latency: float, reply: Any) -> Completion: ...

    async def submit(self, lines: list[tuple[str, dict[str, Any]]]) -> str: ...

    async def ended(self, batch_id: str) -> bool: ...

    async def results(self, batch_id: str) -> dict[str, bytes | ProviderError]: ...


class SpeaksBackend:
    """A batch client's lines are its backend's own requests and responses: the same body a
    synchronous call sends, read the same way; its calls go through the backend's SDK client."""

    def __init__(self, backend: Any):
        self.backend, self.provider = backend, backend.provider
        self._client: Any = backend._client
        self._sdk: Any = backend._sdk

    def request_body(self, messages: list[Message], params: dict[str, Any], tools: Sequence[ToolSpec],
                     reply: Any) -> dict[str, Any]:
        return self.backend.request_body(messages, params, tools, reply)

    def read(self, content: bytes, latency: float, reply: Any) -> Completion:
        return self.backend.read(content, latency, reply)
