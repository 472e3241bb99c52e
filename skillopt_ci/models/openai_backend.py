"""OpenAI Chat Completions: ``openai``, ``azure-openai`` and ``openai-compatible`` (vLLM, Ollama…).

One client per backend, reused for every call. We send the body through the client's documented
low-level ``post`` (auth, base URL, Azure deployment routing and error classes stay the SDK's)
and read the few fields we need from the raw JSON: the SDK's per-call parameter transformation
and typed response objects cost more CPU than the rest of a rollout (bench/bench_eval.py).

Wire format: plain messages are sent as ``{"role", "content"}`` exactly as before tools existed.
Images are ``image_url`` parts holding data URLs; an assistant turn's calls are ``tool_calls``
(content ``null`` when it has no text); a tool result is a ``role: tool`` message (Chat
Completions has no error flag, so a failed tool's text is prefixed with ``Error:``). Images a tool
returned follow its results in one user message, because only user turns may carry images.
Tools are ``{"type": "function", "function": {name, description, parameters}}``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from skillopt_ci.models.base import Completion, ImagePart, Message, ToolCall, ToolSpec
from skillopt_ci.models.endpoint import Endpoint
from skillopt_ci.models.provider_http import PostingBackend, completion, malformed
from skillopt_ci.models.structured import ReplyFormat, chat_fields


class OpenAIBackend(PostingBackend):
    path = "/chat/completions"

    def __init__(self, endpoint: Endpoint, *, timeout: float):
        import openai

        self.provider = endpoint.provider
        self.model = endpoint.model
        self._sdk = openai
        if endpoint.provider == "azure-openai":
            self._client = openai.AsyncAzureOpenAI(
                azure_endpoint=endpoint.base_url or "",
                api_version=endpoint.api_version,
                api_key=endpoint.api_key,
                timeout=timeout,
                max_retries=0,
            )
        else:
            self._client = openai.AsyncOpenAI(
                api_key=endpoint.api_key, base_url=endpoint.base_url, timeout=timeout, max_retries=0
            )

    def parse(self, content: bytes, latency: float) -> Completion:
        return parse_chat_completion(content, latency)

    def request_body(self, messages: list[Message], params: dict[str, Any], tools: Sequence[ToolSpec] = (),
                     reply: ReplyFormat | None = None) -> dict[str, Any]:
        """The Chat Completions body of one call (a batch line carries the same body)."""
        body = {**params, "model": self.model, "messages": chat_messages(messages)}
        if tools:
            body["tools"] = [chat_tool(t) for t in tools]
        if reply is not None:
            body.update(chat_fields(reply, self.provider))
        return body


def error_text(message: Message) -> str:
    """A tool result's text, marked as an error for wire formats without an error flag."""
    text = message.text
    if message.is_error and not text.lower().startswith("error"):
        return f"Error: {text}"
    return text


def chat_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages in the Chat Completions shape (plain ones exactly as ``Message.to_dict``)."""
    out: list[dict[str, Any]] = []
    pending: list[ImagePart] = []  # images from tool results, sent after the run of tool messages
    for m in messages:
        if m.role != "tool" and pending:
            out.append({"role": "user", "content": [_image_url(p) for p in pending]})
            pending = []
        if m.plain:
            out.append(m.to_dict())
        elif m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": error_text(m)})
            pending.extend(m.images)
        elif m.tool_calls:
            out.append({"role": "assistant", "content": m.text or None, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in m.tool_calls]})
        else:
            out.append({"role": m.role, "content": _chat_parts(m)})
    if pending:
        out.append({"role": "user", "content": [_image_url(p) for p in pending]})
    return out


def _chat_parts(message: Message) -> str | list[dict[str, Any]]:
    if isinstance(message.content, str):
        return message.content
    return [_image_url(p) if isinstance(p, ImagePart) else {"type": "text", "text": p}
            for p in message.content if not isinstance(p, str) or p]


def _image_url(part: ImagePart) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": part.data_url}}


def chat_tool(tool: ToolSpec) -> dict[str, Any]:
    return {"type": "function", "function": tool.to_dict()}


def parse_chat_completion(content: bytes, latency: float) -> Completion:
    """Read text, tool calls, usage and finish reason from a Chat Completions response body."""
    try:
        data = json.loads(content)
        choice = data["choices"][0]
        message = choice["message"]
        text = message.get("content") or message.get("refusal") or ""  # a refusal is what it said
        finish = choice.get("finish_reason")
        calls = tuple(_tool_call(c, i) for i, c in enumerate(message.get("tool_calls") or ()))
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise malformed(content) from None
    return completion(data, latency, text, calls, finish, ("prompt_tokens", "completion_tokens"))


def _tool_call(call: dict[str, Any], index: int) -> ToolCall:
    """One ``tool_calls`` entry. Some compatible servers leave out the id or send the arguments
    as an object; both are accepted rather than losing the call."""
    function = call["function"]
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = "" if arguments is None else json.dumps(arguments, ensure_ascii=False)
    return ToolCall(id=str(call.get("id") or f"call_{index}"), name=str(function["name"]), arguments=arguments)


