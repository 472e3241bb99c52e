"""Anthropic Messages. System messages become the ``system`` field; the body goes through the
client's low-level ``post`` and the raw JSON is parsed by us (see :mod:`openai_backend`).

Wire format: plain messages are sent as ``{"role", "content"}`` exactly as before tools existed.
Images are base64 ``image`` blocks; an assistant turn's calls are ``tool_use`` blocks (``input``
is the parsed arguments); tool results are ``tool_result`` blocks with ``is_error``, and
consecutive results share one user turn, as the API requires. Tools carry ``input_schema``. A
reply's ``tool_use`` blocks become tool calls whose arguments are the ``input`` as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from skillopt_ci.models.base import Completion, ImagePart, Message, ToolCall, ToolSpec
from skillopt_ci.models.endpoint import Endpoint
from skillopt_ci.models.provider_http import PostingBackend, completion, malformed
from skillopt_ci.models.structured import ReplyFormat, anthropic_fields

DEFAULT_MAX_TOKENS = 1024


class AnthropicBackend(PostingBackend):
    provider = "anthropic"
    path = "/v1/messages"

    def __init__(self, endpoint: Endpoint, *, timeout: float):
        import anthropic

        self.model = endpoint.model
        self._sdk = anthropic
        self._client = anthropic.AsyncAnthropic(
            api_key=endpoint.api_key, base_url=endpoint.base_url, timeout=timeout, max_retries=0
        )

    def parse(self, content: bytes, latency: float) -> Completion:
        return parse_message(content, latency)

    def request_body(self, messages: list[Message], params: dict[str, Any], tools: Sequence[ToolSpec] = (),
                     reply: ReplyFormat | None = None) -> dict[str, Any]:
        """The Messages body of one call (a batch request carries the same ``params``)."""
        body: dict[str, Any] = {"max_tokens": DEFAULT_MAX_TOKENS, **params, "model": self.model}
        system = "\n\n".join(m.text for m in messages if m.role == "system")
        if system:
            body["system"] = system
        body["messages"] = anthropic_messages([m for m in messages if m.role != "system"])
        if tools:
            body["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                             for t in tools]
        if reply is not None:  # Messages has no response format: a forced call of one tool
            body.update(anthropic_fields(reply))
        return body


def anthropic_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Turns in the Messages shape (plain ones exactly as ``Message.to_dict``)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": _blocks(m.content) if m.images else m.text,
                     "is_error": m.is_error}
            previous = out[-1] if out else None
            if previous and previous["role"] == "user" and _all_results(previous["content"]):
                previous["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif m.plain:
            out.append(m.to_dict())
        elif m.tool_calls:
            uses = [{"type": "tool_use", "id": c.id, "name": c.name, "input": _input(c)} for c in m.tool_calls]
            out.append({"role": m.role, "content": _blocks(m.content) + uses})
        else:
            out.append({"role": m.role, "content": _blocks(m.content)})
    return out


def _all_results(content: Any) -> bool:
    return isinstance(content, list) and all(b.get("type") == "tool_result" for b in content)


def _blocks(content: str | tuple[str | ImagePart, ...]) -> list[dict[str, Any]]:
    """Text and image blocks; empty text is left out (the API refuses empty text blocks)."""
    parts = (content,) if isinstance(content, str) else content
    return [
        {"type": "image", "source": {"type": "base64", "media_type": p.media_type, "data": p.base64}}
        if isinstance(p, ImagePart) else {"type": "text", "text": p}
        for p in parts if not isinstance(p, str) or p
    ]


def _input(call: ToolCall) -> dict[str, Any]:
    """The call's arguments as an object; arguments that are not one are kept under ``arguments``
    so the model still sees what it wrote."""
    try:
        return call.parsed_arguments()
    except ValueError:
        return {"arguments": call.arguments}


def parse_message(content: bytes, latency: float) -> Completion:
    """Read the text blocks, tool_use blocks, usage and stop reason from a Messages response body."""
    try:
        data = json.loads(content)
        blocks = data["content"]
        text = "".join(block.get("text", "") for block in blocks if block.get("type") == "text")
        calls = tuple(
            ToolCall(id=str(b["id"]), name=str(b["name"]), arguments=json.dumps(b.get("input") or {}, ensure_ascii=False))
            for b in blocks if b.get("type") == "tool_use"
        )
        stop = data.get("stop_reason")
    except (ValueError, KeyError, TypeError, AttributeError):
        raise malformed(content) from None
    return completion(data, latency, text, calls, stop)
