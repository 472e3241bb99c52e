"""Anthropic Messages. System messages become the ``system`` field; the body goes through the
client's low-level ``post`` and the raw JSON is parsed by us (see :mod:`openai_backend`)."""

from __future__ import annotations

import json
import time
from typing import Any

from skillopt_ci.core.errors import ProviderError
from skillopt_ci.models.base import Completion, Message, Usage
from skillopt_ci.models.openai_backend import to_provider_error
from skillopt_ci.models.registry import Endpoint

DEFAULT_MAX_TOKENS = 1024
class AnthropicBackend:
    provider = "anthropic"

    def __init__(self, endpoint: Endpoint, *, timeout: float):
        import anthropic

        self.model = endpoint.model
        self._anthropic = anthropic
        self._client = anthropic.AsyncAnthropic(
            api_key=endpoint.api_key, base_url=endpoint.base_url, timeout=timeout, max_retries=0
        )

    async def complete(self, messages: list[Message], params: dict[str, Any]) -> Completion:
        body: dict[str, Any] = {"max_tokens": DEFAULT_MAX_TOKENS, **params, "model": self.model}
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        if system:
            body["system"] = system
        body["messages"] = [m.to_dict() for m in messages if m.role != "system"]
        started = time.perf_counter()
        try:
            content = await self._client.post("/v1/messages", cast_to=bytes, body=body)
        except self._anthropic.APIError as exc:
            raise to_provider_error(self._anthropic, exc) from None
        return parse_message(content, time.perf_counter() - started)

    async def aclose(self) -> None:
        await self._client.close()


def parse_message(content: bytes, latency: float) -> Completion:
    """Read the text blocks, usage and stop reason from a Messages response body."""
    try:
        data = json.loads(content)
        text = "".join(block.get("text", "") for block in data["content"] if block.get("type") == "text")
        stop = data.get("stop_reason")
    except (ValueError, KeyError, TypeError, AttributeError):
        snippet = content[:120].decode("utf-8", "replace")
        raise ProviderError("malformed", f"unreadable response body: {snippet!r}", retryable=True) from None
    usage = data.get("usage") or {}
    return Completion(
        text=text,
        usage=Usage(usage.get("input_tokens"), usage.get("output_tokens")),
        finish_reason=stop,
        latency_s=latency,
    )
