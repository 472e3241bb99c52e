"""Wire formats spoken by the scripted model server.

Parsing turns an OpenAI, Azure OpenAI or Anthropic request body into one
:class:`ScriptedRequest`; formatting turns a :class:`ScriptedReply`, an error or a
:class:`Fault` into the response that provider's SDK parses. No I/O happens here.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

PROTOCOLS = ("openai", "azure", "anthropic")

_AZURE_PATH = re.compile(r"^/openai/deployments/([^/]+)/chat/completions$")
_MALFORMED_BODY = b'{"id": "broken", "choices": [{"message": {"content": "unterminated'

_TO_ANTHROPIC_STOP = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}
_TO_OPENAI_FINISH = {v: k for k, v in _TO_ANTHROPIC_STOP.items()} | {"stop_sequence": "stop"}

# status -> (OpenAI error type, OpenAI error code, Anthropic error type)
_ERROR_KINDS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "invalid_request_error"),
    401: ("invalid_request_error", "invalid_api_key", "authentication_error"),
    403: ("invalid_request_error", None, "permission_error"),
    404: ("invalid_request_error", None, "not_found_error"),
    413: ("invalid_request_error", None, "request_too_large"),
    429: ("requests", "rate_limit_exceeded", "rate_limit_error"),
    500: ("server_error", None, "api_error"),
    529: ("server_error", "overloaded", "overloaded_error"),
}


class RequestError(Exception):
    """A request the real provider would refuse; ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class ScriptedRequest:
    """One model call as a policy sees it, whatever protocol carried it.

    ``system`` joins the OpenAI ``system``/``developer`` messages with blank lines, or holds
    Anthropic's ``system`` field. Content given as a list of text parts/blocks is joined with
    newlines; non-text parts are dropped. ``messages`` holds the other turns as
    ``{"role", "content"}`` with content flattened to text. ``params`` holds every other body
    field (temperature, max_tokens, seed, top_p, ...). ``model`` is the Azure deployment on Azure
    routes. ``headers`` has lower-cased names. ``call_index`` is the 0-based arrival order since
    the server started or was reset. ``body`` is the parsed JSON as sent.
    """

    protocol: str
    model: str
    system: str
    messages: list[dict[str, str]]
    params: dict[str, Any]
    headers: dict[str, str]
    call_index: int
    body: dict[str, Any]

    @property
    def last_user(self) -> str:
        """Text of the last user message, or "" when there is none."""
        for message in reversed(self.messages):
            if message["role"] == "user":
                return message["content"]
        return ""

    @property
    def prompt_tokens(self) -> int:
        """Whitespace-separated tokens in the system prompt and all messages."""
        return len(self.system.split()) + sum(len(m["content"].split()) for m in self.messages)


@dataclass
class ScriptedReply:
    """What a policy answers. A plain ``str`` from a policy means ``ScriptedReply(text)``.

    ``finish_reason`` uses OpenAI names ("stop", "length", ...) and is mapped to Anthropic's
    ``stop_reason`` ("end_turn", "max_tokens", ...); Anthropic names are mapped back for OpenAI.
    Token counts default to whitespace counts of the prompt and ``text``. ``omit_usage`` leaves
    ``usage`` out of the body. ``latency`` (seconds) overrides the server's latency for this reply.
    """

    text: str
    finish_reason: str = "stop"
    input_tokens: int | None = None
    output_tokens: int | None = None
    omit_usage: bool = False
    latency: float | None = None


def flatten_content(content: Any) -> str:
    """Text of a message content: a string, or a list of text parts/blocks joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (flatten_content(part) for part in content) if t)
    if isinstance(content, dict):
        if isinstance(content.get("text"), str):
            return content["text"]
        return flatten_content(content.get("content"))
    return str(content)


def parse_request(
    protocol: str, body: Any, headers: dict[str, str], deployment: str | None = None
) -> ScriptedRequest:
    """Build a request (``call_index`` -1) from a parsed body, or raise :class:`RequestError`."""
    if not isinstance(body, dict):
        raise RequestError(400, "The request body must be a JSON object.")
    if body.get("stream"):
        raise RequestError(400, "ScriptedModelServer does not support stream=true.")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) for m in raw_messages
    ):
        raise RequestError(400, "'messages' must be a list of objects with a 'role'.")
    model = deployment if protocol == "azure" else body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError(400, "'model' is required.")
    if protocol == "anthropic":
        if not isinstance(body.get("max_tokens"), int):
            raise RequestError(400, "max_tokens: Field required")
        system = flatten_content(body.get("system"))
        turns = raw_messages
        params = {k: v for k, v in body.items() if k not in ("model", "messages", "system")}
    else:
        system = "\n\n".join(
            flatten_content(m.get("content"))
            for m in raw_messages
            if m["role"] in ("system", "developer")
        )
        turns = [m for m in raw_messages if m["role"] not in ("system", "developer")]
        params = {k: v for k, v in body.items() if k not in ("model", "messages")}
    messages = [{"role": m["role"], "content": flatten_content(m.get("content"))} for m in turns]
    return ScriptedRequest(protocol, model, system, messages, params, headers, -1, body)


def format_reply(request: ScriptedRequest, reply: ScriptedReply) -> dict[str, Any]:
    """The success body for ``request.protocol``."""
    input_tokens = request.prompt_tokens if reply.input_tokens is None else reply.input_tokens
    output_tokens = len(reply.text.split()) if reply.output_tokens is None else reply.output_tokens
    if request.protocol == "anthropic":
        message: dict[str, Any] = {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": request.model,
            "content": [{"type": "text", "text": reply.text}],
            "stop_reason": _TO_ANTHROPIC_STOP.get(reply.finish_reason, reply.finish_reason),
            "stop_sequence": None,
        }
        if not reply.omit_usage:
            message["usage"] = {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            }
        return message
    completion: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.text, "refusal": None},
                "finish_reason": _TO_OPENAI_FINISH.get(reply.finish_reason, reply.finish_reason),
                "logprobs": None,
            }
        ],
    }
    if not reply.omit_usage:
        completion["usage"] = {
            "prompt_tokens": input_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        }
    return completion


def format_error(protocol: str, status: int, message: str) -> dict[str, Any]:
    """The error body for ``protocol``: OpenAI's ``{"error": {...}}`` or Anthropic's typed one."""
    default = ("server_error", None, "api_error") if status >= 500 else _ERROR_KINDS[400]
    openai_type, openai_code, anthropic_type = _ERROR_KINDS.get(status, default)
    if protocol == "anthropic":
        return {"type": "error", "error": {"type": anthropic_type, "message": message}}
    return {"error": {"message": message, "type": openai_type, "param": None, "code": openai_code}}


def request_id_header(protocol: str) -> tuple[str, str]:
    """The response header each provider uses for its request id, with a fresh id."""
    name = "request-id" if protocol == "anthropic" else "x-request-id"
    return name, f"req_{uuid.uuid4().hex[:24]}"


@dataclass(frozen=True)
class Fault:
    """One injected failure; it applies to exactly one request. Build it with the classmethods.

    ``kind`` is what :attr:`RecordedCall.fault` records. Except for ``slow``, a fault answers at
    once (without the server's latency) and the policy is not called.
    """

    kind: str
    http_status: int = 0
    message: str = ""
    retry_after: float | None = None
    delay: float = 0.0

    @classmethod
    def rate_limit(
        cls, retry_after: float | None = 1.0, message: str = "Rate limit reached."
    ) -> Fault:
        """429 with ``Retry-After`` (seconds, possibly fractional) and ``retry-after-ms``."""
        return cls("rate_limit", 429, message, retry_after)

    @classmethod
    def server_error(
        cls, status: int = 500, message: str = "The server had an error processing your request."
    ) -> Fault:
        return cls("server_error", status, message)

    @classmethod
    def overloaded(cls, message: str = "Overloaded") -> Fault:
        """529: Anthropic's ``overloaded_error`` (OpenAI error shape on OpenAI routes)."""
        return cls("overloaded", 529, message)

    @classmethod
    def status(cls, code: int, message: str = "Scripted error.") -> Fault:
        """Any status in the provider's error shape, e.g. 401 or 400."""
        return cls("status", code, message)

    @classmethod
    def slow(cls, seconds: float) -> Fault:
        """Answer normally, but only after ``seconds`` (instead of the server's latency)."""
        return cls("slow", delay=seconds)

    @classmethod
    def malformed(cls) -> Fault:
        """200 whose body is not valid JSON."""
        return cls("malformed", 200)

    @classmethod
    def drop(cls) -> Fault:
        """Close the connection without sending any response."""
        return cls("drop")


@dataclass(frozen=True)
class WireResponse:
    """What to send: ``body`` None means close the connection without answering; ``delay`` is
    the wait (seconds) before sending."""

    status: int
    body: bytes | None
    headers: dict[str, str]
    delay: float = 0.0


def json_response(
    protocol: str,
    status: int,
    payload: Any,
    delay: float = 0.0,
    headers: dict[str, str] | None = None,
) -> WireResponse:
    """A JSON response carrying the provider's request-id header."""
    name, value = request_id_header(protocol)
    all_headers = {name: value, **(headers or {})}
    return WireResponse(status, json.dumps(payload).encode(), all_headers, delay)


def error_response(
    protocol: str, status: int, message: str, headers: dict[str, str] | None = None
) -> WireResponse:
    """An immediate error response in the provider's error shape."""
    return json_response(protocol, status, format_error(protocol, status, message), 0.0, headers)


def fault_response(protocol: str, fault: Fault) -> WireResponse:
    """The response for any fault but ``slow`` (which answers normally, later)."""
    if fault.kind == "drop":
        return WireResponse(0, None, {})
    if fault.kind == "malformed":
        return WireResponse(200, _MALFORMED_BODY, dict([request_id_header(protocol)]))
    headers = {}
    if fault.retry_after is not None:
        headers["Retry-After"] = f"{fault.retry_after:.3f}".rstrip("0").rstrip(".")
        headers["retry-after-ms"] = str(round(fault.retry_after * 1000))
    return error_response(protocol, fault.http_status, fault.message, headers)


def route(path: str) -> tuple[str, str | None] | None:
    """``(protocol, azure deployment or None)`` for a POST path, or None if no route matches."""
    if path == "/v1/chat/completions":
        return "openai", None
    if path == "/v1/messages":
        return "anthropic", None
    match = _AZURE_PATH.match(path)
    return ("azure", unquote(match.group(1))) if match else None


def guess_protocol(path: str, headers: dict[str, str]) -> str:
    """Which provider's error shape suits a request to an unknown route."""
    if path.startswith("/openai/"):
        return "azure"
    return "anthropic" if "anthropic-version" in headers or path.endswith("/messages") else "openai"
