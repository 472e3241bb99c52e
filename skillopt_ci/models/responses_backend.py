"""The OpenAI Responses API (``POST /responses``), chosen by ``api: responses`` on a model spec of
the ``openai``, ``azure-openai`` or ``openai-compatible`` provider. Many new models speak only it.

Wire format: system messages become ``instructions``; the other turns are ``input`` items — a
message ``{"role", "content"}`` (text as a string; with images a list of ``input_text`` and
``input_image`` parts holding data URLs), each tool call a ``function_call`` item and each tool
result a ``function_call_output`` item (no error flag exists, so a failed tool's output is
prefixed with ``Error:``; images a tool returned follow as one user message). Tools are function
tools with ``strict: false`` (schemas from type hints need not meet strict mode's rules).
``max_tokens`` in ``params`` is sent as ``max_output_tokens``, and ``store`` defaults to false:
every call sends the whole conversation, nothing is kept on the provider's side.

The reply's ``output`` is read raw: ``output_text`` parts of ``message`` items are the text,
``function_call`` items the tool calls (``call_id`` is the id a result must answer); reasoning
items are skipped. ``finish_reason`` is "tool_calls" when it called a tool, "stop" when it
completed, else the ``incomplete_details`` reason (``max_output_tokens``, ``content_filter``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from skillopt_ci.models.base import Completion, ImagePart, Message, ToolCall, ToolSpec
from skillopt_ci.models.openai_backend import OpenAIBackend, error_text
from skillopt_ci.models.provider_http import completion, malformed
from skillopt_ci.models.structured import ReplyFormat, responses_fields


class ResponsesBackend(OpenAIBackend):
    """Same client, auth and error mapping as Chat Completions; another route, body and reply."""

    path = "/responses"

    def parse(self, content: bytes, latency: float) -> Completion:
        return parse_response(content, latency)

    def request_body(self, messages: list[Message], params: dict[str, Any], tools: Sequence[ToolSpec] = (),
                     reply: ReplyFormat | None = None) -> dict[str, Any]:
        body = responses_body(self.model, messages, params, tools)
        if reply is not None:
            body.update(responses_fields(reply, self.provider))
        return body


def responses_body(
    model: str, messages: Sequence[Message], params: dict[str, Any], tools: Sequence[ToolSpec]
) -> dict[str, Any]:
    body: dict[str, Any] = {"store": False, **params, "model": model}
    if "max_tokens" in body:
        body["max_output_tokens"] = body.pop("max_tokens")
    system = "\n\n".join(m.text for m in messages if m.role == "system")
    if system:
        body["instructions"] = system
    body["input"] = input_items([m for m in messages if m.role != "system"])
    if tools:
        body["tools"] = [{"type": "function", **t.to_dict(), "strict": False} for t in tools]
    return body


def input_items(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Turns as Responses ``input`` items."""
    items: list[dict[str, Any]] = []
    pending: list[ImagePart] = []
    for m in messages:
        if m.role != "tool" and pending:
            items.append({"role": "user", "content": [_input_image(p) for p in pending]})
            pending = []
        if m.role == "tool":
            items.append({"type": "function_call_output", "call_id": m.tool_call_id, "output": error_text(m)})
            pending.extend(m.images)
            continue
        if m.text or m.images or not m.tool_calls:
            items.append({"role": m.role, "content": _content(m)})
        items.extend({"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
                     for c in m.tool_calls)
    if pending:
        items.append({"role": "user", "content": [_input_image(p) for p in pending]})
    return items


def _content(message: Message) -> str | list[dict[str, Any]]:
    if not message.images:
        return message.text
    text_type = "output_text" if message.role == "assistant" else "input_text"
    return [_input_image(p) if isinstance(p, ImagePart) else {"type": text_type, "text": p}
            for p in message.content if not isinstance(p, str) or p]


def _input_image(part: ImagePart) -> dict[str, Any]:
    return {"type": "input_image", "image_url": part.data_url, "detail": "auto"}


def parse_response(content: bytes, latency: float) -> Completion:
    """Read text, tool calls, usage and finish reason from a Responses API body."""
    try:
        data = json.loads(content)
        texts: list[str] = []
        calls: list[ToolCall] = []
        for item in data["output"]:
            if item.get("type") == "message":
                texts.extend(p.get("text") or p.get("refusal") or "" for p in item.get("content") or ()
                             if p.get("type") in ("output_text", "refusal"))
            elif item.get("type") == "function_call":
                calls.append(ToolCall(id=str(item["call_id"]), name=str(item["name"]),
                                      arguments=str(item.get("arguments") or "")))
        status = data.get("status")
        reason = (data.get("incomplete_details") or {}).get("reason")
    except (ValueError, KeyError, TypeError, AttributeError):
        raise malformed(content) from None
    if calls:
        finish = "tool_calls"
    elif status == "completed":
        finish = "stop"
    else:
        finish = reason or status
    return completion(data, latency, "".join(texts), calls, finish)
