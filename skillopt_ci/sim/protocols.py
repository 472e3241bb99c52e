"""Wire formats spoken by the scripted model server.

Parsing turns an OpenAI Chat Completions, Azure OpenAI, OpenAI Responses or Anthropic request
body into one :class:`ScriptedRequest`; formatting turns a :class:`ScriptedReply`, an error or a
:class:`Fault` into the response that provider's SDK parses. The per-protocol translation lives
in :mod:`wire_openai` and :mod:`wire_anthropic`. No I/O happens here.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from skillopt_ci.sim.wire_anthropic import format_anthropic, parse_anthropic
from skillopt_ci.sim.wire_common import (
    RequestError,
    ScriptedToolCall,
    flatten_content,
    reply_tokens,
)
from skillopt_ci.sim.wire_openai import (
    format_chat,
    format_responses,
    parse_chat,
    parse_responses,
)
from skillopt_ci.sim.wire_stream import stream_frames

__all__ = ["Fault", "RequestError", "ScriptedReply", "ScriptedRequest", "ScriptedToolCall", "flatten_content"]

PROTOCOLS = ("openai", "azure", "anthropic", "responses")
STREAMING = ("anthropic", "responses")  # protocols whose ``stream: true`` is answered with SSE

_AZURE_PATH = re.compile(r"^/openai/deployments/([^/]+)/chat/completions$")
_AZURE_RESPONSES_PATH = re.compile(r"^/openai/(?:deployments/([^/]+)/)?responses$")
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


@dataclass(frozen=True)
class ScriptedRequest:
    """One model call as a policy sees it, whatever protocol carried it.

    ``protocol`` is "openai", "azure" (Chat Completions on an Azure deployment route),
    "anthropic" or "responses" (the OpenAI Responses API, on ``/v1/responses`` or Azure's
    ``/openai/responses`` and ``/openai/deployments/<d>/responses``).

    ``system`` joins the OpenAI ``system``/``developer`` messages (and the Responses
    ``instructions``) with blank lines, or holds Anthropic's ``system`` field. ``messages`` holds
    the other turns as ``{"role", "content"}`` with content flattened to text (text parts joined
    with newlines), plus, when present: ``"tool_calls": [{"id", "name", "arguments"}]`` on
    assistant turns (``arguments`` as JSON text); ``"images": [{"media_type", "sha256",
    "bytes"}]`` (``bytes`` is the decoded image). Tool results are their own messages ``{"role":
    "tool", "tool_call_id", "content", "is_error"}`` (``is_error`` is Anthropic's flag, always
    False on the OpenAI routes, which have none); Responses ``function_call`` and
    ``custom_tool_call`` items join the assistant turn before them (a custom call's entry has
    ``"kind": "custom"`` and its raw ``input`` as ``arguments``), and ``function_call_output`` /
    ``custom_tool_call_output`` items become tool messages. ``tools`` lists the function tools
    offered as ``{"name", "description", "parameters"}``, then Responses ``custom`` tools (Codex's
    ``apply_patch``) with ``"kind": "custom"`` and their ``format``; other tool types (web
    search, namespaces) are left out. ``stream: true`` (Responses and Anthropic only) stays in
    ``params``; the reply then goes out as Server-Sent Events. ``params`` holds every other body field (temperature,
    max_tokens, seed, top_p, ...). ``model`` is the Azure deployment on Azure deployment routes.
    ``headers`` has lower-cased names. ``call_index`` is the 0-based arrival order since the
    server started or was reset. ``body`` is the parsed JSON as sent.
    """

    protocol: str
    model: str
    system: str
    messages: list[dict[str, Any]]
    params: dict[str, Any]
    headers: dict[str, str]
    call_index: int
    body: dict[str, Any]
    tools: list[dict[str, Any]] = field(default_factory=list)

    @property
    def last_user(self) -> str:
        """Text of the last user message, or "" when there is none."""
        for message in reversed(self.messages):
            if message["role"] == "user":
                return message["content"]
        return ""

    @property
    def tool_results(self) -> list[dict[str, Any]]:
        """The tool-result messages after the last assistant turn (what the tools just answered)."""
        found: list[dict[str, Any]] = []
        for message in reversed(self.messages):
            if message["role"] == "assistant":
                break
            if message["role"] == "tool":
                found.append(message)
        return found[::-1]

    @property
    def images(self) -> list[dict[str, Any]]:
        """Every image in the request, in order."""
        return [image for m in self.messages for image in m.get("images", ())]

    @property
    def prompt_tokens(self) -> int:
        """Whitespace-separated tokens in the system prompt and all messages."""
        return len(self.system.split()) + sum(len(m["content"].split()) for m in self.messages)


@dataclass
class ScriptedReply:
    """What a policy answers. A plain ``str`` from a policy means ``ScriptedReply(text)``.

    ``finish_reason`` uses OpenAI names ("stop", "length", ...) and is mapped to Anthropic's
    ``stop_reason`` ("end_turn", "max_tokens", ...); Anthropic names are mapped back for OpenAI.
    ``tool_calls`` are sent as Chat Completions ``tool_calls``, Responses ``function_call`` items
    or Anthropic ``tool_use`` blocks; with calls, "stop" becomes "tool_calls" / "tool_use" and
    an empty ``text`` sends no text at all (``content: null``, no text block, no message item).
    Token counts default to whitespace counts of the prompt and of ``text`` plus the calls'
    arguments. ``omit_usage`` leaves ``usage`` out of the body. ``latency`` (seconds) overrides
    the server's latency for this reply.
    """

    text: str = ""
    finish_reason: str = "stop"
    input_tokens: int | None = None
    output_tokens: int | None = None
    omit_usage: bool = False
    latency: float | None = None
    tool_calls: tuple[ScriptedToolCall, ...] = ()

    def __post_init__(self) -> None:
        self.tool_calls = tuple(self.tool_calls)

    @property
    def openai_finish(self) -> str:
        if self.tool_calls and self.finish_reason in ("stop", "end_turn"):
            return "tool_calls"
        return _TO_OPENAI_FINISH.get(self.finish_reason, self.finish_reason)

    @property
    def anthropic_stop(self) -> str:
        if self.tool_calls and self.finish_reason in ("stop", "end_turn"):
            return "tool_use"
        return _TO_ANTHROPIC_STOP.get(self.finish_reason, self.finish_reason)


_PARSERS = {"openai": parse_chat, "azure": parse_chat, "responses": parse_responses, "anthropic": parse_anthropic}
_FORMATTERS = {"openai": format_chat, "azure": format_chat, "responses": format_responses,
               "anthropic": format_anthropic}


def parse_request(
    protocol: str, body: Any, headers: dict[str, str], deployment: str | None = None
) -> ScriptedRequest:
    """Build a request (``call_index`` -1) from a parsed body, or raise :class:`RequestError`."""
    if not isinstance(body, dict):
        raise RequestError(400, "The request body must be a JSON object.")
    if body.get("stream") and protocol not in STREAMING:
        raise RequestError(400, "ScriptedModelServer supports stream=true only on the Responses API "
                                "and Anthropic Messages.")
    model = deployment if deployment is not None else body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError(400, "'model' is required.")
    system, messages, tools, params = _PARSERS[protocol](body)
    return ScriptedRequest(protocol, model, system, messages, params, headers, -1, body, tools)


def format_reply(request: ScriptedRequest, reply: ScriptedReply) -> dict[str, Any]:
    """The success body for ``request.protocol``."""
    input_tokens = request.prompt_tokens if reply.input_tokens is None else reply.input_tokens
    output_tokens = reply_tokens(reply.text, reply.tool_calls) if reply.output_tokens is None else reply.output_tokens
    return _FORMATTERS[request.protocol](request, reply, input_tokens, output_tokens)


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
        """Close the connection without sending any response; on a streaming request, send the
        status and the first event, then close it mid-stream."""
        return cls("drop")


@dataclass(frozen=True)
class WireResponse:
    """What to send: ``body`` None means close the connection without answering; ``delay`` is
    the wait (seconds) before sending. ``frames`` (with ``body`` b"") makes it a Server-Sent
    Events stream sent as HTTP chunks; ``cut`` > 0 closes the connection after that many frames,
    without ending the stream (a connection dropped mid-stream)."""

    status: int
    body: bytes | None
    headers: dict[str, str]
    delay: float = 0.0
    frames: tuple[bytes, ...] | None = None
    cut: int = 0


def stream_response(protocol: str, payload: dict[str, Any], delay: float = 0.0, cut: int = 0) -> WireResponse:
    """A 200 SSE stream that delivers ``payload`` (a finished Responses or Messages body)."""
    name, value = request_id_header(protocol)
    frames = tuple(stream_frames(protocol, payload))
    return WireResponse(200, b"", {name: value}, delay, frames, cut)


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
    if path == "/v1/responses":
        return "responses", None
    match = _AZURE_RESPONSES_PATH.match(path)
    if match:
        return "responses", unquote(match.group(1)) if match.group(1) else None
    match = _AZURE_PATH.match(path)
    return ("azure", unquote(match.group(1))) if match else None


def guess_protocol(path: str, headers: dict[str, str]) -> str:
    """Which provider's error shape suits a request to an unknown route."""
    if path.startswith("/openai/"):
        return "azure"
    return "anthropic" if "anthropic-version" in headers or path.endswith("/messages") else "openai"
