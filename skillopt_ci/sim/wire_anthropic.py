"""Anthropic Messages as the scripted server reads and answers them. Parsing gives ``(system,
messages, tools, params)`` in the normalized shape
:class:`~skillopt_ci.sim.protocols.ScriptedRequest` documents: a user turn's
``tool_result`` blocks become ``role: tool`` messages (in order, before the turn's other
content), an assistant turn's ``tool_use`` blocks become its ``tool_calls``."""

from __future__ import annotations

import json
import uuid
from typing import Any

from skillopt_ci.sim.wire_common import RequestError, decode_image, flatten_content

Parsed = tuple[str, list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]


def parse_anthropic(body: dict[str, Any]) -> Parsed:
    raw = body.get("messages")
    if not isinstance(raw, list) or not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in raw):
        raise RequestError(400, "'messages' must be a list of objects with a 'role'.")
    if not isinstance(body.get("max_tokens"), int):
        raise RequestError(400, "max_tokens: Field required")
    messages: list[dict[str, Any]] = []
    for i, m in enumerate(raw):
        messages.extend(_turn(m["role"], m.get("content"), f"messages.{i}.content"))
    tools = []
    for j, tool in enumerate(body.get("tools") or ()):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise RequestError(400, f"tools.{j}: each tool needs a name.")
        if "input_schema" in tool:  # server tools (web search...) have none: not function tools
            tools.append({"name": tool["name"], "description": tool.get("description", ""),
                          "parameters": tool["input_schema"]})
    params = {k: v for k, v in body.items() if k not in ("model", "messages", "system", "tools")}
    return flatten_content(body.get("system")), messages, tools, params


def _turn(role: str, content: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return [{"role": role, "content": flatten_content(content)}]
    out: list[dict[str, Any]] = []
    rest: list[Any] = []
    images: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_result":
            out.append(_result(block, f"{where}.{j}"))
        elif kind == "tool_use":
            calls.append({"id": block.get("id"), "name": block.get("name"),
                          "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False)})
        else:
            if kind == "image":
                images.append(_image(block, f"{where}.{j}"))
            rest.append(block)
    if rest or not out:
        entry: dict[str, Any] = {"role": role, "content": flatten_content(rest)}
        if calls:
            entry["tool_calls"] = calls
        if images:
            entry["images"] = images
        out.append(entry)
    return out


def _result(block: dict[str, Any], where: str) -> dict[str, Any]:
    inner = block.get("content")
    entry: dict[str, Any] = {"role": "tool", "tool_call_id": block.get("tool_use_id"),
                             "content": flatten_content(inner), "is_error": bool(block.get("is_error", False))}
    if isinstance(inner, list):
        images = [_image(b, f"{where}.content.{k}") for k, b in enumerate(inner)
                  if isinstance(b, dict) and b.get("type") == "image"]
        if images:
            entry["images"] = images
    return entry


def _image(block: dict[str, Any], where: str) -> dict[str, Any]:
    source = block.get("source")
    if not isinstance(source, dict) or source.get("type") != "base64":
        raise RequestError(400, f"{where}.image.source: ScriptedModelServer accepts only base64 image sources.")
    return decode_image(str(source.get("media_type")), str(source.get("data", "")), f"{where}.image.source.base64")


def format_anthropic(request: Any, reply: Any, input_tokens: int, output_tokens: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text or not reply.tool_calls:
        content.append({"type": "text", "text": reply.text})
    content.extend({"type": "tool_use", "id": c.call_id(request.body, i, "toolu_"), "name": c.name,
                    "input": c.arguments_object()} for i, c in enumerate(reply.tool_calls))
    message: dict[str, Any] = {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": content,
        "stop_reason": reply.anthropic_stop,
        "stop_sequence": None,
    }
    if not reply.omit_usage:
        message["usage"] = {"input_tokens": input_tokens, "output_tokens": output_tokens,
                            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    return message
