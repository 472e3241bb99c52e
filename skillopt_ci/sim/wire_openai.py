"""OpenAI Chat Completions (also Azure's) and the OpenAI Responses API, as the scripted server
reads and answers them. Parsing gives ``(system, messages, tools, params)`` in the normalized
shape :class:`~skillopt_ci.sim.protocols.ScriptedRequest` documents; formatting gives the
body the ``openai`` SDK parses."""

from __future__ import annotations

import time
import uuid
from typing import Any

from skillopt_ci.sim.wire_common import RequestError, decode_data_url, flatten_content

Parsed = tuple[str, list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]


def parse_chat(body: dict[str, Any]) -> Parsed:
    raw = body.get("messages")
    if not isinstance(raw, list) or not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in raw):
        raise RequestError(400, "'messages' must be a list of objects with a 'role'.")
    system: list[str] = []
    messages: list[dict[str, Any]] = []
    for i, m in enumerate(raw):
        role, content = m["role"], m.get("content")
        images = _chat_images(content, f"messages[{i}].content")
        if images and role != "user":
            raise RequestError(400, f"Image URLs are only allowed for messages with role 'user', but this "
                                    f"message with role '{role}' contains an image URL.")
        if role in ("system", "developer"):
            system.append(flatten_content(content))
        elif role == "tool":
            messages.append({"role": "tool", "tool_call_id": m.get("tool_call_id"),
                             "content": flatten_content(content), "is_error": False})
        else:
            entry: dict[str, Any] = {"role": role, "content": flatten_content(content)}
            if role == "assistant" and m.get("tool_calls"):
                entry["tool_calls"] = [_chat_call(c, f"messages[{i}].tool_calls") for c in m["tool_calls"]]
            if images:
                entry["images"] = images
            messages.append(entry)
    tools = [_tool(t.get("function"), "tools") for t in body.get("tools") or () if t.get("type") == "function"]
    params = {k: v for k, v in body.items() if k not in ("model", "messages", "tools")}
    return "\n\n".join(system), messages, tools, params


def _chat_images(content: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return []
    found = []
    for j, part in enumerate(content):
        if isinstance(part, dict) and part.get("type") == "image_url":
            url = part.get("image_url")
            found.append(decode_data_url(url.get("url") if isinstance(url, dict) else url, f"{where}[{j}]"))
    return found


def _chat_call(call: Any, where: str) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise RequestError(400, f"{where}: each tool call needs an id and a function with a name.")
    return {"id": call.get("id"), "name": function["name"], "arguments": function.get("arguments", "")}


def _tool(spec: Any, where: str) -> dict[str, Any]:
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise RequestError(400, f"{where}: each function tool needs a name.")
    return {"name": spec["name"], "description": spec.get("description", ""),
            "parameters": spec.get("parameters", {})}


def parse_responses(body: dict[str, Any]) -> Parsed:
    raw = body.get("input")
    if isinstance(raw, str):
        raw = [{"role": "user", "content": raw}]
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
        raise RequestError(400, "'input' must be a string or a list of input items.")
    system = [flatten_content(body["instructions"])] if body.get("instructions") else []
    messages: list[dict[str, Any]] = []
    for i, item in enumerate(raw):
        kind = item.get("type", "message")
        if kind == "message":
            _responses_message(item, f"input[{i}]", system, messages)
        elif kind in ("function_call", "custom_tool_call"):
            _responses_call(item, messages)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"),
                             "content": flatten_content(item.get("output")), "is_error": False})
        elif kind != "reasoning":
            raise RequestError(400, f"input[{i}]: ScriptedModelServer does not support items of type {kind!r}.")
    tools = [_tool(t, "tools") for t in body.get("tools") or () if t.get("type") == "function"]
    tools += [dict(_tool(t, "tools"), kind="custom", format=t.get("format"))
              for t in body.get("tools") or () if t.get("type") == "custom"]
    params = {k: v for k, v in body.items() if k not in ("model", "input", "instructions", "tools")}
    return "\n\n".join(system), messages, tools, params


def _responses_call(item: dict[str, Any], messages: list[dict[str, Any]]) -> None:
    """A function or custom tool call joins the assistant turn before it (or opens one)."""
    call: dict[str, Any] = {"id": item.get("call_id"), "name": item.get("name")}
    if item["type"] == "custom_tool_call":
        call.update(arguments=item.get("input", ""), kind="custom")
    else:
        call["arguments"] = item.get("arguments", "")
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant":
        last.setdefault("tool_calls", []).append(call)
    else:
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})


def _responses_message(item: dict[str, Any], where: str, system: list[str], messages: list[dict[str, Any]]) -> None:
    role, content = item.get("role"), item.get("content")
    if not isinstance(role, str):
        raise RequestError(400, f"{where}: a message item needs a 'role'.")
    images = []
    if isinstance(content, list):
        for j, part in enumerate(content):
            if isinstance(part, dict) and part.get("type") == "input_image":
                images.append(decode_data_url(part.get("image_url"), f"{where}.content[{j}]"))
    if role in ("system", "developer"):
        system.append(flatten_content(content))
        return
    entry: dict[str, Any] = {"role": role, "content": flatten_content(content)}
    if images:
        entry["images"] = images
    messages.append(entry)


def format_chat(request: Any, reply: Any, input_tokens: int, output_tokens: int) -> dict[str, Any]:
    calls = reply.tool_calls
    message: dict[str, Any] = {"role": "assistant", "content": reply.text if reply.text or not calls else None,
                               "refusal": None}
    if calls:
        message["tool_calls"] = [
            {"id": c.call_id(request.body, i, "call_"), "type": "function",
             "function": {"name": c.name, "arguments": c.arguments_json()}}
            for i, c in enumerate(calls)
        ]
    completion: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.openai_finish, "logprobs": None}],
    }
    if not reply.omit_usage:
        completion["usage"] = {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                               "total_tokens": input_tokens + output_tokens}
    return completion


_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def format_responses(request: Any, reply: Any, input_tokens: int, output_tokens: int) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if reply.text or not reply.tool_calls:
        output.append({"type": "message", "id": f"msg_{uuid.uuid4().hex[:24]}", "status": "completed",
                       "role": "assistant",
                       "content": [{"type": "output_text", "text": reply.text, "annotations": []}]})
    for i, c in enumerate(reply.tool_calls):
        call_id = c.call_id(request.body, i, "call_")
        if c.kind == "custom":
            output.append({"type": "custom_tool_call", "id": f"ctc_{uuid.uuid4().hex[:24]}", "call_id": call_id,
                           "name": c.name, "input": c.arguments_json(), "status": "completed"})
        else:
            output.append({"type": "function_call", "id": f"fc_{uuid.uuid4().hex[:24]}", "call_id": call_id,
                           "name": c.name, "arguments": c.arguments_json(), "status": "completed"})
    reason = _INCOMPLETE.get(reply.openai_finish)
    response: dict[str, Any] = {
        "id": f"resp_{uuid.uuid4().hex[:24]}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if reason else "completed",
        "error": None,
        "incomplete_details": {"reason": reason} if reason else None,
        "instructions": request.body.get("instructions"),
        "model": request.model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": request.body.get("tool_choice", "auto"),
        "tools": request.body.get("tools") or [],
        "metadata": {},
    }
    if not reply.omit_usage:
        response["usage"] = {"input_tokens": input_tokens, "output_tokens": output_tokens,
                             "total_tokens": input_tokens + output_tokens,
                             "input_tokens_details": {"cached_tokens": 0},
                             "output_tokens_details": {"reasoning_tokens": 0}}
    return response
